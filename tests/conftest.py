"""Shared fixtures: one full `leader-lease` run per test session, and readers of run databases.

The full run takes about two seconds, so the tests of the user-facing surface
(replay, export, check, the lease story) share it instead of each running it.
The readers themselves live in `tests/support/rundb.py`.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path

import pytest

from emulator.cli import main as cli
from store.runs import RunMeta
from store.trace import TraceRow
from tests.support.rundb import RunDb, read_run_db, trace_hash_of


@pytest.fixture(scope="session")
def lease_run(tmp_path_factory: pytest.TempPathFactory) -> RunDb:
    """`mastemu run leader-lease` to its end (6 h emulated), seed 1."""
    db = tmp_path_factory.mktemp("lease") / "leader-lease-1.db"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["run", "leader-lease", "--seed", "1", "--out", str(db), "--no-progress"])
    return RunDb(db, code, out.getvalue())


@pytest.fixture(scope="session")
def lease_trace(lease_run: RunDb) -> tuple[RunMeta, list[TraceRow]]:
    return read_run_db(lease_run.db)


@pytest.fixture
def read_run() -> Callable[[Path], tuple[RunMeta, list[TraceRow]]]:
    return read_run_db


@pytest.fixture
def hash_of() -> Callable[[str], str]:
    return trace_hash_of
