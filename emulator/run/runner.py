"""One run: scenario → world → kernel → trace in a run database.

Everything the user can get wrong is checked before the run database is
created, so bad input never leaves a half-made run behind. Once the run has
started, every exit path (normal end, invariant stop, Ctrl-C, an internal
error) flushes the buffered trace, writes the run's status and closes the
connection, so the database always holds the events up to that point.

A process killed outright (SIGKILL, power loss) runs no exit path. So the
store runs in group-commit mode: the emulated state (queue, fleet, leases…)
and the trace chunk that records how it got there commit in one transaction,
about every thousand events. A killed run's database is a consistent cut at
its last committed event, which `mastemu resume` (`resume.py`) continues.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import msgspec

from emulator.actor import Actor
from emulator.errors import InputError, InputWarning
from emulator.invariants import OnlineChecking, make_checkers
from emulator.kernel import ActorError, Kernel, KernelOptions
from emulator.net.network import Network, build_network
from emulator.net.specs import WorldSpec
from emulator.net.topology import Topology
from emulator.pacing import Pacer
from emulator.registry import (
    ACTOR_KINDS,
    SYSTEMS,
    System,
    SystemBuild,
    load_plugins,
    schema_parts,
)
from emulator.rng import RngStreams
from emulator.run.collector import run_collector
from emulator.run.failures import failing_errors
from emulator.run.faults import FaultInjector, nemesis_schedule
from emulator.run.scenario import Fault, Scenario, check_references, decode_params
from emulator.run.stopping import KILLED, arm_kill_switch, stop_on_interrupt
from emulator.trace import Tracer
from store import Store
from store.lock import run_lock
from store.migrations import APPLICATION_ID
from store.runs import RunMeta, finish_run, put_run_meta, record_violation
from store.trace import MetricWriter, TraceWriter, iter_trace


def package_version() -> str:
    try:
        return version("mast-emulator")
    except PackageNotFoundError:
        return "source"


@dataclass
class RunResult:
    """What a run produced; the CLI prints it."""

    scenario: str
    seed: int
    out: Path
    status: str
    trace_hash: str
    end_t_us: int
    events: int
    trace_events: int
    deliveries: int
    drops: int
    crashes: int
    wall_s: float
    lag_s_max: float | None
    violations: list[tuple[int, int, str, str]] = field(default_factory=list)
    fault_windows: list[tuple[int, int | None, str]] = field(default_factory=list)
    # Actors that died on an exception of their own (a tolerated type included).
    actor_errors: list[ActorError] = field(default_factory=list)
    # The run reached its end before its system's work was done (`Kernel.cut_short`).
    cut_short: bool = False

    @property
    def failed(self) -> bool:
        """Whether the run failed: an invariant was violated or an actor hit a bug."""
        return self.status in ("violated", "error")


@dataclass
class RunPlan:
    """A validated scenario, ready to run: actor factories resolved, params decoded."""

    scenario: Scenario
    text: str
    source: str
    actors: list[tuple[str, str, int, Callable[[], Actor]]]
    roles: list[str]
    system: System | None = None
    system_params: Any = None
    # Accepted but suspicious input (`InputWarning`, paths below the scenario): `run`
    # prints them and the run records them at t=0 (`input-warning` setup events).
    warnings: list[InputWarning] = field(default_factory=list)


def plan_run(scenario: Scenario, text: str, source: str) -> RunPlan:
    """Resolve the system, actor kinds, parameters and invariant names.

    Raises InputError naming the key path if anything is wrong.
    """
    load_plugins()
    system, system_params, scenario, warnings = _plan_system(scenario, source)
    actors = []
    roles: set[str] = set()
    for i, spec in enumerate(scenario.actors):
        cls = ACTOR_KINDS.get(spec.kind)
        if cls is None:
            known = ", ".join(sorted(ACTOR_KINDS)) or "none"
            raise InputError(source, f"actors[{i}].kind", f"unknown kind {spec.kind!r} ({known})")
        params: Any = None
        if cls.Params is not None:
            params = decode_params(cls.Params, spec.params, source, f"actors[{i}].params")
        elif spec.params:
            raise InputError(source, f"actors[{i}].params", f"{spec.kind} takes no params")
        if isinstance(getattr(params, "role", None), str):
            roles.add(params.role)
        factory = _factory(cls, spec.address, params)
        actors.append((spec.address, spec.host, int(spec.start_at), factory))
    for i, name in enumerate(scenario.invariants.enabled):
        try:
            make_checkers([name])
        except KeyError:
            raise InputError(
                source, f"invariants.enabled[{i}]", f"unknown invariant {name!r}"
            ) from None
    return RunPlan(scenario, text, source, actors, sorted(roles), system, system_params, warnings)


def _plan_system(
    scenario: Scenario, source: str
) -> tuple[System | None, Any, Scenario, list[InputWarning]]:
    """Validate `[system]` and give the scenario the system's regions as its world."""
    if not scenario.system:
        return None, None, scenario, []
    raw = dict(scenario.system)
    kind = raw.pop("kind")
    system = SYSTEMS.get(kind)
    if system is None:
        known = ", ".join(sorted(SYSTEMS)) or "none"
        raise InputError(source, "system.kind", f"unknown system {kind!r} ({known})")
    params = decode_params(system.Params, raw, source, "system")
    try:
        warnings = list(system.check(params, _base_dir(source)) or ())
    except InputError as error:
        raise error.within(source, "system") from None
    except ValueError as error:
        raise InputError(source, "system", str(error)) from None
    regions = system.regions(params)
    if scenario.world is not None:
        regions = regions + list(scenario.world.regions)
    scenario = msgspec.structs.replace(scenario, world=WorldSpec(regions=regions))
    check_references(scenario, source, system.addresses(params))
    return system, params, scenario, warnings


