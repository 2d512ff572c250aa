"""Cluster policies by name.

`cluster_policy("tiresias-las")` returns the policy; `names()` lists them for
validation messages. `builtin_policies` is the one list of the built-in
ones, so adding a policy is one module plus one line there.
"""

from __future__ import annotations

from actors.policies.cluster.api import ClusterPolicy
from actors.policies.cluster.baselines import BestEffort, Fifo, Gandiva, Srtf
from actors.policies.cluster.dally.policy import Dally
from actors.policies.cluster.gavel import GavelMaxMin
from actors.policies.cluster.shockwave.policy import Shockwave
from actors.policies.cluster.shockwave_baselines.allox import AlloX
from actors.policies.cluster.shockwave_baselines.gandiva_fair import GandivaFair
from actors.policies.cluster.shockwave_baselines.mst import MaxSumThroughput
from actors.policies.cluster.shockwave_baselines.ossp import Ossp
from actors.policies.cluster.themis import Themis
from actors.policies.cluster.tiresias.policy import TiresiasGittins, TiresiasLas
from actors.policies.registry import NamedRegistry


def builtin_policies() -> list[ClusterPolicy]:
    """Every cluster policy mastemu provides (the registry loads them on first lookup)."""
    return [
        Fifo(),
        BestEffort(),
        Srtf(),
        Gandiva(),
        TiresiasLas(),
        TiresiasGittins(),
        Dally(),
        Shockwave(),
        GavelMaxMin(),
        Themis(),
        Ossp(),
        MaxSumThroughput(),
        AlloX(),
        GandivaFair(),
    ]


_REGISTRY: NamedRegistry[ClusterPolicy] = NamedRegistry("cluster", builtin_policies)
register = _REGISTRY.register
unregister = _REGISTRY.unregister
names = _REGISTRY.names


def cluster_policy(name: str) -> ClusterPolicy:
    """The policy called `name`; KeyError names the known ones."""
    policy = _REGISTRY.find(name)
    if policy is None:
        raise KeyError(f"unknown cluster policy {name!r}; known: {', '.join(names())}")
    return policy
