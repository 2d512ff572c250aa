"""Cluster policies by name: each policy module registers itself on import.

`cluster_policy("tiresias-las")` returns the policy; `names()` lists them for
validation messages. The modules listed in `_MODULES` are imported on first
lookup, so adding a policy is one module plus one line here.
"""

from __future__ import annotations

import importlib

from actors.policies.cluster_api import ClusterPolicy

_MODULES: tuple[str, ...] = (
    "actors.policies.cluster_baselines",
    "actors.policies.tiresias",
    "actors.policies.dally",
    "actors.policies.shockwave",
    "actors.policies.gavel",
)
_POLICIES: dict[str, ClusterPolicy] = {}
_loaded = False


def register(policy: ClusterPolicy) -> ClusterPolicy:
    """Add a policy under its `name`; a second policy with the same name is a bug."""
    if policy.name in _POLICIES and _POLICIES[policy.name] is not policy:
        raise ValueError(f"cluster policy {policy.name!r} registered twice")
    _POLICIES[policy.name] = policy
    return policy


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in _MODULES:
        importlib.import_module(module)


def names() -> list[str]:
    """Every registered policy name, sorted."""
    _load()
    return sorted(_POLICIES)


def cluster_policy(name: str) -> ClusterPolicy:
    """The policy called `name`; KeyError names the known ones."""
    _load()
    try:
        return _POLICIES[name]
    except KeyError:
        raise KeyError(f"unknown cluster policy {name!r}; known: {', '.join(names())}") from None
