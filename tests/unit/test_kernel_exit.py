"""kernel: an actor that exits; one of a kind spawned by the thousand is forgotten, not kept."""

from __future__ import annotations

import asyncio

import msgspec

from emulator.actor import Actor, on
from emulator.kernel import DOWN, EXITED, Kernel
from emulator.units import S
from tests.support.harness import make_kernel, record, spawn


class Note(msgspec.Struct, frozen=True, tag=True):
    n: int


class Leaver(Actor):
    """Leaves a timer behind, exits on its first message, and counts what it handled."""

    kind = "test-leaver"

    async def on_start(self) -> None:
        self.handled = 0
        self.set_timer(5 * S, Note(0))

    @on(Note)
    def note(self, msg: Note) -> None:
        self.handled += 1
        self.exit()


class Forgotten(Leaver):
    kind = "test-forgotten"
    forget_on_exit = True


class Sender(Actor):
    kind = "test-sender"

    async def on_start(self) -> None:
        for i in range(1, 4):
            self.set_timer(i * S, Note(i))

    @on(Note)
    def note(self, msg: Note) -> None:
        self.send("leaver", msg)


def _run(cls: type[Leaver]) -> tuple[Kernel, list[tuple[int, str, str, str]]]:
    k = make_kernel()
    events = record(k, "deliver", "drop", "timer", "exit", "crash", "restart")
    spawn(k, cls, "leaver", "west/ctl0")
    spawn(k, Sender, "sender", "east/ctl0")
    # The leaver's host fails after it exited: nothing of it may come back.
    k.at(7 * S, k.set_host_state, "west/ctl0", False)
    k.at(8 * S, k.set_host_state, "west/ctl0", True)
    asyncio.run(k.run(10 * S))
    seen = [(e.t_us, e.kind, e.dst, e.type) for e in events if e.dst != "sender"]
    return k, seen


def test_a_forgotten_actor_leaves_the_same_trace_as_a_kept_one() -> None:
    kept, kept_trace = _run(Leaver)
    forgot, forgot_trace = _run(Forgotten)
    assert forgot_trace == kept_trace
    # After the exit, notes and the left-over timer still reach the address and are dropped.
    kinds = [kind for _, kind, dst, _ in forgot_trace if dst == "leaver"]
    assert kinds.count("exit") == 1 and "restart" not in kinds
    assert kinds.count("drop") >= 2
    assert forgot.tracer.hexdigest() == kept.tracer.hexdigest()


def test_a_forgotten_actor_lets_its_instance_go_and_a_kept_one_does_not() -> None:
    kept, _ = _run(Leaver)
    forgot, _ = _run(Forgotten)
    assert kept.actor("leaver").state == EXITED  # type: ignore[union-attr]
    assert forgot.actor("leaver").state == EXITED  # type: ignore[union-attr]
    assert kept.instance("leaver").handled == 1  # type: ignore[union-attr]
    assert forgot.instance("leaver") is None
    assert not forgot.actor("leaver").mailbox  # type: ignore[union-attr]


def test_a_forgotten_actor_started_again_is_on_its_host_and_may_exit_again() -> None:
    k, _ = _run(Forgotten)  # exited at 1 s
    k.restart("leaver")  # as a `restart` fault, or the final heal, does
    asyncio.run(k.run(11 * S))
    slot = k.actor("leaver")
    assert slot is not None and slot.state not in (DOWN, EXITED)
    k.set_host_state("west/ctl0", False)  # a live actor on a failed host crashes
    assert slot.state == DOWN
    k.set_host_state("west/ctl0", True)
    asyncio.run(k.run(30 * S))  # back with its host; its own timer ends it again
    assert slot.state == EXITED and k.instance("leaver") is None
