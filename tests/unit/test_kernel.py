"""kernel: event order, handlers, call/reply, timers, crashes, pauses, role routing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from emulator.actor import Actor, on
from emulator.errors import CallTimeout
from emulator.kernel import DOWN, KernelOptions
from emulator.run.events import named
from emulator.units import MS, S
from store import Store, kv, leases
from store.trace import TraceWriter
from tests.support.harness import make_kernel, record, spawn
from tests.support.trace import events_of


class Ping(msgspec.Struct, frozen=True, tag=True):
    n: int


class Pong(msgspec.Struct, frozen=True, tag=True):
    n: int


class Boom(msgspec.Struct, frozen=True, tag=True):
    """Makes the receiver raise."""


class Nap(msgspec.Struct, frozen=True, tag=True):
    """Makes the receiver await asyncio.sleep (a foreign await)."""


class Go(msgspec.Struct, frozen=True, tag=True):
    dst: str
    n: int


class Counter(msgspec.Struct):
    n: int = 0


class Echo(Actor):
    """Answers Ping with Pong; counts in memory and in the store."""

    kind = "test-echo"

    async def on_start(self) -> None:
        self.seen: list[int] = []
        self.started_count = 0
        if self._kernel.store is not None:
            saved = await self.store(kv.get, "echo", self.address, Counter)
            self.persisted = saved or Counter()

    @on(Ping)
    async def ping(self, msg: Ping) -> None:
        self.seen.append(msg.n)
        if self._kernel.store is not None:
            self.persisted.n += 1
            await self.store(kv.put, "echo", self.address, self.persisted)
        self.reply(Pong(msg.n))

    @on(Boom)
    def boom(self, _: Boom) -> None:
        raise ValueError("deliberate")

    @on(Nap)
    async def nap(self, _: Nap) -> None:
        await asyncio.sleep(1)


class Caller(Actor):
    """On Go, calls `dst` with Ping(n) and records the outcome."""

    kind = "test-caller"

    async def on_start(self) -> None:
        self.results: list[object] = []

    @on(Go)
    async def go(self, msg: Go) -> None:
        try:
            pong = await self.call(msg.dst, Ping(msg.n), timeout_us=500 * MS)
            self.results.append(("pong", pong.n, self.now_us))
        except CallTimeout:
            self.results.append(("timeout", msg.n, self.now_us))

    @on(Pong)
    def late(self, msg: Pong) -> None:
        self.results.append(("late", msg.n, self.now_us))


class Poker(Actor):
    """Sends the scripted messages given as params at their times."""

    kind = "test-poker"

    async def on_start(self) -> None:
        for at_us, dst, msg in self.params:
            self.set_timer(at_us - self.now_us, (dst, msg))

    @on(tuple)
    def fire(self, item: tuple[str, object]) -> None:
        self.send(*item)


def run(kernel, until_us: int) -> None:  # type: ignore[no-untyped-def]
    asyncio.run(kernel.run(until_us))


def test_call_reply_and_timeout_across_the_wan() -> None:
    k = make_kernel()
    spawn(k, Echo, "echo", "west/ctl0")
    spawn(k, Caller, "caller", "east/ctl0")
    spawn(k, Poker, "poker", "east/ctl0", [(1 * S, "caller", Go("echo", 1))])
    run(k, 10 * S)
    caller = k.instance("caller")
    assert caller is not None
    ((what, n, t),) = caller.results
    # East-west is 30–150 ms each way plus ≤10% jitter: a reply within the 500 ms timeout.
    assert (what, n) == ("pong", 1)
    rtt = t - 1 * S
    wan = k.network.pair_latency_us("east", "west")
    assert 2 * wan <= rtt <= 2 * wan * 1.1 + 2 * MS


def test_call_times_out_when_the_callee_is_down_and_late_reply_is_an_ordinary_message() -> None:
    k = make_kernel()
    spawn(k, Echo, "echo", "west/ctl0")
    spawn(k, Caller, "caller", "east/ctl0")
    spawn(k, Poker, "poker", "east/ctl0", [(1 * S, "caller", Go("echo", 1))])
    # The callee is paused for 2 s: the call times out after 500 ms, the
    # reply arrives later and reaches the caller's Pong handler.
    k.at(900 * MS, k.pause, "echo", 2 * S)
    run(k, 10 * S)
    results = k.instance("caller").results  # type: ignore[union-attr]
    # Go reaches the caller ~10 µs after 1 s (same host); the timeout is 500 ms later.
    assert results[0][0:2] == ("timeout", 1)
    assert 1 * S + 500 * MS < results[0][2] <= 1 * S + 500 * MS + 20
    assert results[1][0:2] == ("late", 1)
    assert results[1][2] > 2900 * MS


def test_same_instant_events_ordered_by_sender_id_then_sender_seq() -> None:
    k = make_kernel(network=None)
    order: list[tuple[str, int]] = []

    class Sink(Actor):
        kind = "test-sink"

        @on(Ping)
        def got(self, msg: Ping) -> None:
            assert self.envelope is not None
            order.append((self.envelope.src, msg.n))

    class Burst(Actor):
        kind = "test-burst"

        async def on_start(self) -> None:
            for n in range(3):
                self.send("sink", Ping(n))

    # All on one host: same latency for every message, so only the key orders them.
    k.network.set_link_latency("east/ctl0", "east/ctl0", 100, 100)
    spawn(k, Sink, "sink", "east/ctl0")
    spawn(k, Burst, "b", "east/ctl0")
    spawn(k, Burst, "a", "east/ctl0")
    run(k, S)
    # "b" was spawned before "a", so it has the lower sender id.
    assert order == [("b", 0), ("b", 1), ("b", 2), ("a", 0), ("a", 1), ("a", 2)]


def test_an_actor_that_raises_crashes_alone_and_restarts() -> None:
    k = make_kernel(options=KernelOptions(restart_delay_us=2 * S))
    events = record(k, "crash", "start", "restart", "deliver", "drop")
    spawn(k, Echo, "echo", "west/ctl0")
    spawn(k, Caller, "caller", "east/ctl0")
    spawn(
        k,
        Poker,
        "poker",
        "east/ctl0",
        [
            (1 * S, "echo", Boom()),
            (1500 * MS, "caller", Go("echo", 1)),
            (5 * S, "caller", Go("echo", 2)),
        ],
    )
    run(k, 10 * S)
    crash = events_of(events, "crash")
    assert (
        len(crash) == 1 and crash[0].dst == "echo" and "ValueError: deliberate" in crash[0].reason
    )
    # The Ping at 1.5 s reached a dead actor: dropped and traced; the call timed out.
    assert any(e.reason == "actor-down" for e in events_of(events, "drop", "Ping"))
    restart = [e for e in events if e.kind == "restart"]
    assert len(restart) == 1 and restart[0].t_us == crash[0].t_us + 2 * S
    results = k.instance("caller").results  # type: ignore[union-attr]
    assert [r[0:2] for r in results] == [("timeout", 1), ("pong", 2)]
    assert k.crashes == 1


def test_a_foreign_await_crashes_the_actor_loudly_and_the_run_goes_on() -> None:
    k = make_kernel()
    events = record(k, "crash", "restart")
    spawn(k, Echo, "echo", "west/ctl0")
    spawn(k, Caller, "caller", "east/ctl0")
    spawn(
        k, Poker, "poker", "east/ctl0", [(1 * S, "echo", Nap()), (5 * S, "caller", Go("echo", 7))]
    )
    run(k, 10 * S)
    (crash,) = events_of(events, "crash")
    assert "ForeignAwait" in crash.reason and "outside the kernel" in crash.reason
    assert [e.kind for e in events] == ["crash", "restart"]
    assert k.instance("caller").results[0][0:2] == ("pong", 7)  # type: ignore[union-attr]


def test_crash_drops_mailbox_and_timers_and_restart_recovers_from_the_store(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[object], int, list[object]]:
        async with Store.open_ctx(tmp_path / "run.db") as store:
            k = make_kernel(store=store)
            events = record(k, "drop", "crash", "restart")
            spawn(k, Echo, "echo", "west/ctl0")
            script = [(S * i, "echo", Ping(i)) for i in range(1, 4)]
            script += [(S * i, "echo", Ping(i)) for i in range(10, 13)]
            spawn(k, Poker, "poker", "east/ctl0", script)
            # Queue messages behind a pause, then crash: the queued ones are lost.
            k.at(3 * S + 10 * MS, k.pause, "echo", 2 * S)
            k.at(4 * S, k.crash, "echo", "test", 4 * S)
            await k.run(20 * S)
            echo = k.instance("echo")
            assert echo is not None
            return echo.seen, echo.persisted.n, events

    seen, persisted, events = asyncio.run(scenario())
    # Pings 1 and 2 handled before the crash (persisted), 3 was queued in the
    # paused actor and dropped with its mailbox; the restarted actor (8 s) recovered
    # its count from the store and handled 10–12.
    assert seen == [10, 11, 12]
    assert persisted == 5
    crash = next(e for e in events if e.kind == "crash")
    restart = next(e for e in events if e.kind == "restart")
    assert (crash.t_us, restart.t_us) == (4 * S, 8 * S)


def test_messages_to_a_down_actor_are_dropped_and_traced() -> None:
    k = make_kernel()
    events = record(k, "drop")
    spawn(k, Echo, "echo", "west/ctl0")
    spawn(k, Poker, "poker", "east/ctl0", [(S * i, "echo", Ping(i)) for i in range(1, 6)])
    k.at(1500 * MS, k.crash, "echo", "test", None)
    run(k, 10 * S)
    dropped = [e for e in map(named, events) if e.reason == "actor-down"]
    assert len(dropped) == 4
    assert not k.is_up("echo") and k.actor("echo").state == DOWN  # type: ignore[union-attr]


def test_role_addresses_follow_the_lease_and_drop_when_nobody_leads(tmp_path: Path) -> None:
    class Leader(Actor):
        kind = "test-leader"

        async def on_start(self) -> None:
            await self.store(leases.acquire, "svc", self.address, self.now_us, 5 * S)
            self.got: list[int] = []

        @on(Ping)
        def ping(self, msg: Ping) -> None:
            self.got.append(msg.n)

    async def scenario() -> tuple[list[int], list[int], list[object]]:
        async with Store.open_ctx(tmp_path / "run.db") as store:
            k = make_kernel(store=store)
            events = record(k, "drop")
            spawn(k, Poker, "poker", "south/ctl0", [(S * i, "svc", Ping(i)) for i in range(1, 9)])
            spawn(k, Leader, "l1", "east/ctl0", at_us=500 * MS)  # leads 0.5–5.5 s
            spawn(k, Leader, "l2", "west/ctl0", at_us=6500 * MS)  # takes over at 6.5 s
            await k.run(10 * S)
            return k.instance("l1").got, k.instance("l2").got, events  # type: ignore[union-attr]

    got1, got2, events = asyncio.run(scenario())
    assert got1 == [1, 2, 3, 4, 5]
    assert got2 == [7, 8]
    # Ping 6 was sent at 6 s, between l1's expiry (5.5 s) and l2's lease (6.5 s).
    (drop,) = map(named, events)
    assert (drop.reason, drop.dst, drop.t_us) == ("no-leader", "svc", 6 * S)


def test_trace_rows_reach_the_database_in_chunks(tmp_path: Path) -> None:
    from store.trace import count_trace, iter_trace

    async def scenario() -> tuple[int, int, list[str]]:
        async with Store.open_ctx(tmp_path / "run.db") as store:
            writer = TraceWriter(store, batch_size=50)
            k = make_kernel(store=store, writer=writer)
            spawn(k, Echo, "echo", "west/ctl0")
            spawn(k, Poker, "poker", "east/ctl0", [(S * i, "echo", Ping(i)) for i in range(1, 200)])
            await k.run(300 * S)
            await k.tracer.flush()
            kinds = [row.kind async for row in iter_trace(store)]
            return k.tracer.seq, await count_trace(store), kinds

    seq, stored, kinds = asyncio.run(scenario())
    assert stored == seq == len(kinds) > 400
    assert kinds.count("deliver") >= 199 * 2


def test_timers_fire_in_order_and_cancelled_timers_do_not() -> None:
    fired: list[tuple[int, str]] = []

    class Clock(Actor):
        kind = "test-clock"

        async def on_start(self) -> None:
            self.set_timer(3 * S, "c")
            self.set_timer(1 * S, "a")
            cancelled = self.set_timer(2 * S, "x")
            self.set_timer(2 * S, "b")
            self.cancel_timer(cancelled)
            await self.sleep(500 * MS)
            fired.append((self.now_us, "slept"))

        @on(str)
        def tick(self, name: str) -> None:
            fired.append((self.now_us, name))

    k = make_kernel()
    spawn(k, Clock, "clock", "east/ctl0")
    run(k, 10 * S)
    assert fired == [(500 * MS, "slept"), (1 * S, "a"), (2 * S, "b"), (3 * S, "c")]


def test_metric_samples_reach_the_store_with_their_emulated_time(tmp_path: Path) -> None:
    from store.trace import MetricWriter, read_metrics

    class Gauge(Actor):
        kind = "test-gauge"

        async def on_start(self) -> None:
            for i in range(3):
                await self.sleep(S)
                self.metric("queue_len", i * 1.5, region="east")

    async def scenario() -> list[tuple[int, str, float]]:
        async with Store.open_ctx(tmp_path / "run.db") as store:
            k = make_kernel(store=store)
            k.metrics = MetricWriter(store)
            spawn(k, Gauge, "g", "east/ctl0")
            await k.run(10 * S)
            await k.flush()
            return await read_metrics(store, "queue_len")

    assert asyncio.run(scenario()) == [
        (1 * S, '{"region":"east"}', 0.0),
        (2 * S, '{"region":"east"}', 1.5),
        (3 * S, '{"region":"east"}', 3.0),
    ]


def test_gather_collects_replies_until_its_deadline_and_late_ones_arrive_as_messages() -> None:
    class Asker(Actor):
        kind = "test-asker"

        async def on_start(self) -> None:
            self.late: list[int] = []
            self.replies = await self.gather(
                [("e1", Ping(1)), ("e2", Ping(2)), ("e3", Ping(3))], timeout_us=S
            )
            self.done_at = self.now_us

        @on(Pong)
        def pong(self, msg: Pong) -> None:
            self.late.append(msg.n)

    k = make_kernel()
    for name, host in (("e1", "west/ctl0"), ("e2", "south/ctl0"), ("e3", "east/ctl1")):
        spawn(k, Echo, name, host)
    k.at(0, k.pause, "e2", 3 * S)  # e2 answers only after 3 s
    spawn(k, Asker, "asker", "east/ctl0", at_us=10 * MS)
    run(k, 10 * S)
    asker = k.instance("asker")
    assert [r.n if r else None for r in asker.replies] == [1, None, 3]  # type: ignore[union-attr]
    assert asker.done_at == 10 * MS + S  # type: ignore[union-attr]
    assert asker.late == [2]  # type: ignore[union-attr]


class Tally(Actor):
    """Counts Pings by number; handlers run once per reliable message."""

    kind = "test-tally"

    async def on_start(self) -> None:
        self.got: list[int] = []

    @on(Ping)
    def ping(self, msg: Ping) -> None:
        self.got.append(msg.n)


class Sender(Actor):
    kind = "test-sender"

    async def on_start(self) -> None:
        for n in range(5):
            self.send_reliably("tally", Ping(n))


def test_reliable_messages_survive_a_down_receiver_and_arrive_once() -> None:
    from emulator.run.faults import FaultInjector
    from emulator.run.scenario import DuplicateFault
    from emulator.units import Duration

    k = make_kernel()
    spawn(k, Tally, "tally", "west/ctl0")
    spawn(k, Sender, "sender", "east/ctl0", at_us=100 * MS)
    # Down when the first copies arrive; every message is also duplicated on the WAN.
    k.at(0, k.crash, "tally", "test", 7 * S)
    FaultInjector(k).schedule(
        [DuplicateFault(at=Duration(0), duration=Duration(60 * S), probability=1.0)]
    )
    run(k, 60 * S)
    assert sorted(k.instance("tally").got) == [0, 1, 2, 3, 4]  # type: ignore[union-attr]
    assert k.instance("sender")._outbox == {}  # type: ignore[union-attr]


def test_reliable_delivery_to_an_address_gives_up_after_its_limit_to_a_role_never(
    monkeypatch: object,
) -> None:
    import emulator.actor as actor_module

    monkeypatch.setattr(actor_module, "RESENDS_MAX", 3)  # type: ignore[attr-defined]
    # To an actor that is down for good: 3 resends after 5, 10 and 20 s, and the
    # last one (40 s) gives up: 75 s.
    k = make_kernel()
    gave_up = record(k, "decision")
    spawn(k, Tally, "tally", "west/ctl0")
    k.at(0, k.crash, "tally", "test", None)  # type: ignore[attr-defined]
    spawn(k, Sender, "sender", "east/ctl0", at_us=MS)
    run(k, 90 * S)
    assert len([e for e in gave_up if e.type == "reliable.gave-up"]) == 5
    assert k.instance("sender").unacknowledged == 0  # type: ignore[union-attr]
    # To a role (nobody ever leads "tally" here): resent for as long as it takes.
    k = make_kernel()
    gave_up = record(k, "decision")
    spawn(k, Sender, "sender", "east/ctl0")
    run(k, 600 * S)
    assert [e for e in gave_up if e.type == "reliable.gave-up"] == []
    assert k.instance("sender").unacknowledged == 5  # type: ignore[union-attr]


def test_overriding_an_async_handler_with_a_plain_function_is_refused_at_class_definition() -> None:
    """Its call of the base handler would return a coroutine nobody awaits: a silent drop.

    A broken RMS of the test suite did exactly this when the RMS's `job_ended`
    became async, and its test went on passing for another reason.
    """

    class Base(Actor):
        @on(Ping)
        async def ping(self, msg: Ping) -> None:
            self.seen = msg

    try:

        class Plain(Base):
            def ping(self, msg: Ping) -> None:  # type: ignore[override]
                super().ping(msg)

    except TypeError as error:
        assert "Plain.ping overrides an async handler" in str(error)
    else:
        raise AssertionError("a plain override of an async handler was accepted")

    class Awaiting(Base):  # the right way: accepted, and the base handler runs
        async def ping(self, msg: Ping) -> None:
            await super().ping(msg)

    k = make_kernel()
    spawn(k, Awaiting, "a", "east/ctl0")
    k.post("a", Ping(3))  # type: ignore[attr-defined]
    run(k, S)
    assert k.instance("a").seen == Ping(3)  # type: ignore[union-attr]


def test_a_method_named_like_a_base_class_state_is_refused_at_class_definition() -> None:
    """The base goes on using the name as state: `self.flag = True` replaces the method.

    A cluster scheduler's new `_started` method took the name of its lease
    holder's flag and crashed at its first handler (caught by the run, not at
    definition). State named like a base's method is refused likewise.
    """

    class Base(Actor):
        started: bool = False

        def renew(self) -> None:
            self.started = True

    with pytest.raises(TypeError, match=r"Method\.started is a method where Base has state"):

        class Method(Base):
            def started(self) -> None:  # type: ignore[override]
                pass

    with pytest.raises(TypeError, match=r"State\.renew is state where Base has a method"):

        class State(Base):
            renew = 3  # type: ignore[assignment]

    class Fine(Base):  # overriding a method with a method, state with state
        started = True

        def renew(self) -> None:
            super().renew()

    assert Fine.started is True
