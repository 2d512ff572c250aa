"""MAST-level policies by name, and the one list of every policy of both families.

`builtin_policies` is the one list of the built-in MAST-level policies, so
adding a policy is one module plus one line there (a test may `register` its
own and `unregister` it).
`[system] kind = "mast"` names one with `policy`; `kind = "cluster"` names
one of the cluster family (`actors/policies/cluster/registry.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from actors.policies.cluster import registry as cluster_registry
from actors.policies.mast.api import MastPolicy
from actors.policies.mast.auction import MastAuction, MastWithTetris
from actors.policies.mast.federated import FederatedBinding
from actors.policies.mast.tetris.cost import VERSIONS
from actors.policies.registry import NamedRegistry, convert_params


def builtin_policies() -> list[MastPolicy]:
    """Every MAST-level policy mastemu provides (loaded on the first lookup)."""
    return [MastAuction(), *(MastWithTetris(v) for v in VERSIONS), FederatedBinding()]


_REGISTRY: NamedRegistry[MastPolicy] = NamedRegistry("MAST", builtin_policies)
register = _REGISTRY.register
unregister = _REGISTRY.unregister
names = _REGISTRY.names


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
    policy = _REGISTRY.find(name)
    if policy is None:
        raise KeyError(unknown_policy(name))
    return policy


def policy_params(policy: MastPolicy, raw: Mapping[str, Any] | msgspec.Struct) -> Any:
    """`raw` validated as `policy.Params` (InputError names the bad key)."""
    return convert_params(policy.Params, raw)


def resolve(name: str, raw: Mapping[str, Any] | msgspec.Struct) -> tuple[MastPolicy, Any]:
    """The policy called `name` with its parameters validated (what the actors call)."""
    policy = mast_policy(name)
    return policy, policy_params(policy, raw)
