"""Shared fixtures: one full `leader-lease` run per test session, and a reader
for run databases.

The full run takes about two seconds, so the tests of the user-facing surface
(replay, export, check, the lease story) share it instead of each running it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from emulator.cli import main as cli
from emulator.trace import TraceEvent
from store import Store
from store.runs import RunMeta, get_run_meta
from store.trace import TraceRow, iter_trace


@dataclass(frozen=True)
class RunDb:
    """What a run left: its database, the exit code and what `run` printed."""

    db: Path
    code: int
    stdout: str

    @property
    def trace_hash(self) -> str:
        return trace_hash_of(self.stdout)


def trace_hash_of(stdout: str) -> str:
    """The hash from `run`'s last line, `trace-hash: <hex>`."""
    last = stdout.strip().splitlines()[-1]
    prefix = "trace-hash: "
    assert last.startswith(prefix), f"last line is not a trace hash: {last!r}"
    return last.removeprefix(prefix)


async def _read(db: Path) -> tuple[RunMeta | None, list[TraceRow]]:
    async with Store.open_ctx(db) as store:
        meta = await get_run_meta(store)
        rows = [row async for row in iter_trace(store)]
    return meta, rows


def read_run_db(db: Path) -> tuple[RunMeta, list[TraceRow]]:
    """Run metadata and every stored trace event (for synchronous tests)."""
    meta, rows = asyncio.run(_read(db))
    assert meta is not None, f"{db}: no run metadata"
    return meta, rows


def trace_events(db: Path) -> list[TraceEvent]:
    """Every stored trace event of a run database, as the online checkers saw them."""

    async def read() -> list[TraceEvent]:
        async with Store.open_ctx(db) as store:
            return [
                TraceEvent(r.seq, r.t_us, r.kind, r.src, r.dst, r.type, r.payload)
                async for r in iter_trace(store)
            ]

    return asyncio.run(read())


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `mastemu ARGV` (argparse exits count too)."""
    try:
        code = cli.main(list(argv))
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


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
