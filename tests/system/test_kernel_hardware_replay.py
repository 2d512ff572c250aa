"""kernel: a hardware watcher that missed a change is told the current state again.

The kernel tells watchers (the CMs, RAS) of hardware changes as they happen;
one that was down at that moment used to never learn of them. Now every
watcher that starts (or an instance that takes over a watching role) is told
again: `HostUp` for each node that changed and is up, then `HostDown` for
each node that is down.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from emulator.actor import Actor, on
from emulator.kernel import Kernel
from emulator.sysmsg import HostDown, HostUp
from emulator.units import MIN, S
from tests.support.dsl import TAKEOVER_US_MAX, crash, job, run, scenario, states, workload
from tests.support.harness import make_kernel, spawn
from tests.support.trace import leaders, store_events

M0 = "east/dc0/fd0/r0/m0"
SINGLE = {"gms": 1, "rms": 1, "cm": 1}


class Watcher(Actor):
    """Records the hardware news it hears, in order."""

    def __init__(self, address: str, params: Any = None) -> None:
        super().__init__(address, params)
        self.heard: list[tuple[str, str]] = []

    @on(HostDown)
    def down(self, msg: HostDown) -> None:
        self.heard.append(("down", msg.node))

    @on(HostUp)
    def up(self, msg: HostUp) -> None:
        self.heard.append(("up", msg.node))


def test_a_restarted_watcher_hears_ups_before_downs_of_every_node_that_changed() -> None:
    k = make_kernel()
    spawn(k, Watcher, "w", "west/ctl0")
    k.hardware_watchers = ("w",)
    rack, machine = "east/dc0/fd0/r0", "east/dc0/fd0/r0/m1"
    k.at(1 * S, k.crash, "w", "test", 10 * S)
    k.at(2 * S, k.set_host_state, machine, False)
    k.at(3 * S, k.set_host_state, rack, False)
    k.at(4 * S, k.set_host_state, rack, True)  # the rack is back, its machine is not
    k.at(5 * S, k.set_host_state, "east/dc0/fd1", False)
    k.at(6 * S, k.set_host_state, "east/dc0/fd1", True)
    asyncio.run(k.run(20 * S))
    watcher = k.instance("w")
    assert isinstance(watcher, Watcher)
    # Missed while down (1–11 s): told at the restart, the machine still down last.
    assert watcher.heard == [("up", rack), ("up", "east/dc0/fd1"), ("down", machine)]


def test_a_watcher_that_missed_nothing_hears_nothing_more() -> None:
    k: Kernel = make_kernel()
    spawn(k, Watcher, "w", "west/ctl0")
    k.hardware_watchers = ("w",)
    k.at(1 * S, k.set_host_state, "east/dc0/fd0/r0/m1", False)
    asyncio.run(k.run(5 * S))
    assert k.instance("w").heard == [("down", "east/dc0/fd0/r0/m1")]  # type: ignore[union-attr]


# ---- MAST's cluster managers ------------------------------------------------------------------
def machine_story(*faults: dict[str, Any], replicas: dict[str, int] | None = None) -> dict:
    """J (16 GPUs on m0 and m1) trains for 2 h in east's one cluster."""
    raw = scenario([workload("J", "lo", 0, job(gpus=16, work=120 * MIN))], regions=("east",))
    raw["duration"] = "1h"
    raw["faults"] = list(faults)
    if replicas is not None:
        raw["system"]["replicas"] = replicas
    return raw


def down(node: str, at: str, duration: str | None = None) -> dict[str, Any]:
    fault: dict[str, Any] = {"action": "down", "at": at, "node": node}
    if duration is not None:
        fault["duration"] = duration
    return fault


def health(events: list[Any]) -> list[tuple[float, str, list[str], bool]]:
    """(minute, writer, hosts, healthy) of every health write."""
    return [(e.t_us / MIN, e.src, e.hosts, e.healthy) for e in store_events(events, "fleet.health")]


def test_cm_restarted_after_its_machine_failed_marks_it_and_moves_the_job(tmp_path: Path) -> None:
    # The only CM is down from 10 to 15 min; m0 (under J) fails at 12 min.
    raw = machine_story(crash("cm/east/c0/0", "10m", "5m"), down(M0, "12m"), replicas=SINGLE)
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert health(events) == [(15.0, "cm/east/c0/0", [M0], False)]
    (moved,) = [e for e in events if e.type == "cm.job-moved"]
    assert moved.t_us == 15 * MIN
    starts = [e for e in store_events(events, "fleet.start", "J") if e.result]
    assert [M0 in {h for h, _ in e.gpus} for e in starts] == [True, False]


def test_without_the_replay_the_restarted_cm_never_learns_of_the_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bug: the CM never marks the machine dead. Its probe finds J's agent
    # gone and restarts J, but on the dead machine again, so J stays "running"
    # on it for good.
    monkeypatch.setattr(Kernel, "replay_hardware", lambda self, address: 0)
    raw = machine_story(crash("cm/east/c0/0", "10m", "5m"), down(M0, "12m"), replicas=SINGLE)
    result, events = run(raw, tmp_path)
    assert health(events) == []
    starts = [e for e in store_events(events, "fleet.start", "J") if e.result]
    assert starts and all(M0 in {h for h, _ in e.gpus} for e in starts)
    assert states(result)["J"][0] == "RUNNING"


def test_cm_restarted_after_its_machine_came_back_marks_it_healthy(tmp_path: Path) -> None:
    raw = machine_story(down(M0, "5m", "7m"), crash("cm/east/c0/0", "10m", "5m"), replicas=SINGLE)
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert health(events) == [
        (5.0, "cm/east/c0/0", [M0], False),
        (15.0, "cm/east/c0/0", [M0], True),  # it came back at 12 min, unheard
    ]


def test_every_cm_instance_watches_and_only_the_leader_acts(tmp_path: Path) -> None:
    result, events = run(machine_story(down(M0, "12m", "10m")), tmp_path)
    assert result.violations == []
    heard = {e.dst for e in events if e.kind == "deliver" and e.type == "HostDown"}
    assert {"cm/east/c0/0", "cm/east/c0/1", "cm/east/c0/2"} <= heard
    assert health(events) == [
        (12.0, "cm/east/c0/0", [M0], False),
        (22.0, "cm/east/c0/0", [M0], True),
    ]
    assert states(result)["J"] == ("RUNNING", 0)


def test_a_follower_taking_over_learns_of_a_failure_its_leader_never_handled(
    tmp_path: Path,
) -> None:
    # The CM leader dies at 10 min; m0 fails 5 s later, before a follower leads.
    # The followers heard of it but did not act; the one that takes over is told again.
    result, events = run(
        machine_story(crash("leader of cm/east/c0", "10m"), down(M0, "10m5s")), tmp_path
    )
    assert result.violations == []
    (_, first, _), (t_new, successor, _) = leaders(events, "cm/east/c0")
    assert first == "cm/east/c0/0" != successor
    assert t_new - 10 * MIN <= TAKEOVER_US_MAX
    assert health(events) == [(t_new / MIN, successor, [M0], False)]
    (moved,) = [e for e in events if e.type == "cm.job-moved"]
    assert moved.src == successor and moved.t_us == t_new
