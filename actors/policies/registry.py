"""What both policy families' registries share: policies by name, and parameters
validated with the path of a bad key.

A family (`cluster/registry.py`, `mast/registry.py`) keeps one
`NamedRegistry` whose built-in policies are listed in one function of that
registry module, called on the first lookup. Policy modules never register
themselves: importing one has no effect on any registry. A test (or a
user's plugin) adds its own with `register`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from emulator.errors import InputError


class Named(Protocol):
    name: str


P = TypeVar("P", bound=Named)

_UNKNOWN_KEY = re.compile(r"Object contains unknown field `(.*)`", re.S)


class NamedRegistry(Generic[P]):
    """The policies of one family (`family` names it in messages)."""

    def __init__(self, family: str, builtins: Callable[[], Iterable[P]]) -> None:
        self.family = family
        self._builtins = builtins
        self._policies: dict[str, P] = {}
        self._loaded = False

    def register(self, policy: P) -> P:
        """Add a policy under its `name`; a second policy with the same name is a bug."""
        known = self._policies.get(policy.name)
        if known is not None and known is not policy:
            raise ValueError(f"{self.family} policy {policy.name!r} registered twice")
        self._policies[policy.name] = policy
        return policy

    def unregister(self, name: str) -> None:
        """Remove a policy (tests remove the ones they registered)."""
        self._policies.pop(name, None)

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for policy in self._builtins():
                self.register(policy)

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        self._load()
        return sorted(self._policies)

    def find(self, name: str) -> P | None:
        self._load()
        return self._policies.get(name)


def convert_params(params_type: type[Any], raw: Mapping[str, Any] | msgspec.Struct) -> Any:
    """`raw` validated as `params_type`; a Struct of that type passes as it is.

    Raises InputError whose `path` is the path of the bad value below
    the parameters (empty for the whole table); an unknown key is named in
    the path, as scenario errors do.
    """
    if isinstance(raw, params_type):
        return raw
    try:
        return msgspec.convert(raw, params_type)
    except (msgspec.ValidationError, ValueError) as error:
        message, marker, where = str(error).rpartition(" - at `$")
        if not marker:
            message, where = str(error), ""
        key = where.removesuffix("`").lstrip(".")
        unknown = _UNKNOWN_KEY.fullmatch(message)
        if unknown is not None:
            key, message = ".".join(p for p in (key, unknown[1]) if p), "unknown key"
        raise InputError("", key, message) from None
