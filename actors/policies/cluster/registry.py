"""Cluster policies by name: each policy module registers itself on import.

`cluster_policy("tiresias-las")` returns the policy; `names()` lists them for
validation messages. The modules listed in `_REGISTRY` are imported on first
lookup, so adding a policy is one module plus one line here.
"""

from __future__ import annotations

from actors.policies.cluster.api import ClusterPolicy
from actors.policies.registry import NamedRegistry

_REGISTRY: NamedRegistry[ClusterPolicy] = NamedRegistry(
    "cluster",
    (
        "actors.policies.cluster.baselines",
        "actors.policies.cluster.tiresias.policy",
        "actors.policies.cluster.dally.policy",
        "actors.policies.cluster.shockwave.policy",
        "actors.policies.cluster.gavel",
        "actors.policies.cluster.themis",
    ),
)
register = _REGISTRY.register
names = _REGISTRY.names


def cluster_policy(name: str) -> ClusterPolicy:
    """The policy called `name`; KeyError names the known ones."""
    policy = _REGISTRY.find(name)
    if policy is None:
        raise KeyError(f"unknown cluster policy {name!r}; known: {', '.join(names())}")
    return policy
