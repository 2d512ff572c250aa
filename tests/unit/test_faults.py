"""faults: scheduled faults with role-relative targets, and the seeded nemesis."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from emulator.run.events import named
from emulator.run.faults import FaultInjector, nemesis_schedule
from emulator.run.scenario import (
    CrashFault,
    DelayFault,
    DownFault,
    Duration,
    NemesisSpec,
    PartitionFault,
    PauseFault,
)
from emulator.units import MIN, MS, S
from store import Store, leases
from tests.support.actors import Beater
from tests.support.harness import make_kernel, record, spawn

ACTORS = ["a", "b", "c"]


def draw(seed: int, **kw: object) -> tuple[list[object], int]:
    spec = NemesisSpec(enabled=True, start=Duration(MIN), **kw)  # type: ignore[arg-type]
    return nemesis_schedule(
        spec,
        random.Random(f"nemesis:{seed}"),
        run_us=600 * MIN,
        actors=ACTORS,
        roles=["svc"],
        regions=["east", "west", "south"],
        nodes=["east/dc0/fd0/r0/m0"],
    )


def test_the_nemesis_schedule_is_a_function_of_its_seed() -> None:
    assert draw(1) == draw(1)
    assert draw(1) != draw(2)


def test_every_nemesis_fault_ends_before_the_final_heal() -> None:
    actions = ["crash", "pause", "partition", "loss", "duplicate", "delay", "down"]
    faults, heal_at = draw(3, actions=actions, interval_mean=Duration(2 * MIN))
    assert heal_at == 540 * MIN  # 90% of the run by default
    assert len(faults) > 100
    assert {type(f).__name__ for f in faults} >= {
        "CrashFault",
        "PauseFault",
        "PartitionFault",
        "LossFault",
        "DuplicateFault",
        "DelayFault",
        "DownFault",
    }
    for fault in faults:
        length = getattr(fault, "duration", None) or getattr(fault, "restart_after", None)
        assert fault.at >= MIN and fault.at + length <= heal_at


def test_faults_max_limits_the_schedule() -> None:
    faults, _ = draw(4, faults_max=5, interval_mean=Duration(S))
    assert len(faults) == 5


def test_final_heal_restarts_crashed_actors_heals_the_network_and_raises_nodes() -> None:
    k = make_kernel()
    spawn(k, Beater, "e", "east/dc0/fd0/r0/m0", "w")
    spawn(k, Beater, "w", "west/ctl0", "e")
    injector = FaultInjector(k)
    injector.schedule(
        [
            CrashFault(at=Duration(S), target="w"),  # no restart of its own
            PartitionFault(at=Duration(S), regions=["east", "south"]),  # no end of its own
            DownFault(at=Duration(S), node="east/dc0/fd0"),
        ]
    )
    k.at(5 * S, injector.final_heal)
    asyncio.run(k.run(10 * S))
    assert k.is_up("w") and k.is_up("e")
    assert not k.network.partitions and not k.network.down
    # Both talk again after the heal.
    assert [t for t, _ in k.instance("e").got if t > 5 * S]  # type: ignore[union-attr]


def test_a_delay_window_adds_latency_only_while_it_lasts() -> None:
    k = make_kernel()
    spawn(k, Beater, "e", "east/ctl0", "w")
    spawn(k, Beater, "w", "west/ctl0", "sink")
    FaultInjector(k).schedule(
        [
            DelayFault(
                at=Duration(2 * S), duration=Duration(2 * S), between=["east", "west"], extra_ms=700
            )
        ]
    )
    deliveries = record(k, "deliver")
    asyncio.run(k.run(6 * S))
    wan = k.network.pair_latency_us("east", "west")
    lat = [
        (e.payload["sent_us"], e.t_us - e.payload["sent_us"]) for e in deliveries if e.src == "e"
    ]
    during = [d for sent, d in lat if 2 * S <= sent < 4 * S]
    outside = [d for sent, d in lat if sent < 2 * S or sent >= 4 * S]
    assert during and min(during) >= wan + 700 * MS
    assert outside and max(outside) < wan * 1.1 + 2


def test_leader_of_role_targets_whoever_holds_the_lease_at_that_instant(tmp_path: Path) -> None:
    from emulator.actor import Actor

    class Holder(Actor):
        kind = "test-holder"

        async def on_start(self) -> None:
            await self.store(leases.acquire, "svc", self.address, self.now_us, 100 * S)

    async def story() -> list[object]:
        async with Store.open_ctx(tmp_path / "f.db") as store:
            k = make_kernel(store=store)
            events = record(k, "crash", "fault", "pause")
            spawn(k, Holder, "h1", "east/ctl0")
            spawn(k, Holder, "h2", "west/ctl0", at_us=S)
            FaultInjector(k).schedule(
                [
                    PauseFault(at=Duration(2 * S), target="leader of svc", duration=Duration(S)),
                    CrashFault(at=Duration(5 * S), target="leader of svc"),
                    CrashFault(at=Duration(6 * S), target="leader of nobody"),
                ]
            )
            await k.run(10 * S)
            return events

    events = asyncio.run(story())
    pause = [e for e in events if e.kind == "pause"]
    crash = [e for e in events if e.kind == "crash"]
    assert [e.dst for e in pause] == ["h1"] and [e.dst for e in crash] == ["h1"]
    # A role with no leader: the fault is recorded and does nothing.
    nobody = [
        e for e in events if e.kind == "fault" and e.payload.get("target") == "leader of nobody"
    ]
    assert len(nobody) == 1 and nobody[0].payload["actor"] is None


def test_a_link_partition_cuts_one_host_pair_both_ways_and_nothing_else() -> None:
    from emulator.run.scenario import PartitionFault as Cut

    k = make_kernel()
    drops = record(k, "drop")
    spawn(k, Beater, "a", "east/ctl0", "b")
    spawn(k, Beater, "b", "west/ctl0", "a")
    spawn(k, Beater, "c", "east/ctl1", "b")  # same regions, another host: unaffected
    FaultInjector(k).schedule(
        [Cut(at=Duration(S), hosts=["east/ctl0", "west/ctl0"], duration=Duration(2 * S))]
    )
    asyncio.run(k.run(5 * S))
    cut = [d for d in map(named, drops) if d.reason == "partition"]
    assert {d.src for d in cut} == {"a", "b"}
    assert all(S <= d.t_us < 3 * S for d in cut) and len(cut) >= 38
    got_b = k.instance("b").got  # type: ignore[union-attr]
    assert [t for t, _ in got_b if S + 200 * MS < t < 3 * S]  # c's beats still arrive
