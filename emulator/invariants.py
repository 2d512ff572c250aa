"""Invariant checkers: separate from the system, fed by the trace.

A checker subscribes to event kinds and judges each event; online it is fed
by the tracer as events happen (the first violation is recorded with its trace
position), offline it is fed the same decoded events read back from a run
database. So online and offline checking are one piece of code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from emulator.trace import TraceEvent


class Checker(Protocol):
    """One invariant family.

    A checker may also say which event types of a kind it reads, as a
    `types` mapping (kind -> frozenset of types; a kind not in it: every
    type). Online and offline it is then fed those only, and the tracer
    decodes no event nobody reads: `deliver` events are a third of a run's
    and a checker typically wants two message types of them.

    A checker that judges something at the end by how long it has lasted
    may have `at_end(t_us)`: it is told when the history ends just before
    `finish` (the events it reads may have stopped long before).
    """

    name: str
    kinds: tuple[str, ...]

    def observe(self, event: TraceEvent) -> list[str]:
        """Return violation messages caused by this event (usually none)."""
        ...

    def finish(self) -> list[str]:
        """Violations only visible at the end of the history."""
        ...


CHECKERS: dict[str, Callable[[], Checker]] = {}


def register_checker(name: str, factory: Callable[[], Checker]) -> None:
    CHECKERS[name] = factory


def make_checkers(names: Iterable[str]) -> list[Checker]:
    unknown = [n for n in names if n not in CHECKERS]
    if unknown:
        raise KeyError(", ".join(unknown))
    return [CHECKERS[n]() for n in names]


class Leases:
    """Each role's current lease as the store committed it: (epoch, holder, expiry µs).

    Folded from `lease.acquire` results (grants and renewals) and committed
    `lease.release`s (the lease ends then). A write fenced by a lease is valid
    only under the current one, unexpired; checkers of such writes judge them here.
    """

    def __init__(self) -> None:
        self.current: dict[str, tuple[int, str, int]] = {}

    def granted(self, result: Any) -> None:
        """A `lease.acquire` that granted or renewed a lease (its result)."""
        self.current[result["role"]] = (result["epoch"], result["holder"], result["expires_at_us"])

    def released(self, args: list[Any], result: Any) -> None:
        """A `lease.release` (its arguments and result): the lease ends at its instant."""
        role, holder, epoch, now_us = args[0], args[1], args[2], args[3]
        cur = self.current.get(role)
        if result and cur is not None and cur[0] == epoch and cur[1] == holder:
            self.current[role] = (epoch, holder, now_us)

    def validity(self, role: str, holder: str, epoch: int, now_us: int) -> str:
        """ "valid" for the current, unexpired lease; else "none" (never granted),
        "stale" (another epoch or holder) or "expired"."""
        cur = self.current.get(role)
        if cur is None:
            return "none"
        if (epoch, holder) != cur[:2]:
            return "stale"
        return "expired" if now_us >= cur[2] else "valid"


class LeaseSafety:
    """At most one leader per role per epoch, and no effect from a stale epoch.

    An epoch ends when its lease expires: it is never renewed after that (a
    holder back after its expiry starts a new epoch), since by then any
    candidate may have been granted the next one.

    Judged from what the store committed (`lease.acquire`, `lease.release`,
    `lease.effect` store events) and what actors claim (`lease.leader`
    decisions), never from an actor's own idea of its epoch.
    """

    name = "lease-safety"
    kinds = ("store", "decision")
    types = {
        "store": frozenset({"lease.acquire", "lease.release", "lease.effect"}),
        "decision": frozenset({"lease.leader"}),
    }

    def __init__(self) -> None:
        self.holder_of: dict[tuple[str, int], str] = {}
        self.leases = Leases()
        self.claims: dict[tuple[str, int], str] = {}

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "decision":
            return self._claim(event) if event.type == "lease.leader" else []
        handler = self._STORE.get(event.type)
        return handler(self, event.payload[0], event.payload[1]) if handler else []

    def _acquire(self, args: list[Any], result: Any) -> list[str]:
        if result is None:
            return []
        role, holder, epoch = result["role"], result["holder"], result["epoch"]
        out = []
        first = self.holder_of.setdefault((role, epoch), holder)
        if first != holder:
            out.append(f"two leaders of {role} in epoch {epoch}: {first} and {holder}")
        cur = self.leases.current.get(role)
        if cur is not None and epoch < cur[0]:
            out.append(f"lease of {role} went back from epoch {cur[0]} to {epoch}")
        now_us = args[2]
        if self.leases.validity(role, holder, epoch, now_us) == "expired":
            out.append(
                f"{holder} renewed its lease of {role} (epoch {epoch}) at {now_us} µs, "
                f"after it expired at {cur[2]} µs"
            )
        self.leases.granted(result)
        return out

    def _release(self, args: list[Any], result: Any) -> list[str]:
        self.leases.released(args, result)
        return []

    def _effect(self, args: list[Any], result: Any) -> list[str]:
        if not result:
            return []
        role, holder, epoch, now_us = args[0], args[1], args[2], args[3]
        validity = self.leases.validity(role, holder, epoch, now_us)
        if validity == "none":
            return [f"effect on {role} by {holder} in epoch {epoch} with no lease ever granted"]
        if validity == "stale":
            cur_epoch, cur_holder, _ = self.leases.current[role]
            return [
                f"stale effect on {role}: {holder} wrote with epoch {epoch} "
                f"while {cur_holder} holds epoch {cur_epoch}"
            ]
        if validity == "expired":
            return [f"effect on {role} by {holder} after its lease (epoch {epoch}) expired"]
        return []

    def _claim(self, event: TraceEvent) -> list[str]:
        role, epoch = event.payload["role"], event.payload["epoch"]
        first = self.claims.setdefault((role, epoch), event.src)
        out = []
        if first != event.src:
            out.append(f"{first} and {event.src} both claim to lead {role} in epoch {epoch}")
        granted = self.holder_of.get((role, epoch))
        if granted != event.src:
            out.append(f"{event.src} claims {role} epoch {epoch}, granted to {granted}")
        return out

    def finish(self) -> list[str]:
        return []

    _STORE: dict[str, Callable[[LeaseSafety, list[Any], Any], list[str]]] = {
        "lease.acquire": _acquire,
        "lease.release": _release,
        "lease.effect": _effect,
    }


class OnlineChecking:
    """Attach checkers to a live kernel's tracer; violations go to the kernel."""

    def __init__(self, kernel: Any, checkers: list[Checker]) -> None:
        self.kernel = kernel
        self.checkers = checkers
        for checker in checkers:
            for kind in checker.kinds:
                kernel.tracer.subscribe(kind, self._observer(checker), types_of(checker, kind))

    def _observer(self, checker: Checker) -> Callable[[TraceEvent], None]:
        def observe(event: TraceEvent) -> None:
            for message in checker.observe(event):
                self.kernel.report_violation(checker.name, message)

        return observe

    def finish(self) -> None:
        for checker in self.checkers:
            tell_end(checker, self.kernel.now_us)
            for message in checker.finish():
                self.kernel.report_violation(checker.name, message)


