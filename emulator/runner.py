"""One run: scenario → world → kernel → trace in a run database.

Everything the user can get wrong is checked before the run database is
created, so bad input never leaves a half-made run behind. Once the run has
started, every exit path (normal end, invariant stop, Ctrl-C, an internal
error) flushes the buffered trace, writes the run's status and closes the
connection, so the database always holds the events up to that point.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import msgspec

from emulator.actor import Actor
from emulator.errors import ScenarioError
from emulator.faults import FaultInjector, nemesis_schedule
from emulator.invariants import OnlineChecking, make_checkers
from emulator.kernel import Kernel, KernelOptions
from emulator.network import build_network
from emulator.pacing import Pacer
from emulator.registry import ACTOR_KINDS, SYSTEMS, System, load_plugins
from emulator.rng import RngStreams
from emulator.scenario import Scenario, WorldSpec, check_references, decode_params
from emulator.trace import Tracer
from store import Store
from store.runs import RunMeta, finish_run, put_run_meta, record_violation
from store.trace import MetricWriter, TraceWriter


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


@dataclass
class Plan:
    """A validated scenario, ready to run: actor factories resolved, params decoded."""

    scenario: Scenario
    text: str
    source: str
    actors: list[tuple[str, str, int, Callable[[], Actor]]]
    roles: list[str]
    system: System | None = None
    system_params: Any = None


def plan_run(scenario: Scenario, text: str, source: str) -> Plan:
    """Resolve the system, actor kinds, parameters and invariant names.

    Raises ScenarioError naming the key path if anything is wrong.
    """
    load_plugins()
    system, system_params, scenario = _plan_system(scenario, source)
    actors = []
    roles: set[str] = set()
    for i, spec in enumerate(scenario.actors):
        cls = ACTOR_KINDS.get(spec.kind)
        if cls is None:
            known = ", ".join(sorted(ACTOR_KINDS)) or "none"
            raise ScenarioError(
                source, f"actors[{i}].kind", f"unknown kind {spec.kind!r} ({known})"
            )
        params: Any = None
        if cls.Params is not None:
            params = decode_params(cls.Params, spec.params, source, f"actors[{i}].params")
        elif spec.params:
            raise ScenarioError(source, f"actors[{i}].params", f"{spec.kind} takes no params")
        if isinstance(getattr(params, "role", None), str):
            roles.add(params.role)
        factory = _factory(cls, spec.address, params)
        actors.append((spec.address, spec.host, int(spec.start_at), factory))
    for i, name in enumerate(scenario.invariants.enabled):
        try:
            make_checkers([name])
        except KeyError:
            raise ScenarioError(
                source, f"invariants.enabled[{i}]", f"unknown invariant {name!r}"
            ) from None
    return Plan(scenario, text, source, actors, sorted(roles), system, system_params)


def _plan_system(scenario: Scenario, source: str) -> tuple[System | None, Any, Scenario]:
    """Validate `[system]` and give the scenario the system's regions as its world."""
    if not scenario.system:
        return None, None, scenario
    raw = dict(scenario.system)
    kind = raw.pop("kind")
    system = SYSTEMS.get(kind)
    if system is None:
        known = ", ".join(sorted(SYSTEMS)) or "none"
        raise ScenarioError(source, "system.kind", f"unknown system {kind!r} ({known})")
    params = decode_params(system.Params, raw, source, "system")
    try:
        system.check(params, _base_dir(source))
    except ValueError as error:
        raise ScenarioError(source, "system", str(error)) from None
    regions = system.regions(params)
    if scenario.world is not None:
        regions = regions + list(scenario.world.regions)
    scenario = msgspec.structs.replace(scenario, world=WorldSpec(regions=regions))
    check_references(scenario, source, system.addresses(params))
    return system, params, scenario


def _base_dir(source: str) -> Path:
    """Where a scenario's relative file names are resolved: its own folder."""
    path = Path(source)
    return path.parent if path.is_file() else Path.cwd()


def _factory(cls: type[Actor], address: str, params: Any) -> Callable[[], Actor]:
    return lambda: cls(address, params)


def remove_run_files(out: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(out) + suffix).unlink(missing_ok=True)


