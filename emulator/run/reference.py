"""`mastemu run FILE --engine reference`: a system's reference engine instead of its actors.

A system may have a reference engine: a plain discrete-event loop over the
same policy and the same inputs, without a control plane (the cluster
system's is `actors/cluster/engine.py`). Such a run writes a run database
like any other (its metadata with mode `reference`, the system's setup facts,
the engine's result as `reference` trace events and key-value rows, how it
ended, and a trace hash over all of it), so `report`, `compare` and `check`
read it as they read a run of the actors. Nothing runs on the kernel: there
are no actors, messages or faults, and a scenario with faults is refused.
"""

from __future__ import annotations

import time
from pathlib import Path

from emulator.errors import InputError
from emulator.registry import ReferenceRun, schema_parts
from emulator.run.collector import run_collector
from emulator.run.runner import (
    RunPlan,
    RunResult,
    build_system,
    check_replaceable,
    remove_run_files,
    run_end_us,
    starting_meta,
    system_base_dir,
)
from emulator.trace import Tracer
from store import Store, kv
from store.lock import run_lock
from store.runs import finish_run, put_run_meta
from store.trace import TraceWriter

__all__ = ["MODE", "execute_reference"]

MODE = "reference"  # the run database's `mode`


def check_reference(plan: RunPlan) -> None:
    """InputError unless the scenario's system has a reference engine and nothing it ignores."""
    system = plan.system
    if system is None or not callable(getattr(system, "reference", None)):
        raise InputError(plan.source, "system.kind", "has no reference engine (--engine reference)")
    scenario = plan.scenario
    if scenario.faults or scenario.nemesis.enabled or plan.actors:
        raise InputError(
            plan.source,
            "faults",
            "the reference engine runs no actors: faults, a nemesis and [[actors]] need the actors",
        )


async def execute_reference(
    plan: RunPlan,
    *,
    seed: int,
    out: Path,
    until_us: int | None = None,
    replace: bool = True,
    command: str | None = None,
) -> RunResult:
    """Run the scenario's system on its reference engine into the run database `out`."""
    check_reference(plan)
    with run_lock(out, command), run_collector():
        check_replaceable(out, replace)
        remove_run_files(out)
        return await _execute(plan, seed, out, until_us)


async def _execute(plan: RunPlan, seed: int, out: Path, until_us: int | None) -> RunResult:
    scenario = plan.scenario
    end_us = run_end_us(scenario, until_us)
    wall0 = time.perf_counter()
    async with Store.open_ctx(out, schema_parts()) as store:
        await put_run_meta(store, starting_meta(plan, seed, until_us, MODE))
        await store.begin_group()
        tracer = Tracer(TraceWriter(store))
        tracer.record(0, "run", "", "", "start", {"scenario": scenario.name, "seed": seed})
        build = build_system(plan, seed)
        assert build is not None and plan.system is not None  # check_reference
        await build.setup(
            store, lambda type_, payload: tracer.record(0, "setup", "", "", type_, payload)
        )
        outcome: ReferenceRun = plan.system.reference(  # type: ignore[attr-defined]
            plan.system_params, seed, end_us, system_base_dir(plan)
        )
        for type_, payload in outcome.facts:
            tracer.record(outcome.end_us, "reference", "", "", type_, payload)
        for namespace, key, value in outcome.kv:
            await kv.put(store, namespace, key, value)
        cut_short = build.ends_when_done and not outcome.done
        if cut_short:
            tracer.record(outcome.end_us, "run", "", "", "cut-short", outcome.end_us)
        tracer.record(outcome.end_us, "run", "", "", "end", "ok")
        trace_hash = tracer.hexdigest()
        await tracer.flush()
        await store.end_group()
        await finish_run(
            store,
            status="ok",
            trace_hash=trace_hash,
            end_t_us=outcome.end_us,
            events=tracer.seq,
            violations=0,
        )
    return RunResult(
        scenario=scenario.name,
        seed=seed,
        out=out,
        status="ok",
        trace_hash=trace_hash,
        end_t_us=outcome.end_us,
        events=0,
        trace_events=tracer.seq,
        deliveries=0,
        drops=0,
        crashes=0,
        wall_s=time.perf_counter() - wall0,
        lag_s_max=None,
        cut_short=cut_short,
    )
