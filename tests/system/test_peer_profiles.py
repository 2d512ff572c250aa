"""Peer profiles in both machineries: the actor system and the reference engine agree.

Under `profile = "tiresias-sim"` and `profile = "gavel-sim"` every switch
the profile sets is read by the scheduler, the job accounts, the CM's job
agents and the report as by the engine: with the control plane's latency
at zero (`control_latency = "zero"`) the two give the same figures. The
report lists the conventions in force and, for a trace, what it did not
honour.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.cluster.engine import cluster_of, simulate
from actors.cluster.metrics import summarize
from actors.cluster.report import ClusterReporter
from actors.cluster.system import ClusterParams, cluster_shape, load_jobs, policy_params
from actors.policies.cluster.registry import cluster_policy
from emulator.registry import load_plugins
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import convert_scenario
from tests.support.paths import DATA

load_plugins()
INVARIANTS = ["lease-safety", "allocation", "gang", "auction", "preemption", "no-lost-workload"]
# The simulator's service distribution for Tiresias-G (GPU·s): flat index below 120.
GITTINS = {"service_values_gpu_s": [120.0, 600.0, 1200.0, 4800.0, 20000.0]}


def scenario(policy: str, semantics: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "peer-profile",
        "duration": "24h",
        "system": {
            "kind": "cluster",
            "policy": policy,
            "machines": 2,
            "gpus_per_machine": 4,
            "machines_per_rack": 2,
            "semantics": semantics | {"control_latency": "zero"},
            "workload": workload,
            "policy_params": {"tiresias-gittins": GITTINS},
        },
        "invariants": {"enabled": INVARIANTS},
    }


def run(raw: dict[str, Any], tmp_path: Path) -> RunResult:
    text = msgspec.json.encode(raw).decode()
    plan = plan_run(convert_scenario(raw, str(DATA / "scenario.toml")), text, str(DATA / "x.toml"))
    return asyncio.run(execute(plan, seed=1, out=tmp_path / "run-1.db"))


def engine(raw: dict[str, Any]) -> dict[str, Any]:
    system = {k: v for k, v in raw["system"].items() if k != "kind"}
    p = msgspec.convert(system, ClusterParams)
    jobs, _ = load_jobs(p, 1, DATA)
    machines = cluster_of(*cluster_shape(p))
    policy = cluster_policy(p.policy)
    return summarize(simulate(policy, policy_params(p), jobs, machines, p.semantics))


TIRESIAS_TRACE = {"trace": {"file": str(DATA / "tiresias_twelve.csv"), "format": "tiresias"}}
SHOCKWAVE_TRACE = {
    "trace": {
        "file": str(DATA / "shockwave_small.trace"),
        "format": "shockwave",
        "skip_bad_rows": True,
    },
    "throughputs": str(DATA / "throughputs_small.json"),
}


@pytest.mark.parametrize(
    ("profile", "policy", "workload"),
    [
        ("tiresias-sim", "fifo", TIRESIAS_TRACE),
        ("tiresias-sim", "srtf", TIRESIAS_TRACE),
        ("tiresias-sim", "tiresias-las", TIRESIAS_TRACE),
        ("tiresias-sim", "tiresias-gittins", TIRESIAS_TRACE),
        ("gavel-sim", "gavel-maxmin", SHOCKWAVE_TRACE),
        ("gavel-sim", "shockwave", SHOCKWAVE_TRACE),
    ],
)
def test_a_profile_runs_alike_in_the_actors_and_the_engine(
    profile: str, policy: str, workload: dict[str, Any], tmp_path: Path
) -> None:
    raw = scenario(policy, {"profile": profile}, workload)
    result = run(raw, tmp_path)
    assert result.status == "ok" and not result.violations
    got = asyncio.run(ClusterReporter().report(result.out))
    want = engine(raw)
    assert (got["finished"], got["failed"]) == (want["finished"], want["failed"])
    for key in ("makespan_s", "preemptions", "restart_overhead_s"):
        assert got[key] == pytest.approx(want[key], abs=1e-3), key
    assert got["jct_s"] == pytest.approx(want["jct_s"], abs=1e-3)
    assert got["utilization"] == pytest.approx(want["utilization"], abs=1e-6)
    assert got["semantics"] == want["semantics"]
    assert got["semantics"]["profile"] == profile


def test_the_report_lists_the_conventions_and_what_the_trace_did_not_honour(
    tmp_path: Path,
) -> None:
    raw = scenario("gavel-maxmin", {"profile": "gavel-sim", "comm_model": True}, SHOCKWAVE_TRACE)
    result = run(raw, tmp_path)
    got = asyncio.run(ClusterReporter().report(result.out))
    sem = got["semantics"]
    # The profile's presets, and the explicit switch that won over one of them.
    assert (sem["scheduling"], sem["round_s"], sem["restart_overhead_s"]) == ("round", 120.0, 20.0)
    assert (sem["batch_size"], sem["ftf_contention"], sem["one_gpu_servers"]) == (
        "trace",
        "trace",
        True,
    )
    assert sem["comm_model"] is True
    # 2 machines × 4 GPUs as 8 one-GPU servers.
    assert got["gpus"] == 8
    trace = got["trace"]
    honoured = {n["what"]: n for n in trace["not_honoured"]}
    assert "columns command, working_directory, num_steps_arg, needs_data_dir" in honoured
    # The ResNet-18 at 32 is not in the small table: its schedule is listed.
    assert honoured["batch-size schedule"]["rows"] >= 1
    assert got["restart_overhead_s"] > 0
    text = ClusterReporter().render_text([got])
    for label in ("semantics profile", "restart overhead (s)", "one-GPU servers", "percentiles"):
        assert label in text
