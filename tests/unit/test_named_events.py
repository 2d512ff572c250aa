"""named events: every payload the kernel records, read back by field name.

Each story runs a small kernel (`tests.support.harness`) and names what its
tracer recorded, so the names are checked against the payloads the kernel
really writes, not against payloads built by hand. The raw payloads are
asserted too: naming them must not change what the trace holds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from emulator.actor import Actor, on
from emulator.errors import InputError
from emulator.kernel import KernelOptions
from emulator.run.events import NamedEvent, named
from emulator.run.faults import FaultInjector
from emulator.run.scenario import Duration, PartitionFault
from emulator.sysmsg import FlowDone
from emulator.trace import TraceEvent
from emulator.units import MS, S
from store import Store, leases
from store.events import PARAMETERS, store_event
from tests.support.actors import Beater
from tests.support.harness import make_kernel, record, spawn


@store_event("test.named.tally")
async def tally(store: Store, counter: str, step: int, /, note: str = "none") -> int:
    """Positional-only parameters, and a trailing default the caller leaves out."""
    return step + 1


class Writer(Actor):
    """Takes a lease, tallies by position, and records one decision."""

    kind = "test-named-writer"

    async def on_start(self) -> None:
        await self.store(leases.acquire, "svc", self.address, self.now_us, 10 * S)
        await self.store(tally, "beats", 2)
        self.decision("test.pick", {"region": "east", "bids": {"east": 3, "west": 1}})


def store_story(tmp_path: Path) -> list[TraceEvent]:
    async def story() -> list[TraceEvent]:
        async with Store.open_ctx(tmp_path / "run.db") as store:
            k = make_kernel(store=store)
            events = record(k, "store", "decision")
            spawn(k, Writer, "writer", "east/ctl0")
            await k.run(S)
            return events

    return asyncio.run(story())


# ---- store events ------------------------------------------------------------------------------
def test_a_store_event_names_its_arguments_and_its_result(tmp_path: Path) -> None:
    (acquire, _) = [e for e in store_story(tmp_path) if e.kind == "store"]
    e = named(acquire)
    assert (e.kind, e.type, e.src) == ("store", "lease.acquire", "writer")
    assert dict(e.fields) == {
        "role": "svc",
        "candidate": "writer",
        "now_us": 0,
        "ttl_us": 10 * S,
        "result": {"role": "svc", "holder": "writer", "epoch": 1, "expires_at_us": 10 * S},
    }
    # Fields read as attributes too; the trace itself still holds `(args, result)`.
    assert (e.role, e.result["epoch"]) == ("svc", 1)
    assert acquire.payload[0] == ["svc", "writer", 0, 10 * S]


def test_a_positional_only_payload_is_named_by_the_functions_parameters(tmp_path: Path) -> None:
    # The kernel records `(args, result)` with the arguments in call order and
    # no names at all; the names come from the tagged function's signature.
    (_, raw) = [e for e in store_story(tmp_path) if e.kind == "store"]
    assert (raw.type, raw.payload) == ("test.named.tally", [["beats", 2], 3])
    assert PARAMETERS["test.named.tally"] == ("counter", "step", "note")
    e = named(raw)
    # `note` was left to its default: the trace has no value for it, so no field.
    assert dict(e.fields) == {"counter": "beats", "step": 2, "result": 3}
    assert (e.counter, e.step, e.result) == ("beats", 2, 3)
    with pytest.raises(AttributeError, match="has no field 'note'"):
        _ = e.note


def test_a_decision_is_its_own_map(tmp_path: Path) -> None:
    (decision,) = [named(e) for e in store_story(tmp_path) if e.kind == "decision"]
    assert dict(decision.fields) == {"region": "east", "bids": {"east": 3, "west": 1}}
    assert (decision.src, decision.type, decision.region) == ("writer", "test.pick", "east")


def test_store_events_of_one_name_must_keep_one_set_of_parameter_names() -> None:
    with pytest.raises(ValueError, match="already names its arguments"):

        @store_event("test.named.tally")
        async def other(store: Store, counter: str, amount: int) -> int:
            return amount

    with pytest.raises(ValueError, match="must be positional"):

        @store_event("test.named.keywords")
        async def keywords(store: Store, *, counter: str) -> None:
            return None

    with pytest.raises(ValueError, match="reserved"):

        @store_event("test.named.result")
        async def clash(store: Store, result: int) -> None:
            return None

    # A stand-in with the same parameter names (as the broken components are) is fine.
    @store_event("test.named.tally")
    async def again(store: Store, counter: str, step: int, note: str = "") -> int:
        return 0

    assert PARAMETERS["test.named.tally"] == ("counter", "step", "note")


def test_a_store_event_of_an_unknown_function_or_shape_is_refused() -> None:
    unknown = TraceEvent(7, 0, "store", "a", "", "test.named.never-defined", [[1], True])
    with pytest.raises(InputError, match="no parameter names known") as caught:
        named(unknown)
    assert caught.value.path == "event 7"
    too_many = TraceEvent(8, 0, "store", "a", "", "test.named.tally", [["x", 1, "n", 4], 0])
    with pytest.raises(InputError, match="expected 3 values"):
        named(too_many)


# ---- messages: deliveries, drops, timers ----------------------------------------------------
def beat_story() -> list[TraceEvent]:
    """e and w beat to each other every 100 ms, cut off from 1 s to 2 s; x to a leaderless role."""
    k = make_kernel()
    events = record(k, "deliver", "drop", "timer")
    spawn(k, Beater, "e", "east/ctl0", "w")
    spawn(k, Beater, "w", "west/ctl0", "e")
    spawn(k, Beater, "x", "south/ctl0", "svc")
    FaultInjector(k).schedule(
        [PartitionFault(at=Duration(S), regions=["east", "west"], duration=Duration(S))]
    )
    asyncio.run(k.run(3 * S))
    return events


def test_a_delivery_names_the_envelope_and_keeps_the_message_whole() -> None:
    first = next(named(e) for e in beat_story() if e.kind == "deliver" and e.src == "e")
    assert set(first.fields) == {"src", "dst", "to", "msg", "sent_us", "corr", "reply_to"}
    assert (first.src, first.dst, first.fields["dst"], first.to) == ("e", "w", "w", "w")
    assert first.msg == {"type": "Beat", "n": 1}
    assert first.sent_us == 100 * MS < first.t_us
    assert (first.corr, first.reply_to) == (0, 0)


def test_a_drop_names_its_reason_and_the_envelope_or_the_bare_message() -> None:
    drops = [named(e) for e in beat_story() if e.kind == "drop"]
    cut = [d for d in drops if d.reason == "partition"]
    assert cut and {d.src for d in cut} == {"e", "w"}
    assert all(S <= d.sent_us <= 2 * S and d.msg["type"] == "Beat" for d in cut)
    # Sent to a role nobody leads: no actor, so no envelope, only the message.
    (leaderless, *_) = [d for d in drops if d.reason == "no-leader"]
    assert dict(leaderless.fields) == {"reason": "no-leader", "msg": {"type": "Beat", "n": 1}}
    assert (leaderless.src, leaderless.dst) == ("x", "svc")


def test_a_timer_names_its_message() -> None:
    tick = next(named(e) for e in beat_story() if e.kind == "timer" and e.src == "e")
    assert (tick.src, tick.dst, tick.type, dict(tick.fields)) == ("e", "e", "str", {"msg": "tick"})


# ---- the kernel's single values and tuples --------------------------------------------------
class Mover(Actor):
    """Starts the bulk flows given as params."""

    kind = "test-named-mover"

    async def on_start(self) -> None:
        for src, dst, nbytes in self.params:
            self.start_flow(src, dst, nbytes)

    @on(FlowDone)
    def finished(self, msg: FlowDone) -> None:
        pass


def test_crashes_restarts_pauses_and_flows_are_named() -> None:
    k = make_kernel(options=KernelOptions(restart_delay_us=S))
    events = record(k, "start", "restart", "crash", "pause", "unpause", "flow")
    gb = 1_000_000_000
    spawn(k, Mover, "small", "east/ctl0", [("east", "west", gb // 1000)])
    spawn(k, Mover, "big", "east/ctl1", [("east", "west", 100 * gb)])
    k.at(S, k.pause, "small", 2 * S)
    k.at(5 * S, k.crash, "big", "test", S)
    asyncio.run(k.run(10 * S))
    seen: dict[tuple[str, str, str], Any] = {}
    for e in map(named, events):
        seen.setdefault((e.kind, e.type, e.dst), dict(e.fields))
    assert seen[("start", "", "small")] == {"incarnation": 0}
    assert seen[("pause", "", "small")] == {"duration_us": 2 * S}
    assert seen[("unpause", "", "small")] == {}
    assert seen[("crash", "", "big")] == {"reason": "test"}
    assert seen[("restart", "", "big")] == {"incarnation": 1}
    start = seen[("flow", "start", "")]
    assert set(start) == {"flow_id", "src_region", "dst_region", "nbytes", "qos"}
    assert (start["src_region"], start["dst_region"], start["qos"]) == ("east", "west", "default")
    (cancel,) = [e for e in map(named, events) if e.kind == "flow" and e.type == "cancel"]
    (done,) = [e for e in map(named, events) if e.kind == "flow" and e.type == "done"]
    assert done.dst == "small" and set(done.fields) == {"flow_id"}
    assert {cancel.flow_id, done.flow_id} == {1, 2} and 0 < cancel.bytes_done < 100 * gb


def test_a_named_event_is_frozen_and_compares_by_value() -> None:
    raw = TraceEvent(3, 5, "run", "", "", "end", "ok")
    a, b = named(raw), named(raw)
    assert isinstance(a, NamedEvent) and a == b and a.status == "ok"
    with pytest.raises(AttributeError):
        a.seq = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.fields["status"] = "failed"  # type: ignore[index]
