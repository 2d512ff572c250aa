"""MAST-level policies by name, and the one list of every policy of both families.

Each policy module registers its policies on import; the modules in
`_MODULES` are imported on first lookup, so adding a policy is one module
plus one line here (a test may `register` its own and `unregister` it).
`[system] kind = "mast"` names one with `policy`; `kind = "cluster"` names
one of the cluster family (`actors/policies/cluster_registry.py`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from actors.policies import cluster_registry
from actors.policies.mast_api import MastPolicy

_MODULES: tuple[str, ...] = (
    "actors.policies.mast_auction",
    "actors.policies.federated",
)
_POLICIES: dict[str, MastPolicy] = {}
_UNKNOWN_KEY = re.compile(r"Object contains unknown field `(.*)`", re.S)
_loaded = False


class PolicyParamsError(ValueError):
    """A policy's parameters do not validate; `key` is the path below them."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message


def register(policy: MastPolicy) -> MastPolicy:
    """Add a policy under its `name`; a second policy with the same name is a bug."""
    if policy.name in _POLICIES and _POLICIES[policy.name] is not policy:
        raise ValueError(f"MAST policy {policy.name!r} registered twice")
    _POLICIES[policy.name] = policy
    return policy


def unregister(name: str) -> None:
    """Remove a policy (tests remove the ones they registered)."""
    _POLICIES.pop(name, None)


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in _MODULES:
        importlib.import_module(module)


def names() -> list[str]:
    """Every registered MAST-level policy name, sorted."""
    _load()
    return sorted(_POLICIES)


def every_policy() -> dict[str, list[str]]:
    """Family -> its policy names: the `[system] kind` that runs them, then the names."""
    return {"mast": names(), "cluster": cluster_registry.names()}


def unknown_policy(name: str) -> str:
    """The message for a MAST scenario naming a policy nobody registered."""
    families = every_policy()
    return (
        f"unknown MAST policy {name!r}; MAST policies: {', '.join(families['mast'])} "
        f'(cluster policies, for [system] kind = "cluster": {", ".join(families["cluster"])})'
    )


def mast_policy(name: str) -> MastPolicy:
    """The policy called `name`; KeyError names every known policy."""
    _load()
    try:
        return _POLICIES[name]
    except KeyError:
        raise KeyError(unknown_policy(name)) from None


def policy_params(policy: MastPolicy, raw: Mapping[str, Any] | msgspec.Struct) -> Any:
    """`raw` validated as `policy.Params`; a Struct of that type passes as it is.

    Raises PolicyParamsError whose `key` is the path of the bad value below
    the policy's parameters (empty for the whole table).
    """
    if isinstance(raw, policy.Params):
        return raw
    try:
        return msgspec.convert(raw, policy.Params)
    except msgspec.ValidationError as error:
        message, marker, where = str(error).rpartition(" - at `$")
        if not marker:
            message, where = str(error), ""
        key = where.removesuffix("`").lstrip(".")
        unknown = _UNKNOWN_KEY.fullmatch(message)
        if unknown is not None:  # name the unknown key in the path, as scenario errors do
            key, message = ".".join(p for p in (key, unknown[1]) if p), "unknown key"
        raise PolicyParamsError(key, message) from None


def resolve(name: str, raw: Mapping[str, Any] | msgspec.Struct) -> tuple[MastPolicy, Any]:
    """The policy called `name` with its parameters validated (what the actors call)."""
    policy = mast_policy(name)
    return policy, policy_params(policy, raw)
