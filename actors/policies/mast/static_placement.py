"""Static data placement: what users' manual choices amount to before Tetris.

Each workload's input tables are made available together in one region that
has the hardware the workload needs: the candidate region already holding the
most of its bytes (ties by region name), with replicas added there for the
rest. Tetris (the slow path) replaces this with its optimised placement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from store.mast.records import DataTable, WorkloadSpec


def colocate(
    workloads: Sequence[WorkloadSpec],
    tables: Sequence[DataTable],
    hardware: Mapping[str, set[str]],
) -> list[DataTable]:
    """Tables with the replicas that give every workload one region holding all its data.

    `hardware` maps a region to the kinds of machines it has: GPU type names
    and "cpu". A workload whose hardware no region has is left as it is.
    """
    where: dict[str, set[str]] = {t.name: {t.home_region, *t.replicas} for t in tables}
    size = {t.name: t.size_bytes for t in tables}
    for w in workloads:
        names = [n for n in w.input_tables if n in where]
        if not names:
            continue
        needs = {j.gpu_type for j in w.jobs if j.gpus and j.gpu_type} | (
            {"cpu"} if any(j.cpu_machines for j in w.jobs) else set()
        )
        candidates = sorted(r for r, kinds in hardware.items() if needs <= kinds)
        if not candidates or any(all(r in where[n] for n in names) for r in candidates):
            continue
        best = min(candidates, key=lambda r: (-sum(size[n] for n in names if r in where[n]), r))
        for n in names:
            where[n].add(best)
    return [
        msgspec.structs.replace(t, replicas=tuple(sorted(where[t.name] - {t.home_region})))
        for t in tables
    ]
