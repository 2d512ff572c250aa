"""Observers that read some event types only: fed those, online and offline alike."""

from __future__ import annotations

from emulator.invariants import check_events
from emulator.trace import TraceEvent, Tracer


class _Picky:
    """Reads `deliver` events of type A only, and every `decision`."""

    name = "picky"
    kinds = ("deliver", "decision")
    types = {"deliver": frozenset({"A"})}

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def observe(self, event: TraceEvent) -> list[str]:
        self.seen.append((event.kind, event.type))
        return [f"{event.kind}:{event.type}"] if event.type == "A" else []

    def finish(self) -> list[str]:
        return []


EVENTS = [("deliver", "A"), ("deliver", "B"), ("decision", "B"), ("deliver", "A")]


def test_a_typed_observer_gets_only_its_types() -> None:
    tracer = Tracer()
    picky, everything = [], []
    tracer.subscribe("deliver", lambda e: picky.append(e.type), frozenset({"A"}))
    tracer.subscribe("decision", lambda e: everything.append(e.type))
    for kind, type_ in EVENTS:
        tracer.record(0, kind, "x", "y", type_, {"n": 1})
    assert picky == ["A", "A"]
    assert everything == ["B"]


def test_an_untyped_observer_of_the_same_kind_still_gets_every_type() -> None:
    tracer = Tracer()
    typed, untyped = [], []
    tracer.subscribe("deliver", lambda e: typed.append(e.type), frozenset({"A"}))
    tracer.subscribe("deliver", lambda e: untyped.append(e.type))
    for kind, type_ in EVENTS:
        tracer.record(0, kind, "x", "y", type_, None)
    assert typed == ["A", "A"] and untyped == ["A", "B", "A"]


def test_offline_checking_honours_the_types_too() -> None:
    checker = _Picky()
    events = [TraceEvent(i, 0, k, "x", "y", t, None) for i, (k, t) in enumerate(EVENTS, 1)]
    found = check_events(events, [checker])
    assert checker.seen == [("deliver", "A"), ("decision", "B"), ("deliver", "A")]
    assert [m for *_, m in found] == ["deliver:A", "deliver:A"]


def test_types_do_not_change_the_hash() -> None:
    plain, typed = Tracer(), Tracer()
    typed.subscribe("deliver", lambda e: None, frozenset({"A"}))
    for kind, type_ in EVENTS:
        plain.record(0, kind, "x", "y", type_, [1, 2])
        typed.record(0, kind, "x", "y", type_, [1, 2])
    assert plain.hexdigest() == typed.hexdigest()
