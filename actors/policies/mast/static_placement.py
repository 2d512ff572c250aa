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


# MAST §5.3, Fig. 7: "the majority of workloads have two or more candidate
# regions, and approximately 40% of them have four or more". P(1), P(2), … .
CANDIDATE_REGIONS_SHARES = (0.40, 0.12, 0.08, 0.20, 0.20)


def spread(
    workloads: Sequence[WorkloadSpec],
    tables: Sequence[DataTable],
    supply: Mapping[str, Mapping[str, int]],
    draws: Sequence[tuple[float, float]],
    shares: Sequence[float] = CANDIDATE_REGIONS_SHARES,
) -> list[DataTable]:
    """Tables with the replicas that make each workload's data ready in several regions.

    What Tetris's placement amounts to in MAST's fleet (§5.3, Fig. 7): each
    workload gets k candidate regions (k drawn from `shares`, at most the
    regions with its hardware), chosen in proportion to each region's supply
    of the hardware the workload needs most (its GPU type, else CPU
    machines) — the balance of demand over supply that Tetris's GPU soft
    balance seeks. `supply` maps a region to its machines per kind (GPU type
    names and "cpu", in GPUs and machines); `draws` holds two uniform numbers
    in [0, 1) per workload (for k, and for the order of the regions), so the
    placement is a pure function of them. A workload whose hardware no
    region has is left as it is.
    """
    where: dict[str, set[str]] = {t.name: {t.home_region, *t.replicas} for t in tables}
    total = sum(shares)
    cumulative = [sum(shares[: i + 1]) / total for i in range(len(shares))]
    for w, (k_draw, order_draw) in zip(workloads, draws, strict=True):
        names = [n for n in w.input_tables if n in where]
        if not names:
            continue
        gpu_types = [j.gpu_type for j in w.jobs if j.gpus and j.gpu_type]
        needs = set(gpu_types) | ({"cpu"} if any(j.cpu_machines for j in w.jobs) else set())
        main = gpu_types[0] if gpu_types else "cpu"
        candidates = sorted(
            r for r, kinds in supply.items() if needs <= {k for k, n in kinds.items() if n}
        )
        if not candidates:
            continue
        k = min(len(candidates), 1 + sum(1 for c in cumulative[:-1] if k_draw >= c))
        chosen = _weighted_sample(candidates, [supply[r][main] for r in candidates], k, order_draw)
        for n in names:
            where[n].update(chosen)
    return [
        msgspec.structs.replace(t, replicas=tuple(sorted(where[t.name] - {t.home_region})))
        for t in tables
    ]


def _weighted_sample(items: list[str], weights: list[int], k: int, u: float) -> list[str]:
    """k items without replacement, by weight, from one uniform number `u`.

    Systematic sampling on the cumulative weights, with the items reduced to
    at most their weight's share: deterministic for a given `u`, and each item
    is chosen with probability about k times its share of the weight.
    """
    total = float(sum(weights))
    if total <= 0 or k >= len(items):
        return items[:k] if total <= 0 else list(items)
    step = total / k
    picked: list[str] = []
    edge = u * step
    acc = 0.0
    for item, weight in zip(items, weights, strict=True):
        acc += weight
        while edge < acc and len(picked) < k:
            if not picked or picked[-1] != item:
                picked.append(item)
            edge += step
    for item in sorted(items, key=lambda i: -weights[items.index(i)]):
        if len(picked) >= k:
            break
        if item not in picked:
            picked.append(item)
    return picked
