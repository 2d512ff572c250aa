"""The slow path's figures in a MAST run's report (MAST §5.3, §5.6; docs/design.md §9).

- `demand_supply{max,std}`: Tetris's figures for the placement in force at
  the end (its last `tetris.state`; see `actors.policies.mast.tetris.metrics`).
- `colocation_rate` (V2: share of high-priority GPU-hours whose data and
  GPUs the placement colocates), `colocation_rate_v1`,
  `training_at_home_rate`, `data_reachable_rate` (with extra replicas):
  averaged over time from Tetris's first figures to the end of the run. The
  GPU-hours of a day accrue all day, so a placement that leaves jobs without
  their data for hours while replicas are copied loses those hours; the
  value at the end alone would not show it. The `_end` variants are the
  last values.
- `placement_series`: [t_s, demand/supply max, colocation rate] at every
  change, for plots.
  All of these are None (empty) when the run had no Tetris.
- `bytes_moved_per_day`: bytes the migration service moved, per emulated day
  (Fig. 8's "moved"); `bytes_planned_per_day`: bytes Tetris's passes planned
  plus bytes asked for on demand, per day (Fig. 8's "planned").
- `storage`: per region, bytes held (ready or on their way) and capacity.
"""

from __future__ import annotations

from typing import Any

from store import Store
from store.mast import catalog
from store.mast.copies import DAY_US

_PLACEMENT_RATES = (
    "colocation_rate",
    "colocation_rate_v1",
    "training_at_home_rate",
    "data_reachable_rate",
)


def _time_mean(states: list[tuple[int, dict[str, Any]]], key: str, end_us: int) -> float | None:
    """Mean of a step function over [first change, end_us); None without values."""
    steps = [(t, p[key]) for t, p in states if p.get(key) is not None]
    if not steps:
        return None
    span = end_us - steps[0][0]
    if span <= 0:
        return steps[-1][1]
    bounds = [*steps[1:], (end_us, None)]
    pairs = zip(steps, bounds, strict=True)
    return sum(v * (min(t1, end_us) - t0) for (t0, v), (t1, _) in pairs) / span


async def slow_path_figures(
    store: Store,
    tetris_states: list[tuple[int, dict[str, Any]]],
    on_demand_bytes: dict[int, int],
    end_us: int,
) -> dict[str, Any]:
    last = tetris_states[-1][1] if tetris_states else {}
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
            "max": last.get("demand_supply_max"),
            "std": last.get("demand_supply_std"),
        },
        **{key: _time_mean(tetris_states, key, end_us) for key in _PLACEMENT_RATES},
        **{f"{key}_end": last.get(key) for key in _PLACEMENT_RATES},
        "placement_series": [
            [t / 1e6, p.get("demand_supply_max"), p.get("colocation_rate")]
            for t, p in tetris_states
        ],
        "bytes_moved_per_day": moved,
        "bytes_planned_per_day": planned,
        "storage": {
            region: {"used_bytes": used, "capacity_bytes": cap}
            for region, (used, cap) in (await catalog.storage(store)).items()
        },
    }
