"""The trampoline kernel: one asyncio task drives every actor coroutine.

Why a trampoline (docs/kernel-notes.md): time taken from the event loop jumps
while aiosqlite works in its thread, and thread completion order leaks into
the trace whenever two actors can run at one instant. So the kernel pops one
event at a time from a heap ordered by `(deliver_at_us, sender_id,
sender_seq)`, resumes exactly one actor with `coro.send(...)`, and runs it
until it parks on a kernel command. A store call is awaited here, on the real
loop, while emulated time stands still and no other actor runs.

Heap entries are `(t_us, sender_id, sender_seq, code, a, b)`; the first three
are unique, so tuple comparison never reaches the payload. Sender id 0 is the
kernel itself (starts, faults, flow completions). A timer set with `last`
carries sender id `LAST_ID`, above every actor's, so it fires only once every
other event of its instant has been handled, those that they cause at that
instant included (a scheduler deciding once the instant's reports are in).

Two collaborators own state of their own and reach the kernel only through
the narrow interfaces they declare: `emulator.net.flow_table.FlowTable` (bulk
flows) and `emulator.net.hardware.Hardware` (nodes down and up). The kernel
keeps a thin method for each of their operations that actors and faults use.
Actors are seen through `emulator.hosting` (`Hosted`, `ActorSlot`), so this
module never imports `emulator.actor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from emulator.commands import TIMED_OUT, Envelope, Receive, Sleep, StoreCall
from emulator.errors import EmulatorInternalError, ForeignAwait
from emulator.hosting import (
    DOWN,
    EXITED,
    RUNNING,
    WAIT_RECV,
    WAIT_SLEEP,
    WAIT_STORE,
    WORK_DONE,
    ActorSlot,
    Hosted,
)
from emulator.net.flow_table import FlowTable
from emulator.net.hardware import Hardware
from emulator.net.network import Network
from emulator.pacing import Pacer
from emulator.rng import RngStreams
from emulator.sysmsg import Reliable
from emulator.trace import Tracer

# Event codes in heap entries.
DELIVER, TIMER, WAKE, CALL = 0, 1, 2, 3

KERNEL_ID = 0
LAST_ID = 1 << 62  # sender id of `last` timers: after every event of their instant


def _type_name(msg: Any) -> str:
    """A message's name in the trace; a reliable message is named by what it carries."""
    if type(msg) is Reliable:
        return type(msg.msg).__name__
    return type(msg).__name__


def _in_set(reply_to: int, wanted: int | frozenset[int]) -> bool:
    return type(wanted) is frozenset and reply_to in wanted


def _close(coro: Any) -> None:
    """Close an actor coroutine at the command it is parked on."""
    # RuntimeError: the actor swallowed GeneratorExit and awaited again; it is gone anyway.
    with contextlib.suppress(RuntimeError):
        coro.close()


class ActorError(NamedTuple):
    """An actor died on an exception of its own: where in the trace, who, what."""

    seq: int
    t_us: int
    address: str
    error: str  # the exception's type name
    message: str

    def describe(self) -> str:
        return f"{self.address}: {self.error}: {self.message}"


class KernelOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Knobs of the kernel itself (limits have units and qualifiers last)."""

    yield_every_events: int = 2_000
    restart_delay_us: int = 1_000_000
    restarts_max: int = 1_000
    mailbox_len_max: int = 100_000
    stop_on_violation: bool = False
    # Seeded protocol bugs the run enables (`emulator/bugs.py`); actors ask `Actor.bug`.
    bugs: frozenset[str] = frozenset()


class Kernel:
    """Owns emulated time, the event heap, actors, the network and the trace."""

    def __init__(
        self,
        *,
        seed: int,
        network: Network,
        rng: RngStreams | None = None,
        tracer: Tracer,
        store: Any = None,
        options: KernelOptions | None = None,
        pacer: Pacer | None = None,
        metrics: Any = None,
    ) -> None:
        self.seed = seed
        self.rng = rng if rng is not None else RngStreams(seed)
        self.network = network
        self.tracer = tracer
        self.store = store
        self.options = options or KernelOptions()
        self._mailbox_max = self.options.mailbox_len_max
        self.bugs = self.options.bugs
        self.pacer = pacer
        self.metrics = metrics  # a store.trace.MetricWriter, or None to discard samples
        self.now_us = 0
        self.events = 0
        self.deliveries = 0
        self.drops = 0
        self.crashes = 0
        self.violations: list[tuple[int, int, str, str]] = []
        # Actors that died on an exception of their own, in order (`_actor_error`).
        self.actor_errors: list[ActorError] = []
        self.stop_reason: str | None = None
        # The system ends the run itself once its work is done (`end_run`,
        # `SystemBuild.ends_when_done`); reaching the run's end first cuts it short.
        self.ends_when_done = False
        self.progress: Callable[[Kernel], None] | None = None
        self._heap: list[tuple[Any, ...]] = []
        self._seq = 0
        self._actors: dict[str, ActorSlot] = {}
        self._by_host: dict[str, list[ActorSlot]] = {}
        self._store_pending: tuple[ActorSlot, StoreCall] | None = None
        # Extra emulated latency of each slowed actor's store calls (the `slow-store` fault).
        self.store_latency_us: dict[str, int] = {}
        self._lease_view = getattr(store, "leases", None)
        self.flows = FlowTable(network.fluid, self)
        self.hardware = Hardware(network, self, self.flows)

    # ------------------------------------------------------------------
    # scheduling
    def _kernel_seq(self) -> int:
        self._seq += 1
        return self._seq

    def at(self, t_us: int, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` as a kernel event at emulated time `t_us`."""
        if t_us < self.now_us:
            raise EmulatorInternalError(f"event scheduled in the past: {t_us} < {self.now_us}")
        self._seq += 1
        heapq.heappush(self._heap, (t_us, KERNEL_ID, self._seq, CALL, fn, args))

    def _stopping(self) -> bool:
        return self.stop_reason is not None

    def request_stop(self, reason: str) -> None:
        """Stop at the next event boundary (Ctrl-C, a violation with stop_on_violation)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    def end_run(self) -> None:
        """The emulated system's work is done: stop once every event of this instant has run."""
        heapq.heappush(
            self._heap,
            (self.now_us, LAST_ID, self._kernel_seq(), CALL, self.request_stop, (WORK_DONE,)),
        )

    @property
    def cut_short(self) -> bool:
        """The run ended before a system that ends it when done (`ends_when_done`) did."""
        return self.ends_when_done and self.stop_reason != WORK_DONE

    # ------------------------------------------------------------------
    # actors
    def spawn(
        self,
        address: str,
        host: str,
        factory: Callable[[], Hosted],
        at_us: int = 0,
        incarnation: int = 0,
    ) -> ActorSlot:
        """Register an actor; it starts at `at_us`. Ids follow spawn order.

        `incarnation` > 0 starts it as restarted (`mastemu resume`: it lived
        and crashed in the process that was killed).
        """
        if address in self._actors:
            raise EmulatorInternalError(f"duplicate actor address {address!r}")
        if not self.network.has_host(host):
            raise EmulatorInternalError(f"actor {address!r} on unknown host {host!r}")
        slot = ActorSlot(len(self._actors) + 1, address, host, factory)
        slot.incarnation = incarnation
        self._actors[address] = slot
        self._by_host.setdefault(host, []).append(slot)
        self.at(at_us, self._start, slot, incarnation > 0)
        return slot

    def actor(self, address: str) -> ActorSlot | None:
        return self._actors.get(address)

    def addresses(self) -> list[str]:
        return sorted(self._actors)

    def instance(self, address: str) -> Hosted | None:
        slot = self._actors.get(address)
        return slot.instance if slot else None

    def is_down(self, address: str) -> bool:
        """Crashed and not restarted yet (an actor that exited is not down)."""
        slot = self._actors.get(address)
        return slot is not None and slot.state == DOWN

    def is_up(self, address: str) -> bool:
        slot = self._actors.get(address)
        return slot is not None and slot.state not in (DOWN, EXITED)

    def _start(self, slot: ActorSlot, restart: bool) -> None:
        if slot.state not in (DOWN, EXITED):
            return
        if not self.network.host_up(slot.host):
            slot.awaiting_host = True
            self.tracer.record(self.now_us, "restart-deferred", "", slot.address, "", slot.host)
            return
        slot.awaiting_host = False
        if slot.state == EXITED and slot.instance is None:
            # A forgotten actor started again (a `restart` fault): on its host again.
            self._by_host[slot.host].append(slot)
        inst = slot.factory()
        slot.instance = inst
        slot.coro = inst.attach(self, slot)
        slot.state = RUNNING
        self.tracer.record(
            self.now_us, "restart" if restart else "start", "", slot.address, "", slot.incarnation
        )
        self._step(slot, None)
        if slot.state not in (DOWN, EXITED):
            self.replay_hardware(slot.address)

    def crash(self, address: str, reason: str, restart_after_us: int | None = None) -> bool:
        """Crash an actor at its current kernel command; optionally restart it later."""
        slot = self._actors.get(address)
        if slot is None:
            raise EmulatorInternalError(f"crash of unknown actor {address!r}")
        return self._crash(slot, reason, restart_after_us)

    def supervised_restart_us(self, address: str) -> int | None:
        """How long after its process alone dies its host restarts the actor (None: never).

        Its kind's `Actor.supervised_restart_us`; a crash fault without a
        `restart_after` uses it (the host is up: a process died, not a machine).
        """
        inst = self.instance(address)
        return None if inst is None else type(inst).supervised_restart_us

    def restart(self, address: str) -> None:
        slot = self._actors[address]
        if slot.state in (DOWN, EXITED):
            self.at(self.now_us, self._start, slot, True)

    def _crash(self, slot: ActorSlot, reason: str, restart_after_us: int | None) -> bool:
        if slot.state == DOWN:
            return False
        coro = slot.coro
        if coro is not None:
            _close(coro)
        slot.coro = None
        slot.instance = None
        slot.state = DOWN
        slot.mailbox.clear()
        slot.timers.clear()
        slot.incarnation += 1
        slot.wait_token += 1
        slot.paused_until_us = 0
        self.flows.cancel_all(slot.address)
        self.crashes += 1
        self.tracer.record(self.now_us, "crash", "", slot.address, "", reason)
        if restart_after_us is not None:
            self.at(self.now_us + restart_after_us, self._start, slot, True)
        return True

    def _crashed_by_error(self, slot: ActorSlot, exc: BaseException) -> None:
        # Only the type and message go into the trace: a traceback holds file
        # paths and memory addresses that differ between machines.
        reason = f"{type(exc).__name__}: {exc}"
        self._actor_error(slot.address, exc)
        slot.coro = None  # already finished by the exception
        slot.restarts += 1
        if slot.restarts > self.options.restarts_max:
            self._crash(slot, reason + " (restart limit reached)", None)
            # Structured, so that `resume` knows without reading the reason's text.
            self.tracer.record(self.now_us, "gave-up", "", slot.address, "", slot.restarts)
        else:
            self._crash(slot, reason, self.options.restart_delay_us)

    def _actor_error(self, address: str, exc: BaseException) -> None:
        """An actor died on an exception of its own: a bug, which fails the run (design §11).

        Traced as its own event (`actor-error`, with the exception's type and
        message as fields) before the crash it causes, so a run, `check` and
        `resume` all find it without reading a crash reason's text.
        """
        name, message = type(exc).__name__, str(exc)
        fields = {"error": name, "message": message}
        seq = self.tracer.record(self.now_us, "actor-error", "", address, name, fields)
        self.actor_errors.append(ActorError(seq, self.now_us, address, name, message))

    def _exited(self, slot: ActorSlot) -> None:
        slot.state = EXITED
        slot.coro = None
        self.tracer.record(self.now_us, "exit", "", slot.address, "", None)
        if slot.instance is not None and type(slot.instance).forget_on_exit:
            # The slot stays, so that messages and timers still due reach an
            # exited actor (and are traced as before); its instance and host
            # entry go, or a week of job agents would stay in memory.
            slot.instance = None
            slot.mailbox.clear()
            self._by_host[slot.host].remove(slot)

    def pause(self, address: str, duration_us: int) -> None:
        """Freeze an actor (a GC pause, a stopped VM): it handles nothing until the end."""
        slot = self._actors[address]
        if slot.state == DOWN:
            return
        end = self.now_us + duration_us
        slot.paused_until_us = max(slot.paused_until_us, end)
        self.tracer.record(self.now_us, "pause", "", slot.address, "", duration_us)
        self.at(end, self._unpause, slot, slot.incarnation)

    def _unpause(self, slot: ActorSlot, incarnation: int) -> None:
        if slot.incarnation != incarnation or slot.paused_until_us > self.now_us:
            return
        slot.paused_until_us = 0
        self.tracer.record(self.now_us, "unpause", "", slot.address, "", None)
        if slot.state == WAIT_RECV:
            env = slot.mailbox.take(slot.wait_reply)
            if env is not None:
                slot.wait_token += 1
                self._step(slot, env)

    # ------------------------------------------------------------------
    # messages
    def next_corr(self, slot: ActorSlot) -> int:
        slot.corr_seq += 1
        return (slot.incarnation << 32) | slot.corr_seq

    def names_actor(self, name: str) -> bool:
        """Whether `name` is an actor's address (else a role, sent to its leader of the moment)."""
        return name in self._actors

    def leader_of(self, role: str) -> str | None:
        view = self._lease_view
        return view.leader_of(role, self.now_us) if view is not None else None

    def send(self, src: ActorSlot, dst: str, msg: Any, corr: int, reply_to: int) -> None:
        target = self._actors.get(dst)
        if target is None:
            holder = self.leader_of(dst)
            target = self._actors.get(holder) if holder is not None else None
            if target is None:
                self.drops += 1
                reason = "no-leader" if holder is None else "unknown-address"
                self.tracer.record(
                    self.now_us, "drop", src.address, dst, _type_name(msg), (reason, msg)
                )
                return
        env = Envelope(src.address, dst, target.address, msg, self.now_us, corr, reply_to)
        outcome = self.network.transmit(src.host, target.host)
        if type(outcome) is int:
            src.seq += 1
            heapq.heappush(
                self._heap, (self.now_us + outcome, src.id, src.seq, DELIVER, env, target)
            )
        elif type(outcome) is str:
            self.trace_drop(env, outcome)
        else:
            for delay in outcome:
                src.seq += 1
                heapq.heappush(
                    self._heap, (self.now_us + delay, src.id, src.seq, DELIVER, env, target)
                )

    def post(self, address: str, msg: Any, delay_us: int = 0) -> None:
        """Kernel-originated message to an actor (flow completions, host events)."""
        slot = self._actors[address]
        env = Envelope("kernel", address, address, msg, self.now_us)
        self._seq += 1
        heapq.heappush(
            self._heap, (self.now_us + delay_us, KERNEL_ID, self._seq, DELIVER, env, slot)
        )

    def trace_drop(self, env: Envelope, reason: str) -> None:
        self.drops += 1
        self.tracer.record(self.now_us, "drop", env.src, env.to, _type_name(env.msg), (reason, env))

    def _deliver(self, slot: ActorSlot, env: Envelope) -> None:
        # The hottest path of a run: attribute look-ups and calls are kept out of it
        # where a cheap test says they are not needed (no host down, a plain message).
        state = slot.state
        if state in (DOWN, EXITED):
            self.trace_drop(env, "actor-down")
            return
        network = self.network
        if network.down and not network.host_up(slot.host):
            self.trace_drop(env, "host-down")
            return
        mailbox = slot.mailbox
        if mailbox.live >= self._mailbox_max:
            slot.overflow += 1
            self.trace_drop(env, "mailbox-full")
            return
        self.deliveries += 1
        msg = env.msg
        name = type(msg).__name__ if type(msg) is not Reliable else type(msg.msg).__name__
        self.tracer.record(self.now_us, "deliver", env.src, env.to, name, env)
        wanted = slot.wait_reply
        if (
            state == WAIT_RECV
            and (wanted == 0 or env.reply_to == wanted or _in_set(env.reply_to, wanted))
            and not slot.paused_until_us
        ):
            slot.wait_token += 1
            self._step(slot, env)
        else:
            mailbox.append(env)

    # ------------------------------------------------------------------
    # timers
    def set_timer(self, slot: ActorSlot, delay_us: int, msg: Any, last: bool = False) -> int:
        """Deliver `msg` to `slot` after `delay_us`; with `last`, after all else at that instant.

        A `last` timer is ordered by the kernel's own sequence (unique across
        actors) behind `LAST_ID`, so two of them at one instant fire in the
        order they were set, after every other event of that instant.
        """
        slot.timer_seq += 1
        timer_id = slot.timer_seq
        slot.timers.add(timer_id)
        if last:
            sender, seq = LAST_ID, self._kernel_seq()
        else:
            slot.seq += 1
            sender, seq = slot.id, slot.seq
        heapq.heappush(
            self._heap,
            (
                self.now_us + delay_us,
                sender,
                seq,
                TIMER,
                slot,
                (slot.incarnation, timer_id, msg),
            ),
        )
        return timer_id

    def cancel_timer(self, slot: ActorSlot, timer_id: int) -> None:
        """Forget one of `slot`'s pending timers: its message is never delivered.

        Nothing is traced: the heap entry stays and is skipped when it comes
        due, exactly as a timer of a past incarnation is.
        """
        slot.timers.discard(timer_id)

    def _fire_timer(self, ev: tuple[Any, ...]) -> None:
        slot: ActorSlot = ev[4]
        incarnation, timer_id, msg = ev[5]
        if incarnation != slot.incarnation or timer_id not in slot.timers:
            return
        if slot.paused_until_us:
            heapq.heappush(self._heap, (slot.paused_until_us, *ev[1:]))
            return
        slot.timers.discard(timer_id)
        env = Envelope(slot.address, slot.address, slot.address, msg, self.now_us)
        self.tracer.record(
            self.now_us, "timer", slot.address, slot.address, type(msg).__name__, msg
        )
        if slot.state == WAIT_RECV and slot.wait_reply == 0 and not slot.paused_until_us:
            slot.wait_token += 1
            self._step(slot, env)
        elif slot.state != EXITED:  # an exited actor's left-over timer: traced, never taken
            slot.mailbox.append(env)

    def _wake(self, ev: tuple[Any, ...]) -> None:
        slot: ActorSlot = ev[4]
        if ev[5] != slot.wait_token:
            return
        if slot.paused_until_us:
            heapq.heappush(self._heap, (slot.paused_until_us, *ev[1:]))
            return
        slot.wait_token += 1
        if slot.state == WAIT_SLEEP:
            self.tracer.record(self.now_us, "timer", slot.address, slot.address, "sleep", None)
            self._step(slot, None)
        elif slot.state == WAIT_RECV:
            self.tracer.record(self.now_us, "timeout", slot.address, slot.address, "call", None)
            self._step(slot, TIMED_OUT)

    # ------------------------------------------------------------------
    # the trampoline
    def _step(self, slot: ActorSlot, value: Any, exc: BaseException | None = None) -> None:
        coro = slot.coro
        slot.state = RUNNING
        while True:
            try:
                cmd = coro.send(value) if exc is None else coro.throw(exc)
            except StopIteration:
                self._exited(slot)
                return
            except Exception as error:
                self._crashed_by_error(slot, error)
                return
            exc = None
            kind = type(cmd)
            if kind is Receive:
                reply_to = cmd.reply_to
                mailbox = slot.mailbox
                env = mailbox.take(reply_to) if mailbox.live else None
                if env is not None:
                    value = env
                    continue
                slot.state = WAIT_RECV
                slot.wait_reply = reply_to
                if cmd.timeout_us is not None:
                    self._wake_at(slot, self.now_us + cmd.timeout_us)
                return
            if kind is Sleep:
                slot.state = WAIT_SLEEP
                self._wake_at(slot, self.now_us + max(0, cmd.delay_us))
                return
            if kind is StoreCall:
                if self._store_pending is not None:
                    raise EmulatorInternalError("two actors inside store calls at once")
                slot.state = WAIT_STORE
                self._store_pending = (slot, cmd)
                return
            # A foreign await: close the coroutine where it stands and crash it.
            what = type(cmd).__name__
            exc = ForeignAwait(
                f"{slot.address} awaited a {what} outside the kernel "
                "(use self.sleep / self.call / self.store, never asyncio)"
            )
            _close(coro)
            self._crashed_by_error(slot, exc)
            return

    def _wake_at(self, slot: ActorSlot, t_us: int) -> None:
        # A wake-up is valid only while the actor still waits on the same park
        # (same token); any resumption in between makes it stale.
        slot.wait_token += 1
        slot.seq += 1
        heapq.heappush(self._heap, (t_us, slot.id, slot.seq, WAKE, slot, slot.wait_token))

    async def _drain_store(self) -> None:
        await self.tracer.settle()
        while self._store_pending is not None:
            slot, cmd = self._store_pending
            self._store_pending = None
            try:
                result = await cmd.fn(self.store, *cmd.args)
            except Exception as error:
                self._store_answered(slot, cmd, None, error)
                continue
            name = getattr(cmd.fn, "__store_event__", None)
            if name is not None:
                self.tracer.record(self.now_us, "store", slot.address, "", name, (cmd.args, result))
            self._store_answered(slot, cmd, result, None)

    def _store_answered(
        self, slot: ActorSlot, cmd: StoreCall, result: Any, error: BaseException | None
    ) -> None:
        """Resume an actor with its store call's answer: at once, or late under a slow store.

        A slow store (`store_latency_us`, set by the `slow-store` fault) lets
        the call take effect now, at the caller's own timestamps, and holds
        only the answer back: the caller stays parked for the latency while
        everyone else runs, so its lease may lapse before it hears back.
        """
        latency = self.store_latency_us.get(slot.address, 0)
        if latency <= 0:
            self._step(slot, result, error)
            return
        slot.wait_token += 1
        name = getattr(cmd.fn, "__store_event__", None) or getattr(cmd.fn, "__name__", "")
        self.tracer.record(self.now_us, "slow-store", slot.address, "", name, latency)
        self.at(self.now_us + latency, self._store_late, slot, slot.wait_token, result, error)

    def _store_late(
        self, slot: ActorSlot, token: int, result: Any, error: BaseException | None
    ) -> None:
        if slot.wait_token != token or slot.state != WAIT_STORE:
            return  # the caller crashed meanwhile: the answer has nobody to go to
        if slot.paused_until_us > self.now_us:
            self.at(slot.paused_until_us, self._store_late, slot, token, result, error)
            return
        slot.wait_token += 1
        self._step(slot, result, error)

    # ------------------------------------------------------------------
    # bulk flows (fluid model): owned by `self.flows`; these are what actors call
    def start_flow(
        self, slot: ActorSlot, src_region: str, dst_region: str, nbytes: int, qos: str = "default"
    ) -> int:
        return self.flows.start(slot.address, src_region, dst_region, nbytes, qos)

    def flow_progress(self, flow_id: int) -> tuple[int, int]:
        return self.flows.progress(flow_id)

    def set_flow_rate_cap(self, flow_id: int, cap_bps: float | None) -> None:
        self.flows.set_rate_cap(flow_id, cap_bps)

    def wan_capacity_bps(self, src_region: str, dst_region: str) -> float:
        """What one flow could get from `src` to `dst` alone now: its path's narrowest link."""
        return self.flows.wan_capacity_bps(src_region, dst_region)

    def cancel_flow(self, slot: ActorSlot, flow_id: int) -> int:
        return self.flows.cancel(slot.address, flow_id)

    def flows_changed(self) -> None:
        """Reschedule the next completion check after any change of flows or links."""
        self.flows.changed()

    # ------------------------------------------------------------------
    # hardware: node state is owned by `self.hardware`; the actors on a host are the kernel's
    def set_host_state(self, node: str, up: bool, until_us: int | None = None) -> None:
        """Take a host or a whole subtree (rack, fault domain, region) down or up.

        `until_us`: when a node taken down is scheduled to come back (traced).
        """
        self.hardware.set_state(node, up, until_us)

    def crash_actors_on(self, host: str) -> None:
        """Crash every live actor on `host`, which just went down (`Hardware.set_state`).

        Each waits for its host to come back and restarts then, unless its
        kind says its work is meaningless after a host failure.
        """
        for slot in self._by_host.get(host, ()):
            if slot.state not in (DOWN, EXITED):
                inst = slot.instance
                restartable = inst is None or type(inst).restart_on_host_up
                self._crash(slot, f"host {host} down", None)
                slot.awaiting_host = restartable

    def restart_actors_on(self, host: str) -> None:
        """Restart, now, the actors waiting for `host` if it is up (`Hardware.set_state`)."""
        for slot in self._by_host.get(host, ()):
            if slot.awaiting_host and self.network.host_up(host):
                self.at(self.now_us, self._start, slot, True)

    @property
    def hardware_watchers(self) -> tuple[str, ...]:
        """The actors told of every node going down or up (cluster managers, RAS)."""
        return self.hardware.watchers

    @hardware_watchers.setter
    def hardware_watchers(self, watchers: tuple[str, ...]) -> None:
        self.hardware.watchers = watchers

    def replay_hardware(self, address: str) -> int:
        """Tell a hardware watcher the current state of every changed node (`Hardware.replay`)."""
        return self.hardware.replay(address)

    # ------------------------------------------------------------------
    # trace helpers
    def trace_event(self, kind: str, src: str, dst: str, type_: str, payload: Any) -> int:
        return self.tracer.record(self.now_us, kind, src, dst, type_, payload)

    def metric(self, name: str, value: float, labels: dict[str, Any] | None = None) -> None:
        """Record a metric sample at the current emulated time."""
        if self.metrics is not None:
            text = json.dumps(labels, sort_keys=True, separators=(",", ":")) if labels else "{}"
            self.metrics.rows.append((self.now_us, name, text, float(value)))

    async def flush(self) -> None:
        """Everything buffered (trace and metrics) reaches the store."""
        await self.tracer.flush()
        if self.metrics is not None:
            await self.metrics.flush()

    def report_violation(self, invariant: str, message: str) -> None:
        seq = self.tracer.record(self.now_us, "violation", "", "", invariant, message)
        self.violations.append((seq, self.now_us, invariant, message))
        if self.options.stop_on_violation:
            self.request_stop(f"invariant {invariant} violated")

    # ------------------------------------------------------------------
    # the run loop
    async def run(self, until_us: int) -> None:
        """Process events up to and including `until_us`, or until a stop request."""
        heap = self._heap
        pop = heapq.heappop
        tracer = self.tracer
        yield_every = self.options.yield_every_events
        pacer = self.pacer
        countdown = yield_every
        while heap and self.stop_reason is None:
            ev = heap[0]
            t = ev[0]
            if t > until_us:
                break
            pop(heap)
            if t != self.now_us:
                if pacer is not None:
                    await pacer.wait_until(t, self._stopping)
                    if self.stop_reason is not None:
                        heapq.heappush(heap, ev)  # not handled: it stays for a resume
                        break
                self.now_us = t
            code = ev[3]
            if code == DELIVER:
                self._deliver(ev[5], ev[4])
            elif code == CALL:
                ev[4](*ev[5])
            elif code == TIMER:
                self._fire_timer(ev)
            else:
                self._wake(ev)
            if self._store_pending is not None:
                await self._drain_store()
            self.events += 1
            countdown -= 1
            if tracer.flushing is not None:
                tracer.check_flush()
            elif not countdown & 31 and tracer.needs_flush():
                # Every 32 events is often enough: a batch is thousands of rows.
                tracer.start_flush()
            if countdown == 0:
                countdown = yield_every
                if self.metrics is not None and self.metrics.full():
                    await tracer.settle()
                    await self.metrics.flush()
                if self.progress is not None:
                    self.progress(self)
                await asyncio.sleep(0)
            elif tracer.flushing is not None and not countdown & 127:
                # Let the flush's completion callbacks run; each loop turn is cheap.
                await asyncio.sleep(0)
        if self.stop_reason is None and self.now_us < until_us:
            if pacer is not None:
                await pacer.wait_until(until_us, self._stopping)
            if self.stop_reason is None:
                self.now_us = until_us

    def stop_all(self) -> None:
        """End of run: give live actors their `on_stop` (synchronous, no awaits)."""
        for address in sorted(self._actors):
            slot = self._actors[address]
            if slot.instance is not None and slot.state not in (DOWN, EXITED):
                try:
                    slot.instance.on_stop()
                except Exception as error:
                    self._actor_error(address, error)
                    self.tracer.record(self.now_us, "crash", "", address, "", f"on_stop: {error}")
                if slot.coro is not None:
                    _close(slot.coro)