def tell_end(checker: Checker, t_us: int) -> None:
    """Tell a checker with `at_end` (the protocol's docstring) when the history ended."""
    at_end = getattr(checker, "at_end", None)
    if at_end is not None:
        at_end(t_us)


def types_of(checker: Checker, kind: str) -> frozenset[str] | None:
    """The event types of `kind` the checker reads (None: all of them)."""
    types = getattr(checker, "types", None)
    return None if not types or kind not in types else frozenset(types[kind])


def check_events(
    events: Iterable[TraceEvent], checkers: list[Checker]
) -> list[tuple[int, int, str, str]]:
    """Offline: run checkers over recorded events; returns (seq, t_us, invariant, message)."""
    by_kind: dict[str, list[tuple[Checker, frozenset[str] | None]]] = {}
    for checker in checkers:
        for kind in checker.kinds:
            by_kind.setdefault(kind, []).append((checker, types_of(checker, kind)))
    found: list[tuple[int, int, str, str]] = []
    last = (0, 0)
    for event in events:
        last = (event.seq, event.t_us)
        for checker, types in by_kind.get(event.kind, ()):
            if types is not None and event.type not in types:
                continue
            found.extend((event.seq, event.t_us, checker.name, m) for m in checker.observe(event))
    for checker in checkers:
        tell_end(checker, last[1])
        found.extend((last[0], last[1], checker.name, m) for m in checker.finish())
    return found
