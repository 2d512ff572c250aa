"""Reading what a run left in its database: the run's metadata, its trace, its hash.

One reader for every test that judges a run from its database (the run
commands write it; the online checkers see the same events).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

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
