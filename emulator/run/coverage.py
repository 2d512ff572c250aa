"""What a recorded run reached of its system's sometimes properties (`emulator.sometimes`)."""

from __future__ import annotations

from pathlib import Path

from emulator.registry import load_plugins
from emulator.run.scenario import decode_scenario
from emulator.sometimes import KINDS, tally
from emulator.trace import TraceEvent
from store.db import Store
from store.runs import get_run_meta
from store.trace import iter_trace


def system_kind(system: dict[str, object]) -> str | None:
    kind = system.get("kind") if system else None
    return str(kind) if kind else None


async def run_system(store: Store, source: str) -> str | None:
    """The system kind of the run in `store` (None: declared actors only)."""
    meta = await get_run_meta(store)
    if meta is None or not meta.scenario_text:
        return None
    return system_kind(decode_scenario(meta.scenario_text, f"{source} (stored scenario)").system)


async def reached(db: Path) -> dict[str, int]:
    """Every sometimes property of the run's system, with how often the run reached it."""
    load_plugins()
    async with Store.open_ctx(db) as store:
        system = await run_system(store, str(db))
        events = [
            TraceEvent(r.seq, r.t_us, r.kind, r.src, r.dst, r.type, r.payload)
            async for r in iter_trace(store, kinds=KINDS)
        ]
    return tally(events, system)