def _base_dir(source: str) -> Path:
    """Where a scenario's relative file names are resolved: its own folder."""
    path = Path(source)
    return path.parent if path.is_file() else Path.cwd()


def system_base_dir(plan: RunPlan) -> Path:
    """Where the plan's system resolves relative file names (its scenario's folder)."""
    return _base_dir(plan.source)


def _factory(cls: type[Actor], address: str, params: Any) -> Callable[[], Actor]:
    return lambda: cls(address, params)


# The setup event that records one `InputWarning` of the plan.
INPUT_WARNING = "input-warning"


async def recorded_warnings(db: Path) -> list[InputWarning]:
    """The input warnings a run recorded when it started (setup events at t=0)."""
    found: list[InputWarning] = []
    async with Store.open_ctx(db) as store:
        async for row in iter_trace(store, t_to_us=1, kinds=["setup"]):
            if row.type == INPUT_WARNING and isinstance(row.payload, dict):
                found.append(
                    InputWarning(
                        str(row.payload.get("path", "")), str(row.payload.get("message", ""))
                    )
                )
    return found


def check_replaceable(out: Path, replace: bool = True) -> None:
    """Refuse to replace `out` unless it is an old run database (and `replace` allows it).

    A run deletes the file at `out` first, so anything else there (a file of
    the user's, a device such as /dev/null, a folder) is refused, and so is a
    run database unless the user said so (`run --force`).
    """
    if out.is_dir():
        raise InputError(str(out), "", "is a folder, not a run database")
    if out.exists() and not out.is_file():
        raise InputError(str(out), "", "is not a regular file; give a file name for the run")
    if not out.is_file() or out.stat().st_size == 0:
        return
    app_id = None
    meta: tuple[Any, ...] | None = None
    # Read-only, and through SQLite itself: a killed run's header lives in its WAL.
    with contextlib.suppress(sqlite3.Error):
        uri = out.resolve().as_uri() + "?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            meta = conn.execute(
                "SELECT scenario_name, seed, status FROM run_meta WHERE id = 1"
            ).fetchone()
    if app_id != APPLICATION_ID:
        raise InputError(str(out), "", "exists and is not a mastemu run database; not replacing it")
    if not replace:
        what = f" (a run of {meta[0]}, seed {meta[1]}, {meta[2]})" if meta else ""
        raise InputError(
            str(out),
            "",
            f"a run database exists{what}; use --force to replace it, or --out another file",
        )


def remove_run_files(out: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(out) + suffix).unlink(missing_ok=True)


async def execute(
    plan: RunPlan,
    *,
    seed: int,
    out: Path,
    speed: float | None = None,
    until_us: int | None = None,
    progress: Callable[[Kernel], None] | None = None,
    handle_signals: bool = False,
    on_kernel: Callable[[Kernel], None] | None = None,
    replace: bool = True,
    command: str | None = None,
    on_setup: Callable[[Kernel], None] | None = None,
) -> RunResult:
    """Run a planned scenario to its end (or `until_us`) and return the result.

    The run holds its database's lock (`store/lock.py`) from before it looks
    at `out` until the database is closed: another process writing it is
    refused (StoreError naming it), and so is an existing run database
    unless `replace` (InputError). `command` is what the lock says runs.
    `on_kernel` sees the kernel just before the first event; `on_setup` sees
    it before the system records its setup facts (an observer of the whole
    trace, as `mastemu check` reads it, subscribes there).
    """
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(str(out), "", f"cannot create its folder: {error.strerror}") from None
    with run_lock(out, command), run_collector():
        check_replaceable(out, replace)
        remove_run_files(out)
        hooks = (on_setup, on_kernel)
        return await _execute(plan, seed, out, speed, until_us, progress, handle_signals, hooks)


