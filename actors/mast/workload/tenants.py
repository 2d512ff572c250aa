"""MAST-like tenants: priority levels, quotas, and picking a workload's tenant.

What is modelled (MAST §2): tenants sit at priority levels 0–6, or 7
("unspecified", the lowest). A workload's level is drawn from the paper's
mix, 3/20/16/54/0.2/0.5/0.02 % with 6 % unspecified (the paper's shares add
up to 99.72 %; we normalise), and then a tenant of that level in proportion
to its GPU quota (`TenantPicker`).

Everything is a pure function of the `random.Random` passed in.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Annotated

import msgspec
from msgspec import Meta

from actors.mast.world import WorldModel
from store.mast.records import PRIORITY_LEVELS, PRIORITY_LOWEST, Tenant

# MAST §2: share of workloads per priority level 0–6, then "unspecified" (7).
PRIORITY_SHARES = (0.03, 0.20, 0.16, 0.54, 0.002, 0.005, 0.0002, 0.06)

Probability = Annotated[float, Meta(ge=0.0, le=1.0)]
Share = Annotated[float, Meta(ge=0.0)]
LevelShares = Annotated[
    tuple[Share, ...], Meta(min_length=PRIORITY_LEVELS + 1, max_length=PRIORITY_LEVELS + 1)
]


def check_shares(name: str, shares: Sequence[float]) -> None:
    """Refuse shares that add up to nothing (`name` is their key path)."""
    if not sum(shares) > 0:
        raise ValueError(f"{name} must not be all zero")


class TenantMix(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How `make_tenants` spreads tenants over levels and sizes their quotas.

    Tenants go to levels in proportion to `priority_shares` (at least one per
    level with a positive share while there are tenants left); within a level
    their sizes are log-normal with `size_sigma`. The within-quota GPU quotas
    of levels 0–6 add up to `gpu_quota_fraction` of the world's GPUs (CPU
    quotas likewise), split by tenant size; level-7 tenants have no priority
    to protect and get no quota.
    """

    priority_shares: LevelShares = PRIORITY_SHARES
    gpu_quota_fraction: Probability = 0.8
    cpu_quota_fraction: Probability = 0.8
    size_sigma: Annotated[float, Meta(ge=0.0, le=10.0)] = 1.0

    def __post_init__(self) -> None:
        check_shares("priority_shares", self.priority_shares)


def _apportion(total: int, weights: Sequence[float]) -> list[int]:
    """Split `total` into integers proportional to `weights` (largest remainder)."""
    wsum = sum(weights)
    if total <= 0 or wsum <= 0:
        return [0] * len(weights)
    exact = [total * w / wsum for w in weights]
    out = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (out[i] - exact[i], i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def make_tenants(
    n: int, rng: random.Random, world: WorldModel, mix: TenantMix | None = None
) -> list[Tenant]:
    """`n` tenants named `team000`…, ordered by level; see `TenantMix`.

    With fewer tenants than levels, only the most common levels get one.
    """
    if n < 1:
        raise ValueError(f"need at least one tenant, got {n}")
    mix = mix or TenantMix()
    shares = mix.priority_shares
    levels = sorted(
        (lvl for lvl in range(len(shares)) if shares[lvl] > 0), key=lambda x: -shares[x]
    )
    levels = levels[:n]
    extra = _apportion(n - len(levels), [shares[lvl] for lvl in levels])
    counts = {lvl: 1 + e for lvl, e in zip(levels, extra, strict=True)}
    slots: list[tuple[int, float]] = []  # (level, weight)
    for lvl in sorted(counts):
        sizes = [rng.lognormvariate(0.0, mix.size_sigma) for _ in range(counts[lvl])]
        slots.extend((lvl, shares[lvl] * s / sum(sizes)) for s in sizes)
    quota_weights = [w if lvl < PRIORITY_LOWEST else 0.0 for lvl, w in slots]
    gpu = _apportion(math.floor(mix.gpu_quota_fraction * world.gpus), quota_weights)
    cpu = _apportion(math.floor(mix.cpu_quota_fraction * world.cpu_machines), quota_weights)
    width = max(3, len(str(n - 1)))
    return [
        Tenant(name=f"team{i:0{width}d}", priority=lvl, gpu_quota=gpu[i], cpu_quota=cpu[i])
        for i, (lvl, _) in enumerate(slots)
    ]


class TenantPicker:
    """Level by the priority shares (levels without tenants left out), then tenant by quota."""

    def __init__(self, tenants: Sequence[Tenant], shares: Sequence[float]) -> None:
        if not tenants:
            raise ValueError("generate needs at least one tenant")
        by_level: dict[int, list[Tenant]] = {}
        for t in tenants:
            by_level.setdefault(t.priority, []).append(t)
        self.levels = sorted(lvl for lvl in by_level if lvl < len(shares) and shares[lvl] > 0)
        if not self.levels:
            raise ValueError("no tenant has a priority level with a positive share")
        self.level_weights = [shares[lvl] for lvl in self.levels]
        self.tenants = {lvl: [t.name for t in by_level[lvl]] for lvl in self.levels}
        self.weights: dict[int, list[int]] = {}
        for lvl in self.levels:
            group = by_level[lvl]
            weights = [t.gpu_quota for t in group]
            if not any(weights):
                weights = [t.cpu_quota for t in group]
            self.weights[lvl] = weights if any(weights) else [1] * len(group)

    def pick(self, rng: random.Random) -> str:
        lvl = rng.choices(self.levels, weights=self.level_weights)[0]
        return rng.choices(self.tenants[lvl], weights=self.weights[lvl])[0]