async def execute(
    plan: Plan,
    *,
    seed: int,
    out: Path,
    speed: float | None = None,
    until_us: int | None = None,
    progress: Callable[[Kernel], None] | None = None,
    handle_signals: bool = False,
    on_kernel: Callable[[Kernel], None] | None = None,
) -> RunResult:
    """Run a planned scenario to its end (or `until_us`) and return the result."""
    scenario = plan.scenario
    end_us = int(scenario.duration) if until_us is None else min(until_us, int(scenario.duration))
    remove_run_files(out)
    wall0 = time.perf_counter()
    async with Store.open_ctx(out) as store:
        await put_run_meta(
            store,
            RunMeta(
                scenario_name=scenario.name,
                scenario_text=plan.text,
                seed=seed,
                version=package_version(),
                mode="virtual" if speed is None else f"scaled x{speed:g}",
            ),
        )
        tracer = Tracer(TraceWriter(store))
        rng = RngStreams(seed)
        network = build_network(scenario.world.regions, scenario.network, rng)
        ks = scenario.kernel
        kernel = Kernel(
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
            ),
            pacer=Pacer(speed) if speed is not None else None,
            metrics=MetricWriter(store),
        )
        kernel.progress = progress
        checking = OnlineChecking(kernel, make_checkers(scenario.invariants.enabled))
        tracer.record(0, "run", "", "", "start", {"scenario": scenario.name, "seed": seed})
        roles = list(plan.roles)
        for address, host, start_us, factory in plan.actors:
            kernel.spawn(address, host, factory, at_us=start_us)
        if plan.system is not None:
            build = plan.system.build(
                plan.system_params, seed, int(scenario.duration), _base_dir(plan.source)
            )
            await build.setup(
                store, lambda type_, payload: tracer.record(0, "setup", "", "", type_, payload)
            )
            for address, host, start_us, factory in build.actors:
                kernel.spawn(address, host, factory, at_us=start_us)
            kernel.hardware_watchers = build.hardware_watchers
            roles += build.roles
        injector = FaultInjector(kernel)
        injector.schedule(list(scenario.faults))
        if scenario.nemesis.enabled:
            faults, heal_at = nemesis_schedule(
                scenario.nemesis,
                rng.stream("faults"),
                run_us=int(scenario.duration),
                actors=[a for a, *_ in plan.actors],
                roles=sorted(set(roles)),
                regions=network.topology.regions,
                nodes=sorted(network.topology.machines),
            )
            injector.schedule(faults)
            kernel.at(heal_at, injector.final_heal)
        if on_kernel is not None:
            on_kernel(kernel)
        loop = asyncio.get_running_loop()
        if handle_signals:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGINT, kernel.request_stop, "interrupted")
        status = "failed"
        try:
            await kernel.run(end_us)
            if kernel.stop_reason == "interrupted":
                status = "interrupted"
            else:
                kernel.stop_all()
                checking.finish()
                status = "violated" if kernel.violations else "ok"
        except asyncio.CancelledError:
            status = "interrupted"
            raise
        finally:
            tracer.record(kernel.now_us, "run", "", "", "end", status)
            trace_hash = tracer.hexdigest()
            await _finish(store, tracer, kernel, status, trace_hash)
            if handle_signals:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(signal.SIGINT)
    return RunResult(
        scenario=scenario.name,
        seed=seed,
        out=out,
        status=status,
        trace_hash=trace_hash,
        end_t_us=kernel.now_us,
        events=kernel.events,
        trace_events=tracer.seq,
        deliveries=kernel.deliveries,
        drops=kernel.drops,
        crashes=kernel.crashes,
        wall_s=time.perf_counter() - wall0,
        lag_s_max=kernel.pacer.lag_s_max if kernel.pacer is not None else None,
        violations=list(kernel.violations),
        fault_windows=list(injector.windows),
    )


async def _finish(
    store: Store, tracer: Tracer, kernel: Kernel, status: str, trace_hash: str
) -> None:
    """Persist what the run produced: buffered trace and metrics, violations, the status."""
    await kernel.flush()
    for seq, t_us, invariant, message in kernel.violations:
        await record_violation(store, seq, t_us, invariant, message)
    await finish_run(
        store,
        status=status,
        trace_hash=trace_hash,
        end_t_us=kernel.now_us,
        events=tracer.seq,
        violations=len(kernel.violations),
    )
