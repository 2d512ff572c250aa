"""network: latency tiers, partitions, loss, duplication, bulk flows, hardware down/up."""

from __future__ import annotations

import asyncio
import math

from emulator.actor import Actor, on
from emulator.net.network import GBPS_TO_BYTES
from emulator.net.specs import NetworkSpec, RegionPairSpec
from emulator.run.events import named
from emulator.run.faults import FaultInjector
from emulator.run.scenario import DuplicateFault, Duration, LossFault, PartitionFault, PauseFault
from emulator.sysmsg import FlowDone
from emulator.units import MS, S
from tests.support.actors import Beater
from tests.support.harness import make_kernel, record, spawn
from tests.support.trace import events_of


def test_latency_follows_the_topology_tier() -> None:
    spec = NetworkSpec(
        jitter_fraction=0.0, region_pairs=[RegionPairSpec(a="east", b="west", latency_ms=70)]
    )
    k = make_kernel(network=spec)
    net = k.network
    m = "east/dc0/fd0/r0/m0"
    assert net.transmit(m, "east/dc0/fd0/r0/m1") == 50  # same rack: 0.05 ms
    assert net.transmit(m, "east/dc0/fd1/r0/m0") == 500  # same DC: 0.5 ms
    assert net.transmit(m, "east/ctl0") == 500  # control hosts sit in dc0
    assert net.transmit(m, "west/dc0/fd0/r0/m0") == 70 * MS  # the pair's latency
    south = net.pair_latency_us("east", "south")
    assert 30 * MS <= south <= 150 * MS  # drawn from the default range, seeded


def test_jitter_is_seeded_and_bounded() -> None:
    def sample(seed: int) -> list[int]:
        k = make_kernel(seed=seed, network=NetworkSpec(jitter_fraction=0.5))
        return [k.network.transmit("east/ctl0", "west/ctl0") for _ in range(200)]

    a, b, c = sample(1), sample(1), sample(2)
    assert a == b and a != c
    base = min(a)
    assert max(a) <= base * 1.5 + 1 and len(set(a)) > 50


def test_partition_drops_both_ways_for_its_duration_then_heals() -> None:
    k = make_kernel()
    drops = record(k, "drop")
    spawn(k, Beater, "e", "east/ctl0", "w")
    spawn(k, Beater, "w", "west/ctl0", "e")
    FaultInjector(k).schedule(
        [PartitionFault(at=Duration(2 * S), regions=["east", "west"], duration=Duration(3 * S))]
    )
    asyncio.run(k.run(8 * S))
    for name in ("e", "w"):
        got = k.instance(name).got  # type: ignore[union-attr]
        # Nothing arrives between the cut (2 s, plus in-flight messages) and the heal at 5 s.
        assert not [t for t, _ in got if 2 * S + 200 * MS < t < 5 * S]
        assert [t for t, _ in got if t > 5 * S + 200 * MS]
    partition_drops = [d for d in map(named, drops) if d.reason == "partition"]
    senders = {d.src for d in partition_drops}
    assert senders == {"e", "w"}
    # 30 beats each way were sent during the 3 s cut.
    assert 58 <= len(partition_drops) <= 62


def test_loss_and_duplication_rates_are_honoured() -> None:
    k = make_kernel()
    drops = record(k, "drop")
    spawn(k, Beater, "e", "east/ctl0", "w")
    spawn(k, Beater, "w", "west/ctl0", "sink")
    spawn(k, Beater, "sink", "south/ctl0", "nowhere")
    injector = FaultInjector(k)
    injector.schedule(
        [
            LossFault(
                at=Duration(0),
                duration=Duration(2000 * S),
                between=["east", "west"],
                probability=0.3,
            ),
            DuplicateFault(
                at=Duration(0),
                duration=Duration(2000 * S),
                between=["west", "south"],
                probability=0.2,
            ),
        ]
    )
    asyncio.run(k.run(1000 * S))
    sent = k.instance("e").n  # type: ignore[union-attr]
    lost = len([d for d in map(named, drops) if d.reason == "loss" and d.src == "e"])
    # Binomial(n=~10,000, p=0.3): 5 standard deviations is about ±230.
    sd = math.sqrt(sent * 0.3 * 0.7)
    assert abs(lost - 0.3 * sent) < 5 * sd
    got = k.instance("sink").got  # type: ignore[union-attr]
    w_sent = k.instance("w").n  # type: ignore[union-attr]
    dup = len(got) - len({n for _, n in got})
    sd = math.sqrt(w_sent * 0.2 * 0.8)
    assert abs(dup - 0.2 * w_sent) < 5 * sd
    # Messages on other links are untouched: e's traffic only crosses east–west.
    assert not [d for d in map(named, drops) if d.reason == "loss" and d.src != "e"]


class Mover(Actor):
    """Starts the bulk flows given as params and records their completion times."""

    kind = "test-mover"

    async def on_start(self) -> None:
        self.done: dict[int, int] = {}
        self.ids = [self.start_flow(src, dst, nbytes) for src, dst, nbytes in self.params]

    @on(FlowDone)
    def finished(self, msg: FlowDone) -> None:
        self.done[msg.flow_id] = self.now_us


def _flow_kernel() -> object:
    # One pair link of 8 Gbit/s = 1e9 B/s is the bottleneck (egress/ingress 400 Gbit/s).
    spec = NetworkSpec(region_pairs=[RegionPairSpec(a="east", b="west", bandwidth_gbps=8)])
    return make_kernel(network=spec)


