"""How good a data placement is, in MAST §5.6's terms (what the report shows).

- Demand/supply per region and GPU type for high-priority jobs: the
  GPU-hours of the high-priority ML jobs whose R(job) is the region, over the
  region's supply of that type, scaled by the type's global supply/demand so
  that a perfectly balanced placement gives 1.0 everywhere. Jobs with R(job)
  NULL count nowhere. The max and the standard deviation across (region,
  type) pairs with supply are the §5.6 figures (2.63 → 0.98, 0.76 → 0.30).
- Colocation rate, V2 definition (§5.6): the share of high-priority
  GPU-hours whose job the placement colocates with its data: R(job) holds
  all its tables by definition, and has its GPU type (what constraint 6
  sums). `colocation_rate_v1`: the same counted per ML job, every job alike,
  small or large, high or low priority (V1's definition).
- Training-at-home-region rate: the share of high-priority *jobs* whose
  R(job) has their GPU type (§3.3 tracks the number of such jobs).
- Data-reachable rate: the share of high-priority GPU-hours whose job has
  some region holding all its tables (home or ready replica) and its GPU
  type, i.e. colocation once §3.5's extra replicas are counted too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from actors.policies.mast.tetris.cost import TetrisJob, TetrisParams, TetrisSnapshot, job_regions


def placement_metrics(
    snapshot: TetrisSnapshot,
    params: TetrisParams,
    ready: Mapping[str, set[str]] | None = None,
) -> dict[str, float | None]:
    """The figures above for the snapshot's placement.

    `ready` maps a table to the regions holding it ready (home included);
    by default every region the snapshot lists for it.
    """
    homes = {t.name: t.home for t in snapshot.tables}
    holds = (
        {t.name: {t.home, *t.replicas} for t in snapshot.tables} if ready is None else dict(ready)
    )
    job_r = job_regions(snapshot, homes)
    supply = {r.name: r.gpu_supply_hours for r in snapshot.regions}
    high = [
        j
        for j in snapshot.jobs
        if j.kind == "ml" and j.gpu_type is not None and j.priority <= params.high_priority_max
    ]
    demand: dict[tuple[str, str], float] = {}
    for j in high:
        r = job_r[j.id]
        if r is not None:
            key = (r, j.gpu_type or "")
            demand[key] = demand.get(key, 0.0) + j.gpu_hours
    ratios = []
    for g in sorted({g for s in supply.values() for g in s}):
        s_all = sum(s.get(g, 0.0) for s in supply.values())
        d_all = sum(d for (_, gt), d in demand.items() if gt == g)
        if s_all <= 0 or d_all <= 0:
            continue
        for r in sorted(supply):
            s = supply[r].get(g, 0.0)
            if s > 0:
                ratios.append((demand.get((r, g), 0.0) / s) * (s_all / d_all))
    hp_hours = sum(j.gpu_hours for j in high)

    def colocated(j_tables: tuple[str, ...], gpu_type: str) -> bool:
        regions = set.intersection(*(holds.get(t, set()) for t in j_tables))
        return any(supply.get(r, {}).get(gpu_type, 0.0) > 0 for r in regions)

    def at_home(j: TetrisJob) -> bool:
        r = job_r[j.id]
        return r is not None and supply[r].get(j.gpu_type or "", 0.0) > 0

    ml = [j for j in snapshot.jobs if j.kind == "ml" and j.gpu_type is not None]
    reachable_hours = sum(j.gpu_hours for j in high if colocated(j.tables, j.gpu_type or ""))
    home_hours = sum(j.gpu_hours for j in high if at_home(j))
    mean = sum(ratios) / len(ratios) if ratios else None
    return {
        "demand_supply_max": max(ratios) if ratios else None,
        "demand_supply_std": (
            math.sqrt(sum((x - mean) ** 2 for x in ratios) / len(ratios))
            if mean is not None
            else None
        ),
        "colocation_rate": home_hours / hp_hours if hp_hours else None,
        "colocation_rate_v1": sum(map(at_home, ml)) / len(ml) if ml else None,
        "training_at_home_rate": sum(map(at_home, high)) / len(high) if high else None,
        "data_reachable_rate": reachable_hours / hp_hours if hp_hours else None,
    }
