"""The built-in `shockwave-fairness` scenario against Shockwave §8.3/§8.5, on the reference engine.

The scenario's full size (32 GPUs, 120 jobs) takes about two minutes for
Shockwave's planner, so the test keeps every setting of the file (workload
mix, rounds, semantics, policy params) and shrinks cluster and job count
by four together (8 GPUs, 30 jobs), which keeps jobs per GPU the same.

Measured at that size (worst ρ / unfair fraction / makespan s):

    seed  shockwave            gavel-maxmin         themis
    1     2.11 / 0.90 /  84713  2.15 / 0.67 /  88655  1.69 / 0.53 /  92508
    2     2.04 / 0.90 /  89386  4.35 / 0.80 /  86159  1.50 / 0.37 / 102075
    3     2.53 / 1.00 / 144998  6.41 / 0.80 / 136780  1.65 / 1.00 / 151348
    4     2.82 / 1.00 /  68174  4.38 / 0.73 /  66548  1.65 / 0.77 /  74901
    5     2.51 / 0.93 /  69617  3.89 / 0.80 /  64783  1.68 / 0.83 /  75987

and at full size, seed 1: shockwave 3.34 / 0.97 / 132504, gavel-maxmin
4.13 / 0.68 / 127576, themis 1.64 / 0.68 / 137382. Only part of the
paper's direction holds: Shockwave's worst ρ is below Gavel's and its
makespan below Themis's, but Themis has the lowest worst ρ and Shockwave
the highest unfair fraction, so only the holding parts are asserted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.cluster_metrics import contention_factors, summarize
from actors.cluster_sim import cluster_of, simulate
from actors.cluster_system import ClusterParams, policy_params, trace_jobs
from actors.policies.cluster_registry import cluster_policy
from emulator.scenario import parse_raw

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "shockwave-fairness.toml"
SHRINK = 4


def _raw_system() -> dict[str, Any]:
    raw = parse_raw(SCENARIO.read_text(), str(SCENARIO))
    system = dict(raw["system"])
    system.pop("kind")
    return system


def _run(policy: str, seed: int, shrink: int = SHRINK) -> dict[str, Any]:
    system = _raw_system()
    system["policy"] = policy
    system["machines"] = system["machines"] // shrink
    workload = dict(system["workload"])
    gavel = dict(workload["gavel"])
    arrivals = dict(gavel["arrivals"])
    arrivals["num_jobs"] = arrivals["num_jobs"] // shrink
    gavel["arrivals"], workload["gavel"], system["workload"] = arrivals, gavel, workload
    params = msgspec.convert(system, ClusterParams)
    jobs = trace_jobs(params, seed, SCENARIO.parent)
    machines = cluster_of(params.machines, params.gpus_per_machine, params.machines_per_rack)
    result = simulate(cluster_policy(policy), policy_params(params), jobs, machines,
                      params.semantics)
    out = summarize(result)
    factors = contention_factors(result)
    out["contention_avg"] = sum(factors.values()) / len(factors)
    out["jobs"] = len(jobs)
    return out


def test_scenario_is_the_papers_setting() -> None:
    params = msgspec.convert(_raw_system(), ClusterParams)
    assert 32 <= params.gpus <= 256
    assert params.semantics.scheduling == "round" and params.semantics.round_s == 120
    arrivals = params.workload.gavel.arrivals
    # Jobs per GPU once all have arrived: "roughly three" (§8.5).
    assert 3 <= arrivals.num_jobs / params.gpus <= 4


@pytest.mark.parametrize("seed", [2, 5])
def test_shockwave_fairer_than_gavel_and_shorter_than_themis(seed: int) -> None:
    sw, gavel, themis = (_run(p, seed) for p in ("shockwave", "gavel-maxmin", "themis"))
    for got in (sw, gavel, themis):
        assert got["finished"] == got["jobs"]
        # The time-averaged contention the FTF metric divides by (2.3–2.7 measured).
        assert 2.0 <= got["contention_avg"] <= 3.0
    # seed 2: 2.04 vs 4.35; seed 5: 2.51 vs 3.89.
    assert sw["ftf"]["worst"] < gavel["ftf"]["worst"]
    # seed 2: 89386 vs 102075 s; seed 5: 69617 vs 75987 s.
    assert sw["makespan_s"] < themis["makespan_s"]
    # "At a similar makespan" as Gavel: within 10% (seed 2: +3.7%, seed 5: +7.5%).
    assert sw["makespan_s"] <= 1.10 * gavel["makespan_s"]
