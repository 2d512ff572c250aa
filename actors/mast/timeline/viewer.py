"""The viewer `actors.plugin` registers for MAST and cluster runs (`emulator.registry.Viewer`).

Both systems keep their state in MAST's tables (the cluster system places
jobs through the same queue, fleet and cluster managers), so one fold
serves them; a run of scenario-declared actors only (the lease
demonstration) has leases and faults, which the fold reads alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.mast.timeline import page
from actors.mast.timeline.recording import new_fold, record, state_at
from actors.mast.timeline.status import StatusLine
from store import Store


class StateViewer:
    """`mastemu view`, `replay --step` and `Run.state_at` for runs kept in MAST's tables."""

    async def state_tables(self, db: Path, t_us: int | None) -> dict[str, list[dict[str, Any]]]:
        return (await state_at(db, t_us)).store_tables()

    async def render_view(self, db: Path) -> str:
        return page.render(await record(db))

    async def status_line(self, db: Path) -> StatusLine:
        async with Store.open_ctx(db) as store:
            return StatusLine(await new_fold(store))
