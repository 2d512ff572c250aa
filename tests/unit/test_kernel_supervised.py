"""A crash fault with no restart: an actor its host supervises comes back after its delay.

The fault injector asks the kernel how long the actor's host takes to
restart it (`Kernel.supervised_restart_us`) and restarts it then, closing the
crash window as a fault's own `restart_after` would.
"""

from __future__ import annotations

import asyncio

from emulator.actor import Actor
from emulator.kernel import DOWN, Kernel
from emulator.run.faults import FaultInjector
from emulator.run.scenario import CrashFault
from emulator.units import S
from tests.support.harness import make_kernel, record, spawn


class Plain(Actor):
    kind = "test-plain"


class Task(Actor):
    kind = "test-task"
    supervised_restart_us = 5 * S


def _crash_fault(
    cls: type[Actor], restart_after_us: int | None
) -> tuple[Kernel, FaultInjector, list[int]]:
    k = make_kernel()
    events = record(k, "restart")
    spawn(k, cls, "a", "west/ctl0")
    injector = FaultInjector(k)
    injector.schedule([CrashFault(at=1 * S, target="a", restart_after=restart_after_us)])
    asyncio.run(k.run(60 * S))
    return k, injector, [e.t_us for e in events if e.dst == "a"]


def test_the_kernel_tells_how_long_a_host_takes_to_restart_an_actor() -> None:
    k = make_kernel()
    spawn(k, Task, "task", "west/ctl0")
    spawn(k, Plain, "plain", "west/ctl0")
    asyncio.run(k.run(0))  # started: the kind of a live actor is known
    assert k.supervised_restart_us("task") == 5 * S
    assert k.supervised_restart_us("plain") is None
    assert k.supervised_restart_us("nobody") is None


def test_a_supervised_actor_killed_for_good_is_restarted_after_its_delay() -> None:
    _, injector, restarts = _crash_fault(Task, None)
    assert restarts == [6 * S]
    assert injector.windows == [(1 * S, 6 * S, "crash a")]  # the window ends as it comes back


def test_a_restart_the_fault_names_wins_over_the_supervisor() -> None:
    _, injector, restarts = _crash_fault(Task, 20 * S)
    assert restarts == [21 * S] and injector.windows == [(1 * S, 21 * S, "crash a")]


def test_an_unsupervised_actor_killed_for_good_stays_down() -> None:
    k, injector, restarts = _crash_fault(Plain, None)
    assert restarts == [] and k.actor("a").state == DOWN  # type: ignore[union-attr]
    assert injector.windows == [(1 * S, None, "crash a")]
