"""Where to copy a workload's data when no region holds all of it (on-demand replication).

MAST §3.1: a first-time workload whose data and hardware are in no region
together waits while its data moves. The target is a region that has every
kind of hardware the workload needs (GPU types, and CPU machines) and can
store the missing tables; among those, the one that needs the fewest bytes
copied, then the one with the most of the workload's main hardware, then by
name. A table already on its way to a region (`copying`) counts as there.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec


class OnDemandPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Copy `copies` (table, source region) into `region`; `bytes` in all."""

    region: str
    copies: tuple[tuple[str, str], ...]
    bytes: int


def plan_on_demand(
    tables: Mapping[str, tuple[int, str, Mapping[str, str]]],
    needed: list[str],
    hardware: Mapping[str, Mapping[str, int]],
    kinds: list[str],
    storage: Mapping[str, tuple[int, int]],
) -> OnDemandPlan | None:
    """The region and copies that bring `needed` tables next to the `kinds` of hardware.

    `tables` maps a table to (size, home, {region: state}); `hardware` a
    region to {kind: supply}; `storage` a region to (used, capacity) bytes.
    The source of a copy is the table's home (the freshest replica). Returns
    None if no region has the hardware and the room (or a table is unknown).
    """
    if any(t not in tables for t in needed):
        return None
    main = kinds[0] if kinds else None
    best: tuple[tuple[int, int, str], OnDemandPlan] | None = None
    for region in sorted(hardware):
        have = hardware[region]
        if any(have.get(k, 0) <= 0 for k in kinds):
            continue
        missing = [t for t in sorted(set(needed)) if region not in tables[t][2]]
        nbytes = sum(tables[t][0] for t in missing)
        used, capacity = storage.get(region, (0, 0))
        if missing and used + nbytes > capacity:
            continue
        supply = have.get(main, 0) if main else 0
        key = (nbytes, -supply, region)
        if best is None or key < best[0]:
            copies = tuple((t, tables[t][1]) for t in missing)
            best = (key, OnDemandPlan(region=region, copies=copies, bytes=nbytes))
    return best[1] if best else None
