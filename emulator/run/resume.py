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

A resumed run stops where the run was asked to stop: the `--until` it was
started with (stored in `run_meta.until_us`), else the scenario's end, unless
`resume --until T` says otherwise. A run that already ended (`ok`,
`violated`, `error`) at that point is left as it is (the command says so and
exits 0); `resume --until T` past its end extends it as if it had been
killed at its last event (a violation it recorded stays recorded). A run that
was interrupted (Ctrl-C) or failed continues like a killed one. A database
with no committed event yet starts the run over from the beginning. The
database is verified first (`store/verify.py`), and locked throughout.

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
from dataclasses import dataclass
from pathlib import Path

import msgspec

from emulator.errors import InputError
from emulator.invariants import Checker, OnlineChecking, make_checkers
from emulator.kernel import Kernel
from emulator.net.network import build_network
from emulator.pacing import Pacer
from emulator.registry import schema_parts
from emulator.rng import RngStreams
from emulator.run.collector import run_collector
from emulator.run.faults import FaultInjector
from emulator.run.resume_state import Prefix, ResumedFaults, actor_windows, held_back
from emulator.run.runner import (
    FaultSchedule,
    RunPlan,
    RunResult,
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
    Fault,
    decode_scenario,
)
from emulator.run.stopping import arm_kill_switch
from emulator.trace import TraceEvent, Tracer
from emulator.units import format_us
from store import Store
from store.lock import run_lock
from store.runs import RunMeta, clear_violations, get_run_meta, put_run_meta
from store.trace import TraceWriter, iter_trace_records, last_digest
from store.verify import verify_run

FINISHED = ("ok", "violated", "error")
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
    """Open a whole run database for resuming; StoreError (exit 2) says what is wrong if not."""
    verify_run(db)
    store = await Store.open(db, schema_parts())
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
    command: str | None = None,
) -> RunResult | AlreadyFinished:
    """Continue the run stored in `db` to where it was asked to stop, or to `until_us`.

    Without `until_us` the run goes on to the `--until` it was started with
    (`RunMeta.until_us`), else to the scenario's end; with it, to `until_us`
    (at most the scenario's end), which also extends a run that finished
    before it. It holds the database's lock throughout (`store/lock.py`).
    """
    with run_lock(db, command), run_collector():
        return await _resume(db, until_us, speed, progress, handle_signals, on_kernel)


def resume_target(meta: RunMeta, until_us: int | None) -> int | None:
    """Where a resumed run stops: the `--until` given now, else the one it was started with."""
    return until_us if until_us is not None else meta.until_us


def nothing_to_do(meta: RunMeta, end_us: int) -> bool:
    """Whether a run already reached where a resume would take it (a finished run, not extended)."""
    return meta.status in FINISHED and (meta.end_t_us is None or end_us <= meta.end_t_us)


async def _resume(
    db: Path,
    until_us: int | None,
    speed: float | None,
    progress: Callable[[Kernel], None] | None,
    handle_signals: bool,
    on_kernel: Callable[[Kernel], None] | None,
) -> RunResult | AlreadyFinished:
    store, meta = await _open_run(db)
    target = resume_target(meta, until_us)
    try:
        source = f"{db} (stored scenario)"
        plan = plan_run(decode_scenario(meta.scenario_text, source), meta.scenario_text, source)
        end_us = run_end_us(plan.scenario, target)
        if nothing_to_do(meta, end_us):
            return AlreadyFinished(meta.status, meta.end_t_us)
        if plan.scenario.trace.level != "full":
            why = "traced at level decisions: its hash cannot be continued; run it again"
            raise InputError(str(db), "", why)
        writer = TraceWriter(store)
        tracer = ContinuedTracer(writer)
        checkers = make_checkers(plan.scenario.invariants.enabled)
        prefix = await _read_prefix(store, tracer, checkers)
        if prefix.last_seq > 0:
            if end_us < prefix.last_t_us:
                at = format_us(prefix.last_t_us)
                raise InputError("--until", "", f"is before the resume point ({at})")
            writer.first_seq = prefix.last_seq + 1
            writer.digest = await last_digest(store)
            wall0 = time.perf_counter()
            # Stored for the next resume: where this one was asked to stop.
            stored = end_us if end_us < int(plan.scenario.duration) else None
            meta = msgspec.structs.replace(meta, until_us=stored)
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
        until_us=target,
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
    if build is not None:
        if build.message_latency_us is not None:
            network.fix_latency(build.message_latency_us)
        kernel.ends_when_done = build.ends_when_done
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
