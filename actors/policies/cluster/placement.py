"""Gang placement on a single GPU cluster, by network tier.

Shared by every cluster policy: `place(machines, gpus, tier)` finds GPUs
for a whole gang within one machine (`machine`), within one rack (`rack`)
or anywhere (`network`), or returns None. Within a tier it prefers fewer
machines (less communication) and, among equals, the tightest fit (it
leaves big holes for big jobs); ties break by host name so a placement is
a pure function of the view. `best_tier` is the most consolidated tier
available now; `tier_of` names the tier of an existing placement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from actors.policies.cluster.api import Slot, Tier

TIERS: tuple[Tier, ...] = ("machine", "rack", "network")
Placement = tuple[tuple[str, int], ...]


def _greedy(slots: Sequence[Slot], gpus: int) -> Placement | None:
    """Fewest machines: take the machines with the most free GPUs first."""
    order = sorted((s for s in slots if s.gpus_free > 0), key=lambda s: (-s.gpus_free, s.host))
    if sum(s.gpus_free for s in order) < gpus:
        return None
    taken: list[tuple[str, int]] = []
    need = gpus
    for i, s in enumerate(order):
        # The last machine is the one that fits the remainder most tightly.
        if s.gpus_free >= need:
            fits = [t for t in order[i:] if t.gpus_free >= need]
            best = min(fits, key=lambda t: (t.gpus_free, t.host))
            taken.append((best.host, need))
            break
        taken.append((s.host, s.gpus_free))
        need -= s.gpus_free
    return tuple(sorted(taken))


def place(machines: Sequence[Slot], gpus: int, tier: Tier) -> Placement | None:
    """GPUs for a gang of `gpus` at `tier` or tighter, or None if the free GPUs do not allow it."""
    if gpus <= 0:
        raise ValueError(f"a gang needs at least one GPU, got {gpus}")
    if tier == "machine":
        fits = [s for s in machines if s.gpus_free >= gpus]
        if not fits:
            return None
        best = min(fits, key=lambda s: (s.gpus_free, s.host))
        return ((best.host, gpus),)
    if tier == "rack":
        by_rack: dict[str, list[Slot]] = defaultdict(list)
        for s in machines:
            by_rack[s.rack].append(s)
        options = []
        for rack in sorted(by_rack):
            got = _greedy(by_rack[rack], gpus)
            if got is not None:
                free = sum(s.gpus_free for s in by_rack[rack])
                options.append((len(got), free, rack, got))
        return min(options)[3] if options else None
    return _greedy(machines, gpus)


def best_tier(machines: Sequence[Slot], gpus: int) -> tuple[Tier, Placement] | None:
    """The most consolidated tier at which the gang fits now, with its placement."""
    if sum(s.gpus_free for s in machines) < gpus:
        # A full cluster, asked once per waiting job: no tier can fit, skip all three.
        return None
    for tier in TIERS:
        got = place(machines, gpus, tier)
        if got is not None:
            return tier, got
    return None


def tier_of(placement: Iterable[tuple[str, int]], rack_of: Mapping[str, str]) -> Tier:
    """The tier of an existing placement: one host, one rack, or several racks."""
    hosts = {h for h, _ in placement}
    if len(hosts) <= 1:
        return "machine"
    return "rack" if len({rack_of[h] for h in hosts}) == 1 else "network"


def take(machines: Sequence[Slot], placement: Iterable[tuple[str, int]]) -> tuple[Slot, ...]:
    """The machines after `placement` is allocated; ValueError if it over-allocates."""
    used: dict[str, int] = defaultdict(int)
    for host, n in placement:
        used[host] += n
    out = []
    for s in machines:
        n = used.pop(s.host, 0)
        if n > s.gpus_free:
            raise ValueError(f"placement takes {n} GPUs on {s.host}, which has {s.gpus_free} free")
        out.append(s if n == 0 else _with_free(s, s.gpus_free - n))
    if used:
        raise ValueError(f"placement names unknown hosts: {sorted(used)}")
    return tuple(out)


def give_back(machines: Sequence[Slot], placement: Iterable[tuple[str, int]]) -> tuple[Slot, ...]:
    """The machines after `placement` is released (a preempted or finished job)."""
    back: dict[str, int] = defaultdict(int)
    for host, n in placement:
        back[host] += n
    out = []
    for s in machines:
        n = back.get(s.host, 0)
        if s.gpus_free + n > s.gpus_total:
            raise ValueError(f"releasing {n} GPUs on {s.host} exceeds its {s.gpus_total}")
        out.append(s if n == 0 else _with_free(s, s.gpus_free + n))
    return tuple(out)


def _with_free(s: Slot, free: int) -> Slot:
    return msgspec.structs.replace(s, gpus_free=free)
