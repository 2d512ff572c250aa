"""`mastemu resume RUN.db`: continue a run whose process died.

What a killed run leaves is a consistent cut: the run executes in the store's
group-commit mode (`runner.py`), so its emulated state and the trace that led
to it are durable up to the same event, the last of the last committed chunk,
at emulated time T. Whatever the process did after that commit is lost, as if
it never happened.

Resuming treats the kill as a crash of every actor at T followed by a restart:

- the scenario and seed come from the run database; the system is built again
  (a pure function of both) without its store setup, which the store holds;
- the trace is read back: its bytes continue the trace hash, its events
  rebuild the online invariant checkers (as `mastemu check` feeds them) and
  tell each actor's incarnation, so every actor that was alive restarts at T
  as *restarted* and rebuilds from the store. Job agents, spawned by their
  cluster managers, died with the process and are not started again;
- the network's and the machines' fault state at T is rebuilt by replaying
  the fault schedule's network and hardware faults up to T with the trace
  muted (their events are in the stored trace already); faults after T, and
  the ends of fault windows still open at T, fire as scheduled;
- actor faults (crash, pause, slow-store) are not replayed: the stored trace
  says which actors they hit, and the schedule how long each window lasts.
  A window still open at T stays open for the rest of its time and ends as
  scheduled, with the same `end` event, so reports and checkers see the one
  window the killed run began. An actor a crash fault left down at T comes
  back when that crash's restart was due (never, for a crash without one,
  unless a `restart` fault or the final heal restarts it); an actor frozen by
  a pause at T comes back when the pause ends: it was frozen when the process
  died, and a restart that ran at T would act (take a lease, send) while it
  should be frozen. A slow store stays slow for its actors until its window
  ends. The `resume` event lists the windows carried over and the actors
  held back;
- random streams are derived from (seed, T), so a resume is deterministic: the
  same database resumed twice gives the same trace hash;
- the trace goes on in the same database after a `run`/`resume` event, and the
  run ends as a normal run does (status, hash, violations over the whole
  trace). A resumed run can be killed and resumed again.

A run that already ended (`ok` or `violated`) is not resumed: the command says
so and exits 0, since the run is where `resume` would take it. A run that was
interrupted (Ctrl-C) or failed continues like a killed one. A database with
no committed event yet starts the run over from the beginning.

Job agents are the one part of the system that does not come back: they die
with the process and nothing restarts them, as when their machines fail. Each
cluster manager, restarting, probes its jobs' agents (`actors/common/cm/manager.py`) and
restarts the jobs of those that do not answer from their last checkpoint; a
preemption victim whose agent died before its checkpoint is released without
one, which the preemption checker excuses for attempts that began before a
`resume` event (the kill, not the system, lost that checkpoint).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from emulator.errors import EmulatorInternalError, InputError
from emulator.invariants import Checker, OnlineChecking, make_checkers
from emulator.kernel import ActorError, Kernel
from emulator.net.network import build_network
from emulator.pacing import Pacer
from emulator.registry import schema_parts
from emulator.rng import RngStreams
from emulator.run.faults import FaultInjector, fault_index
from emulator.run.runner import (
    FaultSchedule,
    RunPlan,
    RunResult,
    arm_kill_switch,
    build_system,
    drive,
    execute,
    fault_schedule,
    make_kernel,
    package_version,
    plan_run,
    run_end_us,
    run_result,
)
from emulator.run.scenario import (
    CrashFault,
    Fault,
    PauseFault,
    SlowStoreFault,
    decode_scenario,
)
from emulator.trace import TraceEvent, Tracer
from emulator.units import format_us
from store import Store, StoreError
from store.runs import RunMeta, clear_violations, get_run_meta, put_run_meta
from store.trace import TraceWriter, iter_trace_records

FINISHED = ("ok", "violated", "error")
# The faults whose windows belong to actors (`FaultInjector._fire`), and the
# reason the kernel records for a crash one of them caused.
ACTOR_WINDOWS = ("crash", "pause", "slow-store")
_DECODER = msgspec.msgpack.Decoder()


def resumed_streams(seed: int, resume_us: int) -> RngStreams:
    """The run's named streams, seeded from (seed, resume time) instead of the seed.

    The killed process had drawn an unknown number of values from each
    stream; starting them over from the seed would replay early draws, so
    the resumed run gets fresh streams that still depend on nothing else.
    """
    return RngStreams(seed, salt=f":resume@{resume_us}")


class ContinuedTracer(Tracer):
    """A tracer that continues a stored trace: its seqs and its hash go on."""

    def absorb(self, record: bytes) -> None:
        """Account for one stored event (its exact bytes) without storing it again."""
        self.seq += 1
        self._hash.update(record)


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
class AlreadyFinished:
    """`resume` of a run that ended: nothing to do."""

    status: str
    end_t_us: int | None


async def _read_prefix(store: Store, tracer: ContinuedTracer, checkers: list[Checker]) -> Prefix:
    """Read the stored trace once: hash it, note lifecycles, feed the checkers.

    The checkers' verdicts on the prefix are not collected: the killed run
    recorded them as `violation` events, which are taken as they are.
    """
    by_kind: dict[str, list[Checker]] = {}
    for checker in checkers:
        for kind in checker.kinds:
            by_kind.setdefault(kind, []).append(checker)
    prefix = Prefix()
    async for seq, record in iter_trace_records(store):
        tracer.absorb(record)
        t_us, kind, src, dst, type_, payload = _DECODER.decode(record)
        event = TraceEvent(seq, t_us, kind, src, dst, type_, payload)
        prefix.note(event)
        for checker in by_kind.get(kind, ()):
            checker.observe(event)
    return prefix


async def _open_run(db: Path) -> tuple[Store, RunMeta]:
    """Open a run database for resuming; InputError (exit 2) if it is not one."""
    if db.is_dir():
        raise InputError(str(db), "", "is a directory, not a run database")
    if not db.is_file():
        raise InputError(str(db), "", "no such run database")
    if db.stat().st_size == 0:
        raise InputError(str(db), "", "empty file: not a mastemu run database")
    try:
        store = await Store.open(db, schema_parts())
    except StoreError as error:
        raise InputError(str(db), "", str(error).removeprefix(f"{db}: ")) from None
    try:
        meta = await get_run_meta(store)
    except BaseException:
        await store.close()
        raise
    if meta is None:
        await store.close()
        raise InputError(str(db), "", "no run metadata: not a run database")
    return store, meta


def _is_actor_fault(fault: Fault) -> bool:
    # Actor faults name a target. They are not replayed: every actor restarts
    # at the resume point, and `actor_windows` carries their open windows over.
    return hasattr(fault, "target")


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


async def _replay_hardware(kernel: Kernel, faults: FaultSchedule, resume_us: int) -> FaultInjector:
    """Bring the network and the machines to their fault state at `resume_us`.

    The past network and hardware faults fire again, with the trace muted,
    before any actor exists; the ends of windows still open at `resume_us`
    stay scheduled, on the returned injector.
    """
    real = kernel.tracer
    kernel.tracer = Tracer(None)
    past = FaultInjector(kernel)
    for some in (faults.scenario, faults.nemesis):
        past.schedule([f for f in some if int(f.at) <= resume_us and not _is_actor_fault(f)])
    if faults.heal_at_us is not None and faults.heal_at_us <= resume_us:
        kernel.at(faults.heal_at_us, past.final_heal)
    await kernel.run(resume_us)
    kernel.tracer = real
    kernel.events = 0
    return past


@dataclass
class Restarted:
    """The resumed world, ready to run from the resume point."""

    kernel: Kernel
    checking: OnlineChecking
    injectors: tuple[FaultInjector, FaultInjector]

    def windows(self) -> list[tuple[int, int | None, str]]:
        return [w for injector in self.injectors for w in injector.windows]


async def read_meta(db: Path) -> RunMeta:
    """The run metadata of `db`; InputError (exit 2) if it is not a run database."""
    store, meta = await _open_run(db)
    await store.close()
    return meta


async def resume(
    db: Path,
    *,
    until_us: int | None = None,
    speed: float | None = None,
    progress: Callable[[Kernel], None] | None = None,
    handle_signals: bool = False,
    on_kernel: Callable[[Kernel], None] | None = None,
) -> RunResult | AlreadyFinished:
    """Continue the run stored in `db` to the scenario's end (or `until_us`)."""
    store, meta = await _open_run(db)
    try:
        if meta.status in FINISHED:
            return AlreadyFinished(meta.status, meta.end_t_us)
        source = f"{db} (stored scenario)"
        plan = plan_run(decode_scenario(meta.scenario_text, source), meta.scenario_text, source)
        if plan.scenario.trace.level != "full":
            why = "traced at level decisions: its hash cannot be continued; run it again"
            raise InputError(str(db), "", why)
        end_us = run_end_us(plan.scenario, until_us)
        writer = TraceWriter(store)
        tracer = ContinuedTracer(writer)
        checkers = make_checkers(plan.scenario.invariants.enabled)
        prefix = await _read_prefix(store, tracer, checkers)
        if prefix.last_seq > 0:
            if end_us < prefix.last_t_us:
                at = format_us(prefix.last_t_us)
                raise InputError(str(db), "", f"--until is before the resume point ({at})")
            writer.first_seq = prefix.last_seq + 1
            wall0 = time.perf_counter()
            world = await _restart(store, plan, meta, tracer, checkers, prefix)
            kernel = world.kernel
            if speed is not None:
                kernel.pacer = Pacer(speed, t0_us=prefix.last_t_us)
            kernel.progress = progress
            arm_kill_switch(kernel)
            if on_kernel is not None:
                on_kernel(kernel)
            tolerated = frozenset(plan.scenario.invariants.tolerate_errors)
            status, trace_hash = await drive(
                kernel, world.checking, end_us, handle_signals, tolerated
            )
            return run_result(
                plan, meta.seed, db, kernel, status, trace_hash, wall0, world.windows()
            )
    finally:
        await store.close()
    # Killed before its first commit: nothing to continue, so the run starts over.
    return await execute(
        plan,
        seed=meta.seed,
        out=db,
        speed=speed,
        until_us=until_us,
        progress=progress,
        handle_signals=handle_signals,
        on_kernel=on_kernel,
    )


