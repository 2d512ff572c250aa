"""What the checkers of MAST's protocol share: routing store events, the queue, the facts.

Each checker of `actors.checks` reads store events (what the shared database
accepted) and the RMS's dispatch decisions from the trace, online during a
run and offline in `mastemu check`. Payloads arrive decoded: Structs as
dicts, tuples as lists. `StoreChecker` routes store events by repository
function name to `on_<name>` methods and can follow each workload's state in
the job queue; `FactsChecker` also reads the system's starting facts
(machines, tenants, catalog) from its `setup` trace events, so a run
database can be checked on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.trace import TraceEvent

Key = tuple[str, str]


QUEUE_EVENTS = frozenset({"queue.submit", "queue.award", "queue.transition"})


class StoreChecker:
    """Dispatches store events by repository function name to `on_<name>` methods.

    With `tracks_queue`, `self.queue` holds each workload's state in the job
    queue as the store committed it; handlers see the state from before the
    event they judge, and the base advances it afterwards.
    """

    name = ""
    kinds: tuple[str, ...] = ("store",)
    _routes: dict[str, str] = {}
    tracks_queue = False
    # The types a subclass reads of its other kinds (a kind not named: all of them).
    other_types: dict[str, frozenset[str]] = {}

    def __init__(self) -> None:
        self.queue: dict[str, str] = {}

    @property
    def types(self) -> dict[str, frozenset[str]]:
        """The event types read, by kind (`emulator.invariants.types_of`).

        The tracer decodes and hands over only these: a run's store events are
        mostly lease renewals and its decisions mostly bids, read by no checker.
        """
        store = frozenset(self._routes) | (QUEUE_EVENTS if self.tracks_queue else frozenset())
        return {"store": store, **self.other_types}

    def observe(self, event: TraceEvent) -> list[str]:
        method = self._routes.get(event.type)
        tracked = self.tracks_queue and event.type in QUEUE_EVENTS
        if method is None and not tracked:
            return []
        args, result = event.payload
        out: list[str] = []
        if method is not None:
            handler: Callable[[Any, Any, TraceEvent], list[str]] = getattr(self, method)
            out = handler(args, result, event)
        if tracked and result:
            if event.type == "queue.submit":
                self.moved(args[0]["id"], "PENDING")
            elif event.type == "queue.award":
                self.moved(args[2], "DISPATCHING")
            else:
                self.moved(args[0], args[2])
        return out

    def moved(self, workload_id: str, state: str) -> None:
        """A workload's committed queue state (`tracks_queue`); indexing checkers extend it."""
        self.queue[workload_id] = state

    def finish(self) -> list[str]:
        return []


class FactsChecker(StoreChecker):
    """A checker that also reads the system's starting facts (`setup` events)."""

    kinds: tuple[str, ...] = ("store", "setup")

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "setup":
            self.on_setup(event.type, event.payload)
            return []
        return super().observe(event)

    def on_setup(self, type_: str, payload: Any) -> None:
        """Subclasses keep the facts they need."""