async def _execute(
    plan: RunPlan,
    seed: int,
    out: Path,
    speed: float | None,
    until_us: int | None,
    progress: Callable[[Kernel], None] | None,
    handle_signals: bool,
    hooks: tuple[Callable[[Kernel], None] | None, Callable[[Kernel], None] | None],
) -> RunResult:
    scenario = plan.scenario
    end_us = run_end_us(scenario, until_us)
    wall0 = time.perf_counter()
    async with Store.open_ctx(out, schema_parts()) as store:
        mode = "virtual" if speed is None else f"scaled x{speed:g}"
        await put_run_meta(store, starting_meta(plan, seed, until_us, mode))
        # From here on the emulated state and the trace commit together.
        await store.begin_group()
        tracer = Tracer(TraceWriter(store, sparse=scenario.trace.level != "full"))
        rng = RngStreams(seed)
        network = build_network(scenario.world.regions, scenario.network, rng)
        kernel = make_kernel(
            scenario, network, seed=seed, rng=rng, tracer=tracer, store=store, speed=speed
        )
        kernel.progress = progress
        with stop_on_interrupt(kernel, handle_signals):
            return await _set_up_and_drive(plan, seed, out, kernel, hooks, end_us, wall0)


async def _set_up_and_drive(
    plan: RunPlan,
    seed: int,
    out: Path,
    kernel: Kernel,
    hooks: tuple[Callable[[Kernel], None] | None, Callable[[Kernel], None] | None],
    end_us: int,
    wall0: float,
) -> RunResult:
    on_setup, on_kernel = hooks
    scenario, store, tracer, network = plan.scenario, kernel.store, kernel.tracer, kernel.network
    if on_setup is not None:
        on_setup(kernel)
    checking = OnlineChecking(kernel, make_checkers(scenario.invariants.enabled))
    tracer.record(0, "run", "", "", "start", {"scenario": scenario.name, "seed": seed})
    roles = list(plan.roles)
    for address, host, start_us, factory in plan.actors:
        kernel.spawn(address, host, factory, at_us=start_us)
    for warning in plan.warnings:
        tracer.record(
            0,
            "setup",
            "",
            "",
            "input-warning",
            {"path": warning.path, "message": warning.message},
        )
    build = build_system(plan, seed)
    if build is not None:
        if build.message_latency_us is not None:
            network.fix_latency(build.message_latency_us)
        kernel.ends_when_done = build.ends_when_done
        await build.setup(
            store, lambda type_, payload: tracer.record(0, "setup", "", "", type_, payload)
        )
        for address, host, start_us, factory in build.actors:
            kernel.spawn(address, host, factory, at_us=start_us)
        kernel.hardware_watchers = build.hardware_watchers
        roles += build.roles
    injector = FaultInjector(kernel)
    faults = fault_schedule(plan, seed, roles, network.topology)
    injector.schedule(faults.scenario)
    injector.schedule(faults.nemesis)
    if faults.heal_at_us is not None:
        kernel.at(faults.heal_at_us, injector.final_heal)
    # The setup and its trace are durable before the first event.
    await tracer.flush()
    arm_kill_switch(kernel)
    if on_kernel is not None:
        on_kernel(kernel)
    tolerated = frozenset(scenario.invariants.tolerate_errors)
    status, trace_hash = await drive(kernel, checking, end_us, False, tolerated)
    return run_result(plan, seed, out, kernel, status, trace_hash, wall0, injector.windows)


def starting_meta(plan: RunPlan, seed: int, until_us: int | None, mode: str) -> RunMeta:
    """The run's metadata as it starts (the actors' runner and the reference engine's)."""
    scenario = plan.scenario
    return RunMeta(
        scenario_name=scenario.name,
        scenario_text=plan.text,
        seed=seed,
        version=package_version(),
        mode=mode,
        # Stored only when it cuts the scenario short: `resume` stops there too.
        until_us=until_us if until_us is not None and until_us < scenario.duration else None,
    )


def run_end_us(scenario: Scenario, until_us: int | None) -> int:
    duration = int(scenario.duration)
    return duration if until_us is None else min(until_us, duration)


def make_kernel(
    scenario: Scenario,
    network: Network,
    *,
    seed: int,
    rng: RngStreams,
    tracer: Tracer,
    store: Store,
    speed: float | None,
) -> Kernel:
    """A kernel with the scenario's options, writing metrics to `store`."""
    ks = scenario.kernel
    # The store's own seeded bugs (a repository function's), as the kernel's are actors'.
    store.seed_bugs(frozenset(scenario.bugs))
    return Kernel(
        seed=seed,
        rng=rng,
        network=network,
        tracer=tracer,
        store=store,
        options=KernelOptions(
            yield_every_events=ks.yield_every_events,
            restart_delay_us=int(ks.restart_delay),
            restarts_max=ks.restarts_max,
            mailbox_len_max=ks.mailbox_len_max,
            stop_on_violation=scenario.invariants.stop_on_violation,
            bugs=frozenset(scenario.bugs),
        ),
        pacer=Pacer(speed) if speed is not None else None,
        metrics=MetricWriter(store),
    )


