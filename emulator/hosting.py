"""What the kernel and an actor know of each other.

The kernel (`emulator.kernel`) drives actor coroutines, and an actor
(`emulator.actor`) asks the kernel for everything it does: sending, timers,
bulk flows, the trace. Each side sees the other only through this module, so
neither imports the other:

- `ActorSlot`: the kernel's record of one actor address across incarnations.
  An actor keeps its own and hands it back with every request, so the kernel
  never looks an actor up by address on the hot path.
- `Hosted`: what the kernel needs of an actor instance.
- `KernelPort`: what an actor may ask of the kernel.

What must stay true: only the kernel writes a slot's fields; an actor reads
`address`, `host` and `incarnation` of its own slot and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Protocol

from emulator.commands import Envelope
from emulator.mailbox import Mailbox
from emulator.rng import RngStreams

# Why a run stopped when its emulated system ended it (`Actor.end_run`): its work is done.
WORK_DONE = "work done"

# Actor states (`ActorSlot.state`).
DOWN, RUNNING, WAIT_RECV, WAIT_SLEEP, WAIT_STORE, EXITED = range(6)


class Hosted(Protocol):
    """What the kernel needs of an actor instance (`emulator.actor.Actor` implements it)."""

    # False for actors whose work is meaningless after their host failed: they
    # stay down when it comes back.
    restart_on_host_up: ClassVar[bool]
    # True for actors nobody looks at once they exit and of which a run spawns
    # tens of thousands (a job's agent): the kernel drops the instance then.
    forget_on_exit: ClassVar[bool]

    def attach(self, kernel: KernelPort, slot: ActorSlot) -> Coroutine[Any, Any, None]:
        """Bind this fresh instance to its kernel and slot; return the coroutine to drive."""
        ...

    def on_stop(self) -> None:
        """The run ended normally (not a crash). Must not await."""
        ...


class ActorSlot:
    """The kernel's record of one actor address across incarnations."""

    __slots__ = (
        "address",
        "awaiting_host",
        "coro",
        "corr_seq",
        "factory",
        "host",
        "id",
        "incarnation",
        "instance",
        "mailbox",
        "overflow",
        "paused_until_us",
        "restarts",
        "seq",
        "state",
        "timer_seq",
        "timers",
        "wait_reply",
        "wait_token",
    )

    def __init__(self, sid: int, address: str, host: str, factory: Callable[[], Hosted]) -> None:
        self.id = sid
        self.address = address
        self.host = host
        self.factory = factory
        self.instance: Hosted | None = None
        self.coro: Any = None
        self.state = DOWN
        self.mailbox = Mailbox()
        self.seq = 0
        self.incarnation = 0
        self.timers: set[int] = set()
        self.timer_seq = 0
        self.corr_seq = 0
        self.wait_reply: int | frozenset[int] = 0
        self.wait_token = 0
        self.paused_until_us = 0
        self.restarts = 0
        self.overflow = 0
        self.awaiting_host = False


class KernelPort(Protocol):
    """What an actor may ask of the kernel (`emulator.kernel.Kernel` implements it).

    Requests that act for an actor take its slot; the kernel trusts it to be
    the caller's own.
    """

    now_us: int
    rng: RngStreams
    # The seeded protocol bugs this run enables (`emulator/bugs.py`): usually none.
    bugs: frozenset[str]

    def send(self, src: ActorSlot, dst: str, msg: Any, corr: int, reply_to: int) -> None: ...

    def next_corr(self, slot: ActorSlot) -> int: ...

    def leader_of(self, role: str) -> str | None: ...

    def names_actor(self, name: str) -> bool: ...

    def trace_drop(self, env: Envelope, reason: str) -> None: ...

    def end_run(self) -> None: ...

    def set_timer(self, slot: ActorSlot, delay_us: int, msg: Any, last: bool = False) -> int: ...

    def cancel_timer(self, slot: ActorSlot, timer_id: int) -> None: ...

    def start_flow(
        self, slot: ActorSlot, src_region: str, dst_region: str, nbytes: int, qos: str = "default"
    ) -> int: ...

    def cancel_flow(self, slot: ActorSlot, flow_id: int) -> int: ...

    def set_flow_rate_cap(self, flow_id: int, cap_bps: float | None) -> None: ...

    def wan_capacity_bps(self, src_region: str, dst_region: str) -> float: ...

    def flow_progress(self, flow_id: int) -> tuple[int, int]: ...

    def replay_hardware(self, address: str) -> int: ...

    def spawn(
        self,
        address: str,
        host: str,
        factory: Callable[[], Hosted],
        at_us: int = 0,
        incarnation: int = 0,
    ) -> ActorSlot: ...

    def trace_event(self, kind: str, src: str, dst: str, type_: str, payload: Any) -> int: ...

    def metric(self, name: str, value: float, labels: dict[str, Any] | None = None) -> None: ...
