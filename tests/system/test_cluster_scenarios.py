"""The built-in cluster-policy scenarios: the papers' directions, and each runs in the actors.

Directions are checked on the reference engine with the scenario file's own
settings (scaled down where the full size takes minutes; the full sizes are
`slow`); the actor runs of the same files agree with the engine within a few
percent (tests/system/test_cluster_system.py), which `mastemu compare` shows.
"""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.cluster.engine import cluster_of, simulate
from actors.cluster.metrics import summarize
from actors.cluster.report import ClusterReporter
from actors.cluster.system import ClusterParams, policy_params, trace_jobs
from actors.policies.cluster.registry import cluster_policy
from emulator.registry import builtin_scenarios, load_plugins
from emulator.run.runner import execute, plan_run
from emulator.run.scenario import convert_scenario
from store import Store
from store.trace import iter_trace
from tests.support.paths import SCENARIOS

load_plugins()
CLUSTER_SCENARIOS = ["tiresias-philly", "dally-racks", "dally-cm-failover"]


def raw(name: str) -> dict[str, Any]:
    return tomllib.loads((SCENARIOS / f"{name}.toml").read_text())


def on_engine(name: str, policy: str, **workload: Any) -> dict[str, Any]:
    """The scenario's system under `policy` on the reference engine; `workload` overrides."""
    system = {k: v for k, v in raw(name)["system"].items() if k != "kind"}
    system["policy"] = policy
    for key, value in workload.items():
        system["workload"][system["workload"]["generator"]][key] = value
    p = msgspec.convert(system, ClusterParams)
    machines = cluster_of(p.machines, p.gpus_per_machine, p.machines_per_rack)
    jobs = trace_jobs(p, 1, SCENARIOS)
    return summarize(simulate(cluster_policy(policy), policy_params(p), jobs, machines))


def avg_jct(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    return {p: r["jct_s"]["avg"] for p, r in results.items()}


def test_cluster_scenarios_are_built_in() -> None:
    assert set(CLUSTER_SCENARIOS) <= set(builtin_scenarios())


def test_tiresias_philly_las_well_below_yarn_cs_and_close_to_srtf() -> None:
    # 200 of the scenario's 480 jobs (measured, seed 1: fifo 1907 s, best-effort
    # 963, srtf 841, gandiva 1270, tiresias-las 1031, tiresias-gittins 1027).
    # Tiresias Table 5 (production trace, normalised by Tiresias-L): YARN-CS
    # 2.41x, Best-effort 1.50x, SRTF 1.00x, Gandiva 2.00x, Tiresias-G 0.97x; on
    # the testbed workload this scenario models, YARN-CS 5.5x and SRTF 0.74x
    # (§5.2, §5.3.1), best-effort not measured. Here best-effort, which only
    # lifts YARN-CS's head-of-line blocking, comes out level with LAS (0.93x;
    # 0.97–1.53x over seeds 1–5 at full size), so only its gain over YARN-CS is
    # checked.
    policies = ["fifo", "best-effort", "srtf", "gandiva", "tiresias-las", "tiresias-gittins"]
    arrivals = {"rate_per_s": 1 / 30, "num_jobs": 200}
    jct = avg_jct({p: on_engine("tiresias-philly", p, arrivals=arrivals) for p in policies})
    las = jct["tiresias-las"]
    assert jct["fifo"] > 1.7 * las
    assert jct["gandiva"] > 1.15 * las
    assert jct["best-effort"] < jct["fifo"] / 1.5
    assert las < 1.5 * jct["srtf"]
    assert jct["tiresias-gittins"] < 1.2 * las


def test_dally_racks_makespan_and_communication_below_tiresias_and_gandiva() -> None:
    # Two racks (16 machines) and a batch of 60 jobs (measured, seed 1: makespan
    # dally 14307 s, tiresias-las 1.48e6, gandiva 1.37e6; communication overhead
    # 592 s, 1.66e6, 1.43e6): the others spread network-sensitive models such
    # as MobileNetV3 (196x at the network tier, Dally Table I) across racks.
    system = raw("dally-racks")["system"]
    assert (system["machines_per_rack"], system["gpus_per_machine"]) == (8, 8)
    results = {}
    for policy in ("dally", "tiresias-las", "gandiva"):
        sys_ = {**system, "machines": 16, "policy": policy}
        sys_.pop("kind")
        sys_["workload"] = {
            "generator": "dally",
            "dally": {"arrivals": {"pattern": "batch", "num_jobs": 60}},
        }
        p = msgspec.convert(sys_, ClusterParams)
        jobs = trace_jobs(p, 1, SCENARIOS)
        machines = cluster_of(p.machines, p.gpus_per_machine, p.machines_per_rack)
        run = simulate(cluster_policy(policy), policy_params(p), jobs, machines)
        results[policy] = summarize(run)
    for other in ("tiresias-las", "gandiva"):
        assert results["dally"]["makespan_s"] < results[other]["makespan_s"]
        assert results["dally"]["comm_overhead_s"] < results[other]["comm_overhead_s"]


@pytest.mark.slow
def test_tiresias_philly_full_size() -> None:
    # The whole 480-job trace (seed 1): fifo 7949 s, best-effort 2736, srtf 1776,
    # gandiva 3980, tiresias-las 2823, tiresias-gittins 2894 (before the heavy
    # tail of actors/cluster/workloads.py: 12979, 5008, 2963, 5969, 5210, 5091).
    jct = avg_jct({p: on_engine("tiresias-philly", p) for p in ("fifo", "srtf", "tiresias-las")})
    assert jct["fifo"] > 2 * jct["tiresias-las"]
    assert jct["tiresias-las"] < 2 * jct["srtf"]


@pytest.mark.parametrize("name", CLUSTER_SCENARIOS)
def test_each_cluster_scenario_runs_cleanly_in_the_actors(name: str, tmp_path: Path) -> None:
    scenario = raw(name)
    text = msgspec.json.encode(scenario).decode()
    plan = plan_run(convert_scenario(scenario, name), text, name)
    result = asyncio.run(execute(plan, seed=1, out=tmp_path / "run.db", until_us=1_200_000_000))
    assert result.status == "ok" and not result.violations
    report = asyncio.run(ClusterReporter().report(result.out))
    assert report["finished"] > 0


def test_dally_cm_failover_a_follower_takes_over_and_every_job_finishes(tmp_path: Path) -> None:
    scenario = raw("dally-cm-failover")
    text = msgspec.json.encode(scenario).decode()
    plan = plan_run(convert_scenario(scenario, "dally-cm-failover"), text, "dally-cm-failover")
    result = asyncio.run(execute(plan, seed=1, out=tmp_path / "run.db"))
    assert result.status == "ok" and not result.violations
    report = asyncio.run(ClusterReporter().report(result.out))
    # `jobs` holds the per-job rows (`report --jobs`); the count is `jobs_total`.
    assert report["finished"] == report["jobs_total"] == len(report["jobs"]) == 150
    assert not report["cut_short"]

    async def leaders() -> list[tuple[int, str, int]]:
        async with Store.open_ctx(result.out) as store:
            return [
                (r.t_us, r.src, r.payload["epoch"])
                async for r in iter_trace(store, kinds=("decision",))
                if r.type == "lease.leader" and r.payload["role"] == "cm/dc/c0"
            ]

    first, second, *_ = asyncio.run(leaders())
    assert first[1] != second[1] and second[2] == first[2] + 1
    assert 3_600_000_000 < second[0] < 3_600_000_000 + 60_000_000  # within ttl + renewal
