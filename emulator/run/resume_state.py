"""What a stored trace says about a run at its resume point (`resume.py`).

`Prefix` is what the trace read back tells of every actor (incarnation, up
or down, crashed, paused, held back) and of the fault windows begun;
`actor_windows` matches those windows with the fault schedule to learn when
each ends; `held_back` says which actors do not restart at the resume point;
`ResumedFaults` carries the open windows over into the resumed run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from emulator.errors import EmulatorInternalError
from emulator.kernel import ActorError
from emulator.run.faults import FaultInjector, fault_index
from emulator.run.runner import FaultSchedule
from emulator.run.scenario import CrashFault, Fault, PauseFault, SlowStoreFault
from emulator.trace import TraceEvent

# The faults whose windows belong to actors (`FaultInjector._fire`), and the
# reason the kernel records for a crash one of them caused.
ACTOR_WINDOWS = ("crash", "pause", "slow-store")


@dataclass
class Prefix:
    """What the stored trace says about the run up to its last committed event."""

    last_seq: int = 0
    last_t_us: int = 0
    # Each actor's incarnation, and whether it was up, at the last event.
    incarnation: dict[str, int] = field(default_factory=dict)
    up: set[str] = field(default_factory=set)
    exited: set[str] = field(default_factory=set)
    violations: list[tuple[int, int, str, str]] = field(default_factory=list)
    # Actors that died on exceptions of their own (the kernel's `actor-error` events).
    actor_errors: list[ActorError] = field(default_factory=list)
    # The last crash of each actor that was down at the last event: (time, reason).
    crashed: dict[str, tuple[int, str]] = field(default_factory=dict)
    # The actors the kernel gave up restarting (`gave-up`: the restart limit).
    gave_up: set[str] = field(default_factory=set)
    # Until when each frozen actor was paused (the kernel's `pause` events).
    paused_until_us: dict[str, int] = field(default_factory=dict)
    # Every actor-fault window begun: (time, action, the `start` event's payload).
    actor_faults: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    # The actors the final heal would restart (`FaultInjector._crashed`).
    fault_crashed: set[str] = field(default_factory=set)
    # The last final heal: its time, and how many actor-fault windows began before it.
    final_heal: tuple[int, int] = (0, 0)

    def note(self, event: TraceEvent) -> None:
        self.last_seq, self.last_t_us = event.seq, event.t_us
        kind, address = event.kind, event.dst
        if kind in ("start", "restart"):
            self.incarnation[address] = int(event.payload)
            self.up.add(address)
            self.exited.discard(address)
            self.crashed.pop(address, None)
            self.gave_up.discard(address)
        elif kind == "gave-up":
            self.gave_up.add(address)
        elif kind == "crash":
            # A traced crash ends an incarnation (`Kernel._crash` counts it up)
            # and any pause of it.
            self.incarnation[address] = self.incarnation.get(address, 0) + 1
            self.up.discard(address)
            self.crashed[address] = (event.t_us, str(event.payload))
            self.paused_until_us.pop(address, None)
            if fault_index(str(event.payload)) is not None:
                self.fault_crashed.add(address)
        elif kind == "exit":
            self.up.discard(address)
            self.exited.add(address)
        elif kind == "pause":
            until = event.t_us + int(event.payload)
            self.paused_until_us[address] = max(self.paused_until_us.get(address, 0), until)
        elif kind == "unpause":
            self.paused_until_us.pop(address, None)
        elif kind == "fault":
            self._fault(event)
        elif kind == "violation":
            self.violations.append((event.seq, event.t_us, event.type, str(event.payload)))
        elif kind == "actor-error":
            error, message = event.payload["error"], event.payload["message"]
            self.actor_errors.append(ActorError(event.seq, event.t_us, address, error, message))

    def _fault(self, event: TraceEvent) -> None:
        action, _, phase = event.type.rpartition(".")
        if phase == "start" and action in ACTOR_WINDOWS:
            self.actor_faults.append((event.t_us, action, event.payload))
        elif (action, phase) == ("restart", "instant"):
            self.fault_crashed.discard(event.payload["actor"])
        elif (action, phase) == ("final-heal", "end"):
            self.fault_crashed.clear()
            self.final_heal = (event.t_us, len(self.actor_faults))

    def restart_incarnation(self, address: str) -> int:
        """The incarnation `address` restarts as: the kill ends the one that was up.

        0 (a first start) for an actor that never started, e.g. one still
        waiting for its host.
        """
        incarnation = self.incarnation.get(address, 0)
        return incarnation + 1 if address in self.up else incarnation


@dataclass(frozen=True)
class ActorWindow:
    """One actor's window of a crash, pause or slow-store fault begun before the resume."""

    action: str
    actor: str
    start_us: int
    end_us: int | None  # None: a crash with no restart
    index: int | None = None  # a crash's fault index (`fault #N` in the kernel's crash)
    latency_us: int = 0  # a slow store's

    @property
    def name(self) -> str:
        return f"{self.action} {self.actor}"