def build_system(plan: RunPlan, seed: int) -> SystemBuild | None:
    """The system's actors and setup for this seed (a pure function of both)."""
    if plan.system is None:
        return None
    scenario = plan.scenario
    return plan.system.build(
        plan.system_params, seed, int(scenario.duration), _base_dir(plan.source)
    )


@dataclass
class FaultSchedule:
    """Every fault a run injects: the scenario's, the nemesis' draw, its final heal.

    Each list is scheduled separately (fault indices in the trace count
    within their own list).
    """

    scenario: list[Fault]
    nemesis: list[Fault]
    heal_at_us: int | None


def fault_schedule(plan: RunPlan, seed: int, roles: list[str], topology: Topology) -> FaultSchedule:
    """The run's faults; the nemesis draws from the run seed's `faults` stream."""
    scenario = plan.scenario
    if not scenario.nemesis.enabled:
        return FaultSchedule(list(scenario.faults), [], None)
    drawn, heal_at = nemesis_schedule(
        scenario.nemesis,
        RngStreams(seed).stream("faults"),
        run_us=int(scenario.duration),
        actors=[a for a, *_ in plan.actors],
        roles=sorted(set(roles)),
        regions=topology.regions,
        nodes=sorted(topology.machines),
    )
    return FaultSchedule(list(scenario.faults), drawn, heal_at)


def ending_status(kernel: Kernel, tolerated: Collection[str]) -> str:
    """How a run that reached its end went: error (an actor's own exception), violated, ok."""
    if failing_errors(kernel.actor_errors, tolerated):
        return "error"
    return "violated" if kernel.violations else "ok"


async def drive(
    kernel: Kernel,
    checking: OnlineChecking,
    end_us: int,
    handle_signals: bool,
    tolerated: Collection[str] = (),
) -> tuple[str, str]:
    """Run the kernel to `end_us` and persist how it ended; returns (status, trace hash).

    Every exit path flushes the trace and commits the run's last group.
    """
    with stop_on_interrupt(kernel, handle_signals):
        return await _drive(kernel, checking, end_us, tolerated)


async def _drive(
    kernel: Kernel, checking: OnlineChecking, end_us: int, tolerated: Collection[str]
) -> tuple[str, str]:
    tracer = kernel.tracer
    status = "failed"
    try:
        await kernel.run(end_us)
        if kernel.stop_reason == KILLED:
            await tracer.settle()
            os.kill(os.getpid(), signal.SIGKILL)
        if kernel.stop_reason == "interrupted":
            status = "interrupted"
        else:
            kernel.stop_all()
            checking.finish()
            status = ending_status(kernel, tolerated)
            if kernel.cut_short:
                # Its work was not done: the figures cover only what was.
                tracer.record(kernel.now_us, "run", "", "", "cut-short", kernel.now_us)
    except asyncio.CancelledError:
        status = "interrupted"
        raise
    finally:
        tracer.record(kernel.now_us, "run", "", "", "end", status)
        trace_hash = tracer.hexdigest()
        await _finish(kernel.store, tracer, kernel, status, trace_hash)
    return status, trace_hash


def run_result(
    plan: RunPlan,
    seed: int,
    out: Path,
    kernel: Kernel,
    status: str,
    trace_hash: str,
    wall0: float,
    windows: list[tuple[int, int | None, str]],
) -> RunResult:
    return RunResult(
        scenario=plan.scenario.name,
        seed=seed,
        out=out,
        status=status,
        trace_hash=trace_hash,
        end_t_us=kernel.now_us,
        events=kernel.events,
        trace_events=kernel.tracer.seq,
        deliveries=kernel.deliveries,
        drops=kernel.drops,
        crashes=kernel.crashes,
        wall_s=time.perf_counter() - wall0,
        lag_s_max=kernel.pacer.lag_s_max if kernel.pacer is not None else None,
        violations=list(kernel.violations),
        fault_windows=list(windows),
        actor_errors=list(kernel.actor_errors),
        cut_short=kernel.cut_short and status != "interrupted",
    )


async def _finish(
    store: Store, tracer: Tracer, kernel: Kernel, status: str, trace_hash: str
) -> None:
    """Persist what the run produced: buffered trace and metrics, violations, the status."""
    await kernel.flush()
    await store.end_group()
    for seq, t_us, invariant, message in kernel.violations:
        await record_violation(store, seq, t_us, invariant, message)
    await finish_run(
        store,
        status=status,
        trace_hash=trace_hash,
        end_t_us=kernel.now_us,
        events=tracer.seq,
        violations=len(kernel.violations),
        actor_errors=len(kernel.actor_errors),
    )
