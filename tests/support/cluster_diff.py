"""Running one cluster trace through the actor system and through the reference engine.

A trace is a list of `TraceJobSpec` written as a Shockwave/Gavel TSV (the
one peer format with GPUs, arrival, duration, model, batch size and batch
mode), so both machineries load it the way a user's trace is loaded. The
actor run goes through the runner (client, scheduler, cluster manager, job
agents); the reference run through `mastemu run --engine reference`'s
library call. Both are read back with the cluster reporter, whose `jobs`
rows (`report --jobs`) are what the differential tests compare.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import strategies as st

from actors.cluster.report import ClusterReporter
from actors.cluster.semantics import Semantics
from emulator.registry import load_plugins
from emulator.run.reference import execute_reference
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import convert_scenario

load_plugins()

# Models of the Shockwave traces and of Dally/Tiresias (the performance model knows them all).
MODELS = ("ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation", "VGG19", "BERT")
BATCH_SIZES = (16, 32, 64, 128)
MODES = ("static", "accordion", "gns")
GPUS = (1, 1, 2, 3, 4, 8, 16)  # 16 is wider than most clusters
# Arrival and run times (s) with collisions on purpose: same-instant arrivals and ends.
ARRIVALS_S = (0, 0, 1, 30, 60, 120, 121, 600)
DURATIONS_S = (1, 30, 59, 60, 120, 240, 600, 1800)
# Values drawn for the semantics' float switches (a float switch not listed keeps its default).
FLOAT_SWITCHES: dict[str, tuple[float, ...]] = {
    "round_s": (60.0, 120.0, 300.0),
    "restart_overhead_s": (0.0, 20.0),
}
# Every round length above and every policy's default (120 s) is a multiple of this.
ROUND_GRAIN_S = 60
assert all(r % ROUND_GRAIN_S == 0 for r in FLOAT_SWITCHES["round_s"])


@dataclass(frozen=True)
class TraceJobSpec:
    """One job of a generated trace, as its TSV row says it."""

    gpus: int
    arrival_s: int
    duration_s: float
    model: str
    batch_size: int
    mode: str


@dataclass(frozen=True)
class Cluster:
    machines: int
    gpus_per_machine: int
    machines_per_rack: int


def write_trace(path: Path, jobs: list[TraceJobSpec]) -> None:
    """The jobs as a Shockwave/Gavel TSV (twelve tab-separated columns, no header)."""
    rows = [
        "\t".join(
            [
                f"{j.model} (batch size {j.batch_size})",
                "python3 main.py",
                "%s/wd",
                "--num_steps",
                "1",
                str(1000 + round(10 * j.duration_s)),
                str(j.gpus),
                j.mode,
                "1",
                "-1",
                str(j.duration_s),
                str(j.arrival_s),
            ]
        )
        for j in jobs
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def scenario(
    policy: str, cluster: Cluster, semantics: dict[str, Any], trace: str, duration: str = "72h"
) -> dict[str, Any]:
    """A cluster scenario over the trace file `trace` (relative to the scenario's folder)."""
    return {
        "name": "differential",
        "duration": duration,
        "system": {
            "kind": "cluster",
            "policy": policy,
            "machines": cluster.machines,
            "gpus_per_machine": cluster.gpus_per_machine,
            "machines_per_rack": cluster.machines_per_rack,
            "semantics": semantics,
            "workload": {"trace": {"file": trace, "format": "shockwave"}},
        },
        "invariants": {"enabled": ["lease-safety", "allocation", "no-lost-workload"]},
    }


def _plan(raw: dict[str, Any], folder: Path) -> Any:
    source = str(folder / "scenario.json")
    text = msgspec.json.encode(raw).decode()
    return plan_run(convert_scenario(raw, source), text, source)


def run_actors(raw: dict[str, Any], folder: Path, name: str = "actors") -> RunResult:
    return asyncio.run(execute(_plan(raw, folder), seed=1, out=folder / f"{name}.db"))


def run_reference(raw: dict[str, Any], folder: Path, name: str = "reference") -> RunResult:
    return asyncio.run(execute_reference(_plan(raw, folder), seed=1, out=folder / f"{name}.db"))


def report(result: RunResult) -> dict[str, Any]:
    """The cluster report of a run (`mastemu report --json`)."""
    return asyncio.run(ClusterReporter().report(result.out))


# ---- hypothesis strategies -------------------------------------------------------------
def clusters() -> st.SearchStrategy[Cluster]:
    return st.builds(
        Cluster,
        machines=st.integers(1, 4),
        gpus_per_machine=st.sampled_from((1, 2, 4)),
        machines_per_rack=st.integers(1, 2),
    )


def traces(
    jobs_max: int = 8, *, generic_times: bool = False
) -> st.SearchStrategy[list[TraceJobSpec]]:
    """Traces of 1..`jobs_max` jobs; `generic_times`: no two events at one instant by construction.

    By default arrivals and run times collide on purpose (`ARRIVALS_S`,
    `DURATIONS_S`), which the zero-latency comparison wants. With the
    control plane's default latencies, events the engine sees at one instant
    reach the actors' scheduler a few ms apart, and a policy decides on the
    first before it sees the others: two jobs submitted together, two jobs
    started together with equal run times ending together (the first end
    gives another job a placement the engine's would not), a job ending on a
    round's boundary, a job arriving on one (the engine's round counts it; the
    actors' round began ms before it was heard, and it waits a whole round:
    gandiva-fair 11% apart on a 10-job trace, 2026-11-29). So the comparison
    at default latencies draws `generic_times`: no two arrivals in one
    second, none on a round boundary after 0 (every `round_s` drawn is a
    multiple of `ROUND_GRAIN_S`), and run times with a fraction of a second
    in 10-ms steps that no two jobs share, so no two ends coincide unless the
    schedule itself lines them up.
    """
    if generic_times:
        whole = st.sampled_from(DURATIONS_S) | st.integers(1, 3600)
        hundredths = st.integers(1, 99)
        durations = st.builds(lambda s, c: s + c / 100, whole, hundredths)
        job = st.builds(
            TraceJobSpec,
            gpus=st.sampled_from(GPUS),
            arrival_s=st.integers(0, 900).filter(lambda s: s % ROUND_GRAIN_S != 0 or s == 0),
            duration_s=durations,
            model=st.sampled_from(MODELS),
            batch_size=st.sampled_from(BATCH_SIZES),
            mode=st.sampled_from(MODES),
        )
        distinct = (lambda j: j.arrival_s, lambda j: round(j.duration_s % 1 * 100))
        return st.lists(job, min_size=1, max_size=jobs_max, unique_by=distinct)
    job = st.builds(
        TraceJobSpec,
        gpus=st.sampled_from(GPUS),
        arrival_s=st.sampled_from(ARRIVALS_S) | st.integers(0, 900),
        duration_s=st.sampled_from(DURATIONS_S) | st.integers(1, 3600),
        model=st.sampled_from(MODELS),
        batch_size=st.sampled_from(BATCH_SIZES),
        mode=st.sampled_from(MODES),
    )
    return st.lists(job, min_size=1, max_size=jobs_max)


def switch_values() -> dict[str, tuple[Any, ...]]:
    """Every value of every semantic switch but `control_latency`, read off `Semantics`.

    Literal and bool switches give all their values, float ones those of
    FLOAT_SWITCHES: a switch added to `Semantics` is drawn without a change here.
    """
    out: dict[str, tuple[Any, ...]] = {}
    for f in msgspec.inspect.type_info(Semantics).fields:
        if f.name == "control_latency":
            continue
        kinds = f.type.types if isinstance(f.type, msgspec.inspect.UnionType) else (f.type,)
        for kind in kinds:
            if isinstance(kind, msgspec.inspect.LiteralType):
                out[f.name] = tuple(kind.values)
            elif isinstance(kind, msgspec.inspect.BoolType):
                out[f.name] = (False, True)
            elif isinstance(kind, msgspec.inspect.FloatType) and f.name in FLOAT_SWITCHES:
                out[f.name] = FLOAT_SWITCHES[f.name]
    return out


def semantics(fixed: dict[str, Any] | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """`[system.semantics]` tables: each switch left out (its profile's or default) or drawn."""
    fixed = fixed or {}
    parts = {
        name: st.none() | st.sampled_from(values)
        for name, values in switch_values().items()
        if name not in fixed
    }

    def table(drawn: dict[str, Any]) -> dict[str, Any]:
        return {**{k: v for k, v in drawn.items() if v is not None}, **fixed}

    return st.fixed_dictionaries(parts).map(table)


def core_switches() -> list[dict[str, Any]]:
    """Every combination of the switches every simulator in the field has an opinion on."""
    names = ("scheduling", "preemption_cost", "comm_model", "count_failed", "ftf_contention")
    values = switch_values()
    combos: list[dict[str, Any]] = [{}]
    for name in names:
        combos = [{**c, name: v} for c in combos for v in values[name]]
    return combos


__all__ = [
    "Cluster",
    "TraceJobSpec",
    "clusters",
    "core_switches",
    "report",
    "run_actors",
    "run_reference",
    "scenario",
    "semantics",
    "switch_values",
    "traces",
    "write_trace",
]
