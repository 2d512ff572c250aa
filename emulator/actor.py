"""The actor base class: an address, a mailbox, handlers chosen by message type.

An actor is driven by the kernel (see `kernel.py`): its main coroutine receives
one message at a time and runs the handler registered for the message's type.
Handlers may be plain functions or coroutines; a coroutine handler may await
only kernel commands: `self.call`, `self.sleep`, `self.store`. Everything in
`self` is memory and is lost when the actor crashes; what must survive goes to
the store, and `on_start` rebuilds from it.
"""

from __future__ import annotations

import inspect
import random
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ClassVar, TypeVar

import msgspec

from emulator.bugs import BUGS
from emulator.commands import RECEIVE_ANY, TIMED_OUT, Envelope, Receive, Sleep, StoreCall
from emulator.errors import CallTimeout, EmulatorInternalError
from emulator.hosting import ActorSlot, KernelPort
from emulator.sysmsg import Delivered, Reliable, Resend

T = TypeVar("T")

# At-least-once delivery (`send_reliably`): a message is resent after
# RESEND_US, then after twice as long each time up to RESEND_BACKOFF_MAX_US;
# one to an actor's address is given up after RESENDS_MAX resends, one to a
# role never (a role comes back, and a report lost then was lost for good:
# explore found a workload's end given up on two minutes before its region's
# GMS came back). The backoff matters at scale: a busy
# receiver (a GMS inside a long pass) with thousands of unacknowledged reports
# resent every 5 s had its mailbox flooded past its bound. How many message
# keys a receiver remembers to drop duplicates.
RESEND_US = 5_000_000
RESEND_BACKOFF_MAX_US = 20_000_000
RESENDS_MAX = 200
SEEN_KEYS_MAX = 100_000
_PLUMBING = frozenset({Reliable, Delivered, Resend})


def _outbox_order(key: str) -> int:
    return int(key.rsplit(".", 1)[1])


Handler = Callable[[Any, Any], Any]


def on(*msg_types: type) -> Callable[[Handler], Handler]:
    """Mark a method as the handler of the given message types."""

    def mark(fn: Handler) -> Handler:
        fn.__handles__ = msg_types  # type: ignore[attr-defined]
        return fn

    return mark


def _refuse_shadowed_state(cls: type) -> None:
    """A method may not take the name of a base class's state, nor state a method's.

    The base keeps using the name for what it was: a method named like a
    base's flag turns `if self.flag` true and `self.flag = True` into a
    replaced method (a cluster scheduler's `_started` once did so to its
    lease holder's flag, and crashed at its first handler).
    """
    for name, value in vars(cls).items():
        if name.startswith("__"):
            continue
        for base in cls.__mro__[1:]:
            if name not in vars(base):
                continue
            inherited = vars(base)[name]
            if inspect.isfunction(value) != inspect.isfunction(inherited):
                what = "a method" if inspect.isfunction(value) else "state"
                raise TypeError(
                    f"{cls.__name__}.{name} is {what} where {base.__name__} "
                    f"has {'state' if inspect.isfunction(value) else 'a method'}: rename it"
                )
            break


