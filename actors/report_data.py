"""The slow path's figures in a MAST run's report (MAST §5.3, §5.6; DESIGN.md §9).

- `demand_supply{max,std}`, `colocation_rate` (V2: share of high-priority
  GPU-hours whose data and GPUs are colocated), `colocation_rate_v1`,
  `training_at_home_rate`: Tetris's figures for the placement in force at
  the end (its last `tetris.state`; see `actors.policies.tetris_metrics`).
  None when the run had no Tetris.
- `bytes_moved_per_day`: bytes the migration service moved, per emulated day
  (Fig. 8's "moved"); `bytes_planned_per_day`: bytes Tetris's passes planned
  plus bytes asked for on demand, per day (Fig. 8's "planned").
- `storage`: per region, bytes held (ready or on their way) and capacity.
"""

from __future__ import annotations

from typing import Any

from store import Store, catalog
from store.copies import DAY_US


async def slow_path_figures(
    store: Store, tetris_state: dict[str, Any], on_demand_bytes: dict[int, int], end_us: int
) -> dict[str, Any]:
    days = max(1, -(-end_us // DAY_US))
    moved = [0] * days
    for day, nbytes in await store.fetchall("SELECT day, bytes FROM migration_days"):
        if 0 <= day < days:
            moved[day] += nbytes
    planned = [0] * days
    for t_us, nbytes in await store.fetchall("SELECT t_us, bytes_planned FROM tetris_passes"):
        planned[min(t_us // DAY_US, days - 1)] += nbytes
    for day, nbytes in on_demand_bytes.items():
        planned[min(day, days - 1)] += nbytes
    return {
        "demand_supply": {
            "max": tetris_state.get("demand_supply_max"),
            "std": tetris_state.get("demand_supply_std"),
        },
        "colocation_rate": tetris_state.get("colocation_rate"),
        "colocation_rate_v1": tetris_state.get("colocation_rate_v1"),
        "training_at_home_rate": tetris_state.get("training_at_home_rate"),
        "bytes_moved_per_day": moved,
        "bytes_planned_per_day": planned,
        "storage": {
            region: {"used_bytes": used, "capacity_bytes": cap}
            for region, (used, cap) in (await catalog.storage(store)).items()
        },
    }
