"""Shared fixtures: full runs of `leader-lease` and `quickstart`, and readers of run databases.

The tests of the user-facing surface (replay, export, check, report, view,
the lease story) read these runs instead of each making its own; the
quickstart run (about ten seconds) is made once for all xdist workers. The
readers themselves live in `tests/support/rundb.py`.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from emulator.cli import main as cli
from emulator.run.collector import MIDDLE, OLD, YOUNG
from store.runs import RunMeta
from store.trace import TraceRow
from tests.support.rundb import RunDb, read_run_db, trace_hash_of


def pytest_configure(config: pytest.Config) -> None:
    """The collector's settings of a run for the whole session, as `mastemu` sets them.

    Tests decode whole traces and build worlds outside any run; under
    CPython's default thresholds the collector rescans their heap again and
    again (`emulator/run/collector.py`).
    """
    del config
    gc.set_threshold(YOUNG, MIDDLE, OLD)


# The files that keep a worker longest, handed out first: xdist gives whole files
# to workers in collection order (`--dist loadfile`), so one of these drawn last
# left the other worker idle for its length (test_meta_day: 14 s at the end).
FIRST = (
    "tests/system/test_meta_day.py",
    "tests/system/test_liveness.py",
    "tests/system/test_view_state.py",
    "tests/system/test_explore_aim.py",
    "tests/system/test_testing_api.py",
    "tests/system/test_explore.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put `FIRST`'s files first, in its order; every other test keeps its place."""
    rank = {path: i for i, path in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(FIRST)))


@pytest.fixture(scope="session")
def lease_run(tmp_path_factory: pytest.TempPathFactory) -> RunDb:
    """`mastemu run leader-lease` to its end (6 h emulated), seed 1."""
    db = tmp_path_factory.mktemp("lease") / "leader-lease-1.db"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["run", "leader-lease", "--seed", "1", "--out", str(db), "--no-progress"])
    return RunDb(db, code, out.getvalue())


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory: pytest.TempPathFactory) -> RunDb:
    """`mastemu run quickstart` to its end: one run shared by every worker; read it, never write.

    xdist's workers share the parent of their base temporary folders; the
    first worker to take the lock makes the run, the others wait for it.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    db, done = root / "quickstart.db", root / "quickstart.json"
    with (root / "quickstart.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = cli.main(["run", "quickstart", "--out", str(db), "--no-progress"])
            done.write_text(json.dumps({"code": code, "stdout": out.getvalue()}))
    made = json.loads(done.read_text())
    return RunDb(db, made["code"], made["stdout"])


@pytest.fixture(scope="session")
def lease_trace(lease_run: RunDb) -> tuple[RunMeta, list[TraceRow]]:
    return read_run_db(lease_run.db)


@pytest.fixture
def read_run() -> Callable[[Path], tuple[RunMeta, list[TraceRow]]]:
    return read_run_db


@pytest.fixture
def hash_of() -> Callable[[str], str]:
    return trace_hash_of