class Actor:
    """Base class of every emulated component.

    Subclasses set `kind`, optionally `Params` (a msgspec Struct validated from
    the scenario), and define handlers with `@on(MsgType)`.
    """

    kind: ClassVar[str] = "actor"
    Params: ClassVar[type[msgspec.Struct] | None] = None
    # False for actors whose work is meaningless after their host failed
    # (a job's agent: its cluster manager re-places the job instead).
    restart_on_host_up: ClassVar[bool] = True
    # True for actors spawned by the thousand whose state nobody reads after
    # they exit (a job's agent): the kernel lets the instance go (`Kernel._exited`).
    forget_on_exit: ClassVar[bool] = False
    # A process its host supervises (a job's task): killed while its host stays up
    # and not told when to come back (a crash fault without `restart_after`), it
    # is started again this long after, as a host's supervisor restarts a task
    # that died. Its restart reports what was lost (a job's agent: its attempt).
    # None: only a fault's `restart_after` or the final heal starts it again.
    supervised_restart_us: ClassVar[int | None] = None
    _handlers: ClassVar[dict[type, tuple[Handler, bool]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _refuse_shadowed_state(cls)
        # Handlers are found by name on the final class, so a subclass that
        # overrides a handler method keeps its message types without re-marking it.
        names: dict[type, str] = {}
        for base in reversed(cls.__mro__):
            for name, value in vars(base).items():
                for msg_type in getattr(value, "__handles__", ()):
                    names[msg_type] = name
        handlers: dict[type, tuple[Handler, bool]] = {}
        for msg_type, name in names.items():
            fn = getattr(cls, name)
            asynchronous = inspect.iscoroutinefunction(fn)
            if not asynchronous and any(
                inspect.iscoroutinefunction(vars(base).get(name)) for base in cls.__mro__[1:]
            ):
                # Its call of the base handler would make a coroutine nobody awaits:
                # the message would be dropped without a word.
                raise TypeError(
                    f"{cls.__qualname__}.{name} overrides an async handler with a plain "
                    "function: make it `async def` and await the base handler"
                )
            handlers[msg_type] = (fn, asynchronous)
        cls._handlers = handlers

    def __init__(self, address: str, params: Any = None) -> None:
        self.address = address
        self.params = params
        self.envelope: Envelope | None = None
        self._exiting = False
        # key -> (destination, message, resends so far, when the next is due)
        self._outbox: dict[str, tuple[str, Any, int, int]] = {}
        self._outbox_seq = 0
        self._resend_armed = False
        self._seen: set[str] = set()
        self._seen_order: deque[str] = deque()
        # Set by `attach` when the kernel starts this instance.
        self._kernel: KernelPort
        self._slot: ActorSlot

    # ---- lifecycle hooks -------------------------------------------------
    async def on_start(self) -> None:
        """Called on the first start and after every restart: rebuild from the store."""

    def on_stop(self) -> None:
        """Called when the run ends normally (not on a crash). Must not await."""

    def on_unhandled(self, env: Envelope) -> None:
        self._kernel.trace_drop(env, "unhandled")

    def refuse_reliable(self, env: Envelope) -> str | None:
        """Whether to leave a message sent with `send_reliably` unhandled for now.

        Return a reason (traced as the message's drop) to neither acknowledge
        nor handle it: its sender resends it, resolving its destination
        again. None, the default, acknowledges and handles it (once). A role's
        follower refuses, so reports reach the leader (`LeaseHolder`).
        """
        return None

    # ---- the driver the kernel runs ------------------------------------
    def attach(self, kernel: KernelPort, slot: ActorSlot) -> Coroutine[Any, Any, None]:
        """Bind this fresh instance to its kernel and slot; return the coroutine to drive.

        Called by the kernel alone, once per instance, when it starts (or
        restarts) the actor; a crash discards the instance with its memory.
        """
        self._kernel = kernel
        self._slot = slot
        return self._main()

    async def _main(self) -> None:
        await self.on_start()
        handlers = self._handlers
        while not self._exiting:
            env: Envelope = await RECEIVE_ANY
            msg = env.msg
            kind = type(msg)
            if kind in _PLUMBING:
                msg = self._plumbing(env)
                if msg is None:
                    continue
                kind = type(msg)
            entry = handlers.get(kind)
            if entry is None:
                self.on_unhandled(env)
                continue
            self.envelope = env
            if entry[1]:
                await entry[0](self, msg)
            else:
                entry[0](self, msg)

    def _plumbing(self, env: Envelope) -> Any:
        """Reliable delivery's own messages; returns a message to handle, or None."""
        msg = env.msg
        if type(msg) is Reliable:
            refusal = self.refuse_reliable(env)
            if refusal is not None:
                self._kernel.trace_drop(env, refusal)
                return None
            self._kernel.send(self._slot, env.src, Delivered(msg.key), 0, 0)
            if msg.key in self._seen:
                return None
            self._seen.add(msg.key)
            self._seen_order.append(msg.key)
            if len(self._seen_order) > SEEN_KEYS_MAX:
                self._seen.discard(self._seen_order.popleft())
            return msg.msg
        if type(msg) is Delivered:
            self._outbox.pop(msg.key, None)
        elif type(msg) is Resend:
            self._resend_armed = False
            self._resend()
        return None

    # ---- what actors use -------------------------------------------------
    @property
    def now_us(self) -> int:
        return self._kernel.now_us

    @property
    def host(self) -> str:
        return self._slot.host

    def send(self, dst: str, msg: Any) -> None:
        """Send `msg` to an actor or role address; delivery is not guaranteed."""
        self._kernel.send(self._slot, dst, msg, 0, 0)

    def reply(self, msg: Any, to: Envelope | None = None) -> None:
        """Answer the request being handled (or `to`) so its `call` returns `msg`."""
        env = to or self.envelope
        if env is None:
            raise RuntimeError("reply() outside a handler")
        self._kernel.send(self._slot, env.src, msg, 0, env.corr)

    def send_reliably(self, dst: str, msg: Any) -> None:
        """Send `msg` at least once: resent every `RESEND_US` until acknowledged.

        `dst` is resolved at every attempt, so after a failover the new leader
        of a role gets it; the receiver handles it once (duplicates are
        acknowledged and dropped). Gives up, traced, after `RESENDS_MAX` if
        `dst` is an actor's address; to a role, resent as long as this actor lives.
        """
        self._outbox_seq += 1
        key = f"{self.address}#{self._slot.incarnation}.{self._outbox_seq}"
        self._outbox[key] = (dst, msg, 0, self.now_us + RESEND_US)
        self._kernel.send(self._slot, dst, Reliable(key, msg), 0, 0)
        self._arm_resend()

    @property
    def unacknowledged(self) -> int:
        """Messages sent with `send_reliably` not yet acknowledged (nor given up on)."""
        return len(self._outbox)

    def _arm_resend(self) -> None:
        if self._outbox and not self._resend_armed:
            self._resend_armed = True
            self.set_timer(RESEND_US, Resend())

    def _resend(self) -> None:
        now = self.now_us
        for key in sorted(self._outbox, key=_outbox_order):
            dst, msg, tries, due_us = self._outbox[key]
            if due_us > now:
                continue
            if tries >= RESENDS_MAX and self._kernel.names_actor(dst):
                del self._outbox[key]
                self.decision("reliable.gave-up", {"to": dst, "key": key})
                continue
            # The count stops at the limit (a role's message is resent on for good), and so
            # does the doubling: the wait is at its maximum after a few of them anyway.
            tries = min(tries + 1, RESENDS_MAX)
            wait_us = min(RESEND_US << min(tries, 16), RESEND_BACKOFF_MAX_US)
            self._outbox[key] = (dst, msg, tries, now + wait_us)
            self._kernel.send(self._slot, dst, Reliable(key, msg), 0, 0)
        self._arm_resend()

    async def call(self, dst: str, msg: Any, timeout_us: int) -> Any:
        """Send a request and wait for its reply; raise `CallTimeout` after `timeout_us`.

        Other messages arriving meanwhile wait in the mailbox.
        """
        corr = self._kernel.next_corr(self._slot)
        self._kernel.send(self._slot, dst, msg, corr, 0)
        env = await Receive(reply_to=corr, timeout_us=timeout_us)
        if env is TIMED_OUT:
            raise CallTimeout(f"{self.address}: no reply from {dst} to {type(msg).__name__}")
        return env.msg

    async def gather(self, requests: list[tuple[str, Any]], timeout_us: int) -> list[Any]:
        """Send several requests at once; wait until all replied or `timeout_us` passed.

        Returns the replies in request order, None where none came in time (a
        late reply then reaches this actor's handlers as an ordinary message).
        """
        corrs = []
        for dst, msg in requests:
            corr = self._kernel.next_corr(self._slot)
            self._kernel.send(self._slot, dst, msg, corr, 0)
            corrs.append(corr)
        replies: dict[int, Any] = {}
        pending = set(corrs)
        deadline = self.now_us + timeout_us
        while pending and self.now_us < deadline:
            env = await Receive(reply_to=frozenset(pending), timeout_us=deadline - self.now_us)
            if env is TIMED_OUT:
                break
            replies[env.reply_to] = env.msg
            pending.discard(env.reply_to)
        return [replies.get(c) for c in corrs]

    async def sleep(self, delay_us: int) -> None:
        await Sleep(delay_us)

    async def store(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run a store repository function `fn(store, *args)` with time frozen.

        Under a `slow-store` fault the call still takes effect at once, but
        the answer comes back only after the fault's latency.
        """
        return await StoreCall(fn, args)

    def set_timer(self, delay_us: int, msg: Any, *, last: bool = False) -> int:
        """Deliver `msg` to this actor after `delay_us`; returns an id for `cancel_timer`.

        With `last`, it fires after every other event due at that instant
        (those they cause at that instant included), e.g. to decide once on
        everything that happened at one instant.
        """
        return self._kernel.set_timer(self._slot, delay_us, msg, last)

    def cancel_timer(self, timer_id: int) -> None:
        """Cancel a timer `set_timer` returned; its message never arrives (a no-op if it did)."""
        self._kernel.cancel_timer(self._slot, timer_id)

    def start_flow(
        self, src_region: str, dst_region: str, nbytes: int, qos: str = "default"
    ) -> int:
        """Start a WAN bulk transfer; `FlowDone(flow_id)` arrives when its last byte does.

        The flow shares links max-min fairly with others, pauses while its
        regions are partitioned, and is cancelled if this actor crashes.
        """
        return self._kernel.start_flow(self._slot, src_region, dst_region, nbytes, qos)

    def cancel_flow(self, flow_id: int) -> int:
        """Stop a flow; returns the bytes that had arrived."""
        return self._kernel.cancel_flow(self._slot, flow_id)

    def set_flow_rate_cap(self, flow_id: int, cap_bps: float | None) -> None:
        """Pace one of this actor's flows (None: no cap; 0 holds it still)."""
        self._kernel.set_flow_rate_cap(flow_id, cap_bps)

    def wan_capacity_bps(self, src_region: str, dst_region: str) -> float:
        """Bytes/s a lone flow could get from `src_region` to `dst_region` now (0: cut off)."""
        return self._kernel.wan_capacity_bps(src_region, dst_region)

    def flow_progress(self, flow_id: int) -> tuple[int, int]:
        """(bytes arrived, total bytes) of an active flow."""
        return self._kernel.flow_progress(flow_id)

    def rng(self, *name: str) -> random.Random:
        """This actor's named random stream (survives crashes: it is the world's)."""
        return self._kernel.rng.stream("actor", self.address, *name)

    def decision(self, type_: str, payload: Any) -> None:
        """Record a decision (bid, award, leadership...) in the trace."""
        self._kernel.trace_event("decision", self.address, "", type_, payload)

    def spawn(self, address: str, host: str, cls: type[Actor], params: Any = None) -> None:
        """Start a new actor now (e.g. a job's agent on the job's first machine)."""
        self._kernel.spawn(address, host, lambda: cls(address, params), at_us=self.now_us)

    def end_run(self) -> None:
        """The emulated system's work is done: end the run once this instant is over.

        For a system whose build says `ends_when_done` (a cluster trace: when
        its last job ended); a run that reaches its end before is cut short.
        """
        self._kernel.end_run()

    def exit(self) -> None:
        """End this actor for good once the current handler returns (no restart)."""
        self._exiting = True

    @property
    def restarted(self) -> bool:
        """True in every incarnation after the first (a restart after a crash)."""
        return self._slot.incarnation > 0

    def metric(self, name: str, value: float, **labels: Any) -> None:
        """Record a metric sample (reports plot these over emulated time)."""
        self._kernel.metric(name, value, labels)

    def leader_of(self, role: str) -> str | None:
        return self._kernel.leader_of(role)

    def bug(self, name: str) -> bool:
        """Whether this run enables the seeded protocol bug `name` (emulator/bugs.py).

        An actor does the wrong thing only where this is true, next to the
        right thing; with no bug enabled (every ordinary run) it is always
        False. A name the catalogue does not know is our own mistake.
        """
        bugs = self._kernel.bugs
        if not bugs:
            return False
        if name not in BUGS:
            raise EmulatorInternalError(f"{self.address}: asks for unregistered bug {name!r}")
        return name in bugs

    def replay_hardware(self) -> int:
        """Be told again the state of every node that changed (hardware watchers only).

        The kernel does this whenever a watcher starts; an instance that
        ignored hardware news as a follower calls it on taking over its role.
        Returns the number of `HostUp`/`HostDown` messages posted (0 for a
        non-watcher).
        """
        return self._kernel.replay_hardware(self.address)


def actor_kinds() -> set[str]:
    """The kind of every Actor class loaded: scenarios' and those a system spawns itself."""
    kinds: set[str] = set()
    todo: list[type[Actor]] = [Actor]
    while todo:
        for sub in todo.pop().__subclasses__():
            kinds.add(sub.kind)
            todo.append(sub)
    return kinds
