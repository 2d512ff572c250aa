"""The built-in `shockwave-fairness` scenario against Shockwave §8.3/§8.5, on the reference engine.

The test keeps every setting of the file (workload mix, rounds, semantics,
policy params) and shrinks cluster and job count by four together (8 GPUs,
30 jobs), which keeps jobs per GPU the same, so that Shockwave's planner
runs in about two seconds per seed.

Measured at that size (avg JCT s / makespan s / worst ρ / unfair fraction):

    seed  shockwave                     gavel-maxmin                  themis
    1     25829  74757 1.31 0.77        26324  88655 2.15 0.67        23815  92508 1.69 0.53
    2     20443  78347 1.38 0.73        21981  86159 4.35 0.80        19029 102075 1.50 0.37
    3     29292 144562 1.48 0.93        31495 136780 6.41 0.80        27083 151348 1.65 1.00
    4     21766  56256 1.36 0.90        24368  66548 4.38 0.73        20331  74901 1.65 0.77
    5     21822  61419 1.42 0.93        23576  64783 3.89 0.80        19875  75987 1.68 0.83
    6     36895  84857 1.36 0.90        36116  83170 3.97 0.80        34302  93260 1.56 0.80
    7     21278  83797 1.38 0.83        23498  91870 4.14 0.73        20166 107328 1.60 0.53
    8     20816  55597 1.37 0.73        21552  62377 4.08 0.77        19818  79489 1.90 0.67

On every seed Shockwave's worst ρ is the lowest and its makespan within 6%
of the best (lower than both on six), its average JCT within 10% of
Themis's. The unfair fraction is not reproduced: Shockwave's is the
highest on most seeds (the xfail below says why). Full size (32 GPUs, 120
jobs, seed 1): shockwave 21805 / 116083 / 1.40 / 0.87, gavel-maxmin 23535 /
127578 / 4.13 / 0.68, themis 20527 / 137262 / 1.64 / 0.68.
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
POLICIES = ("shockwave", "gavel-maxmin", "themis")


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


@pytest.fixture(scope="module", params=[1, 3])
def runs(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    """The three policies on one seed (seed 3 is the hardest of the eight above)."""
    return {p: _run(p, request.param) for p in POLICIES}


def test_scenario_is_the_papers_setting() -> None:
    params = msgspec.convert(_raw_system(), ClusterParams)
    assert 32 <= params.gpus <= 256
    assert params.semantics.scheduling == "round" and params.semantics.round_s == 120
    arrivals = params.workload.gavel.arrivals
    # Jobs per GPU once all have arrived: "roughly three" (§8.5).
    assert 3 <= arrivals.num_jobs / params.gpus <= 4


def test_shockwave_has_the_lowest_worst_ftf_at_a_similar_makespan(
        runs: dict[str, dict[str, Any]]) -> None:
    sw, baselines = runs["shockwave"], [runs["gavel-maxmin"], runs["themis"]]
    for got in runs.values():
        assert got["finished"] == got["jobs"]
        # The time-averaged contention the FTF metric divides by (2.2–2.7 measured).
        assert 2.0 <= got["contention_avg"] <= 3.0
    # §8.3/§8.5: the lowest worst ρ (seed 1: 1.31 vs 2.15 / 1.69; seed 3: 1.48 vs 6.41 / 1.65).
    assert all(sw["ftf"]["worst"] < b["ftf"]["worst"] for b in baselines)
    # "Similar" makespan (§8.3 claims 1.3x better): within 10% of the best baseline
    # (seed 1: 74757 vs 88655 s; seed 3: 144562 vs 136780 s, +5.7%).
    assert sw["makespan_s"] <= 1.10 * min(b["makespan_s"] for b in baselines)
    # "Similar average JCT" (§8.3): within 15% of the best (measured 5–10% above Themis).
    assert sw["jct_s"]["avg"] <= 1.15 * min(b["jct_s"]["avg"] for b in baselines)


@pytest.mark.xfail(strict=True, reason=(
    "Not reproduced: Shockwave's budgets ρ̂^k equalise ρ across jobs, and with contention "
    "counted in jobs (App. G, the artifact's evaluation) the egalitarian shares of all jobs "
    "exceed the cluster (mean gang 1.6 GPUs), so most jobs end just above 1; our Themis re-ranks "
    "by fresh ρ every round and, with batch-size speed-ups of at most 1.7x (Fig. 2a), loses "
    "nothing by being reactive (an oracle ρ gives the same results). The paper's 4% came from "
    "the artifact's metric (N = jobs in the trace / GPUs, ρ > 1.05) and hard FTF constraints "
    "in its solver that the paper does not describe."))
def test_shockwave_has_the_lowest_unfair_fraction(runs: dict[str, dict[str, Any]]) -> None:
    sw = runs["shockwave"]
    assert all(sw["ftf"]["unfair_fraction"] < runs[b]["ftf"]["unfair_fraction"]
               for b in ("gavel-maxmin", "themis"))
