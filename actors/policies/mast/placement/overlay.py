"""A set of hosts that changes a few members at a time: a frozen base plus recent changes.

A placement index keeps the free CPU machines of a cluster (thousands of
them in MAST's regions) and derives the next index after every plan, hold
and release, each of which frees or takes a handful. Rebuilding a frozenset
of ~3,600 hosts per change cost 4% of a day of `meta-day`; a `HostSet`
carries the changes beside a shared base instead, and folds them in once
they are many (amortised, a change costs what it touches). Values, like
the index that holds them: nothing changes one once it is made.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

# Changes kept beside the base before they are folded in: folding costs the
# base's size, so it is done once per this many changes (or a quarter of it).
FOLD_AFTER = 256


class HostSet:
    """Hosts in `base`, except where `delta` says (True: a member, False: not one)."""

    __slots__ = ("base", "delta")

    def __init__(self, base: Iterable[str] = ()) -> None:
        self.base = base if isinstance(base, frozenset) else frozenset(base)
        self.delta: dict[str, bool] = {}

    def __contains__(self, host: object) -> bool:
        flag = self.delta.get(host)  # type: ignore[call-overload]
        return host in self.base if flag is None else flag

    def with_changes(self, changes: Mapping[str, bool]) -> HostSet:
        """This set with each host of `changes` in it (True) or out of it (False)."""
        delta = {**self.delta, **changes}
        if len(delta) > min(FOLD_AFTER, len(self.base) // 4 + 16):
            return HostSet(self._folded(delta))
        out = HostSet.__new__(HostSet)
        out.base, out.delta = self.base, delta
        return out

    def _folded(self, delta: Mapping[str, bool]) -> frozenset[str]:
        added = {h for h, member in delta.items() if member}
        removed = delta.keys() - added
        return (self.base - removed) | added

    def frozen(self) -> frozenset[str]:
        """The members as a plain frozenset (for comparisons and tests)."""
        return self._folded(self.delta) if self.delta else self.base

    def __iter__(self) -> Iterator[str]:
        return iter(self.frozen())

    def __len__(self) -> int:
        return len(self.frozen())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HostSet):
            return self.frozen() == other.frozen()
        if isinstance(other, (set, frozenset)):
            return self.frozen() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HostSet({sorted(self.frozen())!r})"