def _window_key(fault: Fault, index: int) -> tuple[Any, ...] | None:
    """What a fault's `start` events say of it: time, action, target and index or latency."""
    if isinstance(fault, CrashFault):
        return (int(fault.at), "crash", fault.target, index)
    if isinstance(fault, PauseFault):
        return (int(fault.at), "pause", fault.target, None)
    if isinstance(fault, SlowStoreFault):
        return (int(fault.at), "slow-store", fault.target, int(fault.latency))
    return None


def _start_key(t_us: int, action: str, detail: dict[str, Any]) -> tuple[Any, ...]:
    extra = detail.get("index") if action == "crash" else detail.get("latency_us")
    return (t_us, action, detail["target"], extra)


def _length_us(fault: Fault) -> int | None:
    if isinstance(fault, CrashFault):
        return int(fault.restart_after) if fault.restart_after is not None else None
    assert isinstance(fault, PauseFault | SlowStoreFault)
    return int(fault.duration)


def actor_windows(prefix: Prefix, faults: FaultSchedule) -> list[ActorWindow]:
    """Every actor-fault window the stored trace began, with its scheduled end.

    The trace names the actors a fault hit (its target was resolved when it
    fired); the schedule gives the window's length. A `start` event is
    matched with the fault of the same time, action and target (and index or
    latency); when several faults share all of those (say, two pauses of one
    leader at one instant), the n-th window of an actor goes with the n-th
    of them, in firing order: scenario faults before the nemesis' at one time.
    """
    by_key: dict[tuple[Any, ...], list[Fault]] = {}
    listed = [(f, i) for some in (faults.scenario, faults.nemesis) for i, f in enumerate(some)]
    for fault, index in sorted(listed, key=lambda pair: int(pair[0].at)):
        key = _window_key(fault, index)
        if key is not None:
            by_key.setdefault(key, []).append(fault)
    seen: dict[tuple[Any, ...], int] = {}
    windows = []
    heal_us, healed = prefix.final_heal
    for position, (t_us, action, detail) in enumerate(prefix.actor_faults):
        key = _start_key(t_us, action, detail)
        matches = by_key.get(key)
        if not matches:
            raise EmulatorInternalError(f"the traced {action} at {t_us} µs is not scheduled")
        nth = seen.get((*key, detail["actor"]), 0)
        seen[(*key, detail["actor"])] = nth + 1
        length = _length_us(matches[min(nth, len(matches) - 1)])
        end_us = t_us + length if length is not None else None
        if action == "slow-store" and position < healed and end_us is not None:
            end_us = min(end_us, heal_us)  # the final heal ended it (and traced its end)
        index = detail.get("index") if action == "crash" else None
        latency = int(detail.get("latency_us", 0))
        windows.append(ActorWindow(action, detail["actor"], t_us, end_us, index, latency))
    return windows


def held_back(prefix: Prefix, windows: list[ActorWindow], resume_us: int) -> dict[str, int | None]:
    """The actors that do not restart at the resume point: when each comes back (None: never).

    A paused actor comes back when its pause ends; one a crash fault left
    down, when that crash's restart is due (never without one, unless a
    `restart` fault or the final heal restarts it); one that used up its
    restarts after errors stays down. Any other actor down at the resume
    point (its host down, say) restarts there as the kernel would have.
    """
    held: dict[str, int | None] = {}
    for actor, until_us in prefix.paused_until_us.items():
        if actor in prefix.up and until_us > resume_us:
            held[actor] = until_us
    for actor, (t_us, reason) in prefix.crashed.items():
        if actor in prefix.up or actor in prefix.exited:
            continue
        index = fault_index(reason)
        if actor in prefix.gave_up:
            held[actor] = None
        elif index is not None:
            crash = (actor, t_us, index)
            ends = [w.end_us for w in windows if (w.actor, w.start_us, w.index) == crash]
            if not ends:
                raise EmulatorInternalError(f"{actor}'s crash at {t_us} µs has no fault window")
            if ends[0] is None or ends[0] > resume_us:
                held[actor] = ends[0]
    return held


class ResumedFaults(FaultInjector):
    """The resumed run's injector: it also carries the actor-fault windows of the prefix."""

    def carry(self, windows: list[ActorWindow], crashed: set[str], resume_us: int) -> None:
        """Take over the windows begun before `resume_us`; end those still open on time.

        `crashed` is who the final heal must restart. No `start` event is
        traced again: the stored trace has it, and its `end` comes as scheduled.
        """
        k = self.kernel
        self._crashed = set(crashed)
        for window in windows:
            self.windows.append((window.start_us, window.end_us, window.name))
            end_us, actor = window.end_us, window.actor
            if end_us is not None and end_us <= resume_us:
                continue
            if window.action == "slow-store":
                assert end_us is not None
                self._slow_seq += 1
                self._slow.setdefault(actor, {})[self._slow_seq] = window.latency_us
                self._apply_slow(actor)
                k.at(end_us, self._end_slow, actor, self._slow_seq)
            elif end_us is not None:
                k.at(end_us, self._trace, "end", window.action, {"actor": actor})