async def _restart(
    store: Store,
    plan: RunPlan,
    meta: RunMeta,
    tracer: ContinuedTracer,
    checkers: list[Checker],
    prefix: Prefix,
) -> Restarted:
    """Rebuild the world at the resume point: network, faults, checkers, actors."""
    scenario = plan.scenario
    seed = meta.seed
    resume_us = prefix.last_t_us
    await put_run_meta(
        store, msgspec.structs.replace(meta, status="running", version=package_version())
    )
    await clear_violations(store)
    await store.begin_group()
    rng = resumed_streams(seed, resume_us)
    network = build_network(scenario.world.regions, scenario.network, rng)
    kernel = make_kernel(
        scenario, network, seed=seed, rng=rng, tracer=tracer, store=store, speed=None
    )
    build = build_system(plan, seed)
    roles = list(plan.roles) + (build.roles if build is not None else [])
    faults = fault_schedule(plan, seed, roles, network.topology)
    past = await _replay_hardware(kernel, faults, resume_us)
    actors = list(plan.actors) + (list(build.actors) if build is not None else [])
    windows = actor_windows(prefix, faults)
    addresses = {address for address, *_ in actors}
    held = {a: t for a, t in held_back(prefix, windows, resume_us).items() if a in addresses}
    carried = [
        [w.start_us, w.end_us, w.name] for w in windows if w.end_us is None or w.end_us > resume_us
    ]
    # Attached before the resume point is recorded: checkers excuse what the
    # kill did (e.g. a preemption victim's agent dying before its checkpoint).
    checking = OnlineChecking(kernel, checkers)
    tracer.record(
        resume_us,
        "run",
        "",
        "",
        "resume",
        {
            "after_seq": prefix.last_seq,
            "status": meta.status,
            "seed": seed,
            "open_faults": carried,
            "held": held,
        },
    )
    kernel.violations.extend(prefix.violations)
    kernel.actor_errors.extend(prefix.actor_errors)
    if prefix.violations and scenario.invariants.stop_on_violation:
        kernel.request_stop(f"invariant {prefix.violations[0][2]} violated")
    # An actor held back for good still needs its slot (a `restart` fault or
    # the final heal may start it): it is due to start after the run's end.
    never_us = int(scenario.duration) + 1
    for address, host, start_us, factory in actors:
        if start_us > resume_us:
            kernel.spawn(address, host, factory, at_us=start_us)
        elif address not in prefix.exited:
            incarnation = prefix.restart_incarnation(address)
            at_us = held.get(address, resume_us)
            at_us = never_us if at_us is None else at_us
            kernel.spawn(address, host, factory, at_us=at_us, incarnation=incarnation)
    if build is not None:
        kernel.hardware_watchers = build.hardware_watchers
    injector = ResumedFaults(kernel)
    injector.schedule(faults.scenario, after_us=resume_us)
    injector.schedule(faults.nemesis, after_us=resume_us)
    injector.carry(windows, prefix.fault_crashed, resume_us)
    if faults.heal_at_us is not None and faults.heal_at_us > resume_us:
        kernel.at(faults.heal_at_us, injector.final_heal)
    return Restarted(kernel, checking, (past, injector))