def test_two_flows_share_a_link_and_the_survivor_speeds_up() -> None:
    k = _flow_kernel()
    assert 8 * GBPS_TO_BYTES == 1e9
    gb = 1_000_000_000
    spawn(k, Mover, "m", "east/ctl0", [("east", "west", 1 * gb), ("east", "west", 3 * gb)])
    asyncio.run(k.run(100 * S))  # type: ignore[attr-defined]
    a, b = k.instance("m").ids  # type: ignore[attr-defined]
    done = k.instance("m").done  # type: ignore[attr-defined]
    # Each gets 0.5 GB/s: flow a (1 GB) ends at 2 s; b has 2 GB left, alone at 1 GB/s → 4 s.
    assert done[a] == 2 * S
    assert done[b] == 4 * S


def test_a_partition_pauses_flows_until_it_heals() -> None:
    k = _flow_kernel()
    gb = 1_000_000_000
    spawn(k, Mover, "m", "east/ctl0", [("east", "west", 1 * gb), ("east", "west", 3 * gb)])
    FaultInjector(k).schedule(  # type: ignore[arg-type]
        [PartitionFault(at=Duration(1 * S), regions=["east", "west"], duration=Duration(10 * S))]
    )
    asyncio.run(k.run(100 * S))  # type: ignore[attr-defined]
    a, b = k.instance("m").ids  # type: ignore[attr-defined]
    done = k.instance("m").done  # type: ignore[attr-defined]
    # Both paused for 10 s at 1 s, bytes kept: every completion shifts by exactly 10 s.
    assert done == {a: 12 * S, b: 14 * S}


def test_a_crashed_owner_cancels_its_flows() -> None:
    k = _flow_kernel()
    flows = record(k, "flow")
    gb = 1_000_000_000
    spawn(k, Mover, "m", "east/ctl0", [("east", "west", 2 * gb)])
    k.at(1 * S, k.crash, "m", "test", None)  # type: ignore[attr-defined]
    asyncio.run(k.run(100 * S))  # type: ignore[attr-defined]
    cancel = [named(e) for e in flows if e.type == "cancel"]
    assert len(cancel) == 1 and cancel[0].bytes_done == gb  # half of it had arrived
    assert not [e for e in flows if e.type == "done"]


class LateReader(Mover):
    """On the first `FlowDone`, reads, paces and stops the other flow, then notes its own end."""

    @on(FlowDone)
    def finished(self, msg: FlowDone) -> None:
        if not self.done:
            other = self.ids[1]
            self.seen = self.flow_progress(other)
            self.set_flow_rate_cap(other, 1.0)
            self.stopped = self.cancel_flow(other)
        self.done[msg.flow_id] = self.now_us


def test_a_paused_owner_finds_a_flow_that_ended_meanwhile_complete() -> None:
    """Found by explore: the migration service, paused past a flow's end, died reading it.

    A (0.5 GB) ends at 1 s, B (1 GB) at 1.5 s, while their owner is paused from
    0.5 s to 2.5 s. Handling A's `FlowDone` first, it asks after B: complete,
    though B's own `FlowDone` waits behind; pacing and stopping B change nothing.
    """
    k = _flow_kernel()
    flows = record(k, "flow")
    gb = 1_000_000_000
    spawn(k, LateReader, "m", "east/ctl0", [("east", "west", gb // 2), ("east", "west", gb)])
    pause = PauseFault(at=Duration(S // 2), target="m", duration=Duration(2 * S))
    FaultInjector(k).schedule([pause])  # type: ignore[arg-type]
    asyncio.run(k.run(100 * S))  # type: ignore[attr-defined]
    m = k.instance("m")  # type: ignore[attr-defined]
    a, b = m.ids
    assert m.seen == (gb, gb) and m.stopped == gb
    assert m.done == {a: S * 5 // 2, b: S * 5 // 2}  # both read once the pause is over
    ended = [(e.type, named(e).flow_id) for e in flows if e.type in ("done", "cancel", "cap")]
    assert ended == [("done", a), ("done", b)]  # nothing paced or cancelled after its end


def test_machine_and_region_failures_crash_hosted_actors_until_they_come_back() -> None:
    k = make_kernel()
    events = record(k, "crash", "restart", "drop", "restart-deferred")
    spawn(k, Beater, "m", "east/dc0/fd1/r0/m1", "w")
    spawn(k, Beater, "w", "west/ctl0", "m")
    k.at(1 * S, k.set_host_state, "east/dc0/fd1", False)  # the fault domain loses power
    k.at(3 * S, k.set_host_state, "east/dc0/fd1", True)
    k.at(5 * S, k.set_host_state, "west", False)  # a whole region goes dark
    k.at(6 * S, k.set_host_state, "west", True)
    asyncio.run(k.run(8 * S))
    crashes = [(e.t_us, e.dst) for e in events if e.kind == "crash"]
    restarts = [(e.t_us, e.dst) for e in events if e.kind == "restart"]
    assert crashes == [(1 * S, "m"), (5 * S, "w")]
    assert restarts == [(3 * S, "m"), (6 * S, "w")]
    down_drops = [e for e in events_of(events, "drop") if e.reason in ("host-down", "actor-down")]
    assert down_drops  # w's beats to m while m's machine was down
