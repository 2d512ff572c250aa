"""kernel: an actor its host supervises comes back after a crash no fault undoes."""

from __future__ import annotations

import asyncio

from emulator.actor import Actor
from emulator.kernel import DOWN
from emulator.units import S
from tests.support.harness import make_kernel, record, spawn


class Plain(Actor):
    kind = "test-plain"


class Task(Actor):
    kind = "test-task"
    supervised_restart_us = 5 * S


def _restarts(cls: type[Actor], restart_after_us: int | None) -> list[int]:
    k = make_kernel()
    events = record(k, "restart")
    spawn(k, cls, "a", "west/ctl0")
    k.at(1 * S, k.crash, "a", "killed", restart_after_us)
    asyncio.run(k.run(60 * S))
    return [e.t_us for e in events if e.dst == "a"]


def test_a_supervised_actor_killed_for_good_is_restarted_after_its_delay() -> None:
    assert _restarts(Task, None) == [6 * S]


def test_a_restart_the_fault_names_wins_over_the_supervisor() -> None:
    assert _restarts(Task, 20 * S) == [21 * S]


def test_an_unsupervised_actor_killed_for_good_stays_down() -> None:
    assert _restarts(Plain, None) == []


def test_an_actor_down_with_its_host_is_not_restarted_by_the_supervisor() -> None:
    k = make_kernel()
    spawn(k, Task, "a", "west/ctl0")
    k.at(1 * S, k.set_host_state, "west/ctl0", False)
    asyncio.run(k.run(30 * S))
    assert k.actor("a").state == DOWN  # type: ignore[union-attr]
    k.set_host_state("west/ctl0", True)  # back with its host, as any actor
    asyncio.run(k.run(31 * S))
    assert k.is_up("a")
