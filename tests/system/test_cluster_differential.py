"""cluster: the actor system and the reference engine agree, job for job, on generated traces.

Hypothesis draws a cluster, a trace (job sizes, arrivals and durations that
collide on purpose, models, batch sizes, batch modes) and a value for every
semantic switch (`tests/support/cluster_diff.py` reads them off `Semantics`),
and each trace runs through the actors (client, scheduler, cluster manager,
job agents) and through the engine (`mastemu run --engine reference`):

- with the control plane's latency at zero (`control_latency = "zero"`),
  every job's report row (`report --jobs`: first start, end, JCT, queueing
  delay, preemptions, ρ) and every figure of the report are equal;
- with the default latencies, on event-driven runs of traces whose events
  do not coincide by construction, the average JCT is within 1% (`JCT_REL` lists
  the policies whose choices hang on milliseconds, with what was measured)
  and policies further apart than that rank the same.

The default run draws a few examples per policy; `pytest -m slow` many more,
and every combination of the core switches for every policy.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from actors.policies.cluster.registry import names
from tests.support.cluster_diff import (
    Cluster,
    TraceJobSpec,
    clusters,
    core_switches,
    report,
    run_actors,
    run_reference,
    scenario,
    semantics,
    traces,
    write_trace,
)
from tests.support.examples import examples

POLICIES = names()
# With the default latencies a decision can see progress a few ms apart from
# the engine's and, where two choices are that close, take the other one; from
# there the runs part. The traces avoid coincidences by construction
# (`traces(generic_times=True)`), but a schedule still lines events up: jobs
# started by one decision on as many GPUs attain equal services, µs apart in
# the actors. Measured (2026-11-27) on three samples of generated traces of
# up to 12 jobs (400, 154 and 219), actors against engine, average JCT: every
# other policy within 0.3% on all of them; these, on a few traces each:
# - gandiva: time slices end on quanta counted from decisions a few ms apart;
#   jobs trade slices and part (10.8%, 3.8%);
# - gavel-maxmin: its rounds share GPUs between equal jobs by ms of service
#   (1.2%, 11%, 1.1%);
# - dally, shockwave, themis, mst: choices between equal jobs that turn on ms
#   of progress (2.3%, 2.3%, 1.2%, 1.4%). Dally preempts a runner whose
#   Nw_sens is higher by any margin, and equal 1-GPU jobs at full speed sit at
#   1.0 in the engine but 0.99997 in the actors (their runs count the ms before
#   their agents started): on 2026-11-29 a slow sample parted by 5.2% from one
#   such preemption at 268 s (another, at 5.0%, came from float noise between
#   equal gangs, since ranked as equals: `dally._rank`).
# Themis ranks ρ exactly by default: jobs that never waited sit at ρ = 1 in
# the engine and at 1 plus their agents' start-up ms over their run times in
# the actors; a slow sample (2026-11-29) parted by 6.6% when those ms chose
# the job that lost its lease. Dally likewise: a sample parted by 39% when
# they chose which of two equal 1-GPU runners to preempt. Each policy has a
# switch that ties values that close (`ThemisParams.rho_resolution`,
# `DallyParams.rank_resolution`), off by default: on the built-in scenarios
# it brings the machineries no closer (shockwave-fairness: exactly equal with
# Themis's off). The comparison here turns them on (`TIES`): what it checks is
# that the machineries agree where no ms decides.
# Gandiva-fair's rounds counted a job arriving on a round's boundary in the
# engine and not in the actors (11% on another): the traces keep arrivals off
# boundaries since.
# Tiresias-Gittins parted by up to 78% until its policy read thresholds and the
# service distribution with a slack (`TiresiasParams.crossing_slack_s`):
# within 0.3% on the third sample. Before the traces drew generic times, half
# the policies exceeded 1% (fifo +10%: two equal jobs started together ended
# 50 µs apart in the actors and at one instant in the engine, and the next job
# took another placement).
JCT_REL = {
    "gandiva": 0.2,
    "gavel-maxmin": 0.2,
    "dally": 0.1,
    "shockwave": 0.05,
    "themis": 0.03,
    "mst": 0.03,
}
# The policies' switches that tie figures a few ms apart (see above).
TIES = {"dally": {"rank_resolution": 1e-4}, "themis": {"rho_resolution": 1e-4}}


def _job(
    gpus: int,
    at: int,
    seconds: float,
    model: str = "ResNet-18",
    batch: int = 16,
    mode: str = "static",
) -> TraceJobSpec:
    """A trace row written as the falsifying examples print them."""
    return TraceJobSpec(gpus, at, seconds, model, batch, mode)


# Report keys that name the run rather than measure it.
RUN_KEYS = {"engine", "trace_hash", "seed", "scenario"}
FAST = settings(
    max_examples=examples(4),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW = settings(
    max_examples=examples(40),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def same_run(
    policy: str, cluster: Cluster, jobs: list[TraceJobSpec], switches: dict[str, Any]
) -> None:
    """With zero control-plane latency the two machineries report the same run."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_trace(folder / "trace.tsv", jobs)
        trace = str(folder / "trace.tsv")
        raw = scenario(policy, cluster, {**switches, "control_latency": "zero"}, trace)
        actors, reference = run_actors(raw, folder), run_reference(raw, folder)
        assert actors.status == "ok", (actors.violations, actors.actor_errors)
        assert not actors.cut_short and not reference.cut_short
        got, want = report(actors), report(reference)
    assert got["engine"] == "actors" and want["engine"] == "reference"
    assert got.keys() == want.keys()
    assert got["jobs"] == want["jobs"]
    assert {k: v for k, v in got.items() if k not in RUN_KEYS} == {
        k: v for k, v in want.items() if k not in RUN_KEYS
    }


def default_latency_reports(
    policy: str, cluster: Cluster, switches: dict[str, Any], folder: Path, trace: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The actors' and the engine's reports of one policy with the default latencies
    (and the policy's tie switch on, `TIES`)."""
    raw = scenario(policy, cluster, {**switches, "control_latency": "default"}, trace)
    if policy in TIES:
        raw["system"]["policy_params"] = {policy: TIES[policy]}
    actors = run_actors(raw, folder, name=f"{policy}-actors")
    reference = run_reference(raw, folder, name=f"{policy}-reference")
    assert actors.status == "ok", (policy, actors.violations, actors.actor_errors)
    got, want = report(actors), report(reference)
    assert got["finished"] == want["finished"], policy
    return got, want


def close_runs(cluster: Cluster, jobs: list[TraceJobSpec], switches: dict[str, Any]) -> None:
    """With the default latencies, every policy's average JCT is close and the ranking the same.

    Each policy's average JCT in the actors is within `JCT_REL[policy]`
    (else 1%) of the engine's; two policies whose engine averages are
    further apart than both tolerances together rank the same in both.
    """
    jct: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_trace(folder / "trace.tsv", jobs)
        trace = str(folder / "trace.tsv")
        for policy in POLICIES:
            got, want = default_latency_reports(policy, cluster, switches, folder, trace)
            jct[policy] = (got["jct_s"]["avg"], want["jct_s"]["avg"])
    for policy, (got_s, want_s) in jct.items():
        assert got_s == pytest.approx(want_s, rel=JCT_REL.get(policy, 0.01), abs=1e-3), policy
    for a, (got_a, want_a) in jct.items():
        for b, (got_b, want_b) in jct.items():
            apart = JCT_REL.get(a, 0.01) + JCT_REL.get(b, 0.01)
            if want_a > want_b * (1 + apart):
                assert got_a > got_b, (a, b, jct[a], jct[b])


def test_a_run_ends_at_its_last_job_not_at_a_stale_finish_event() -> None:
    # Found by test_zero_latency_many_traces: eight jobs at t=0 on three 2-GPU
    # machines under gandiva-fair; a gang first placed across machines (slow)
    # is preempted and later runs faster elsewhere, leaving its first finish
    # event (816 s) in the engine's queue after every job had ended (397 s).
    # The engine used to move time to it and end there; the actors end at 397 s.
    def job(gpus: int, duration_s: int) -> TraceJobSpec:
        return TraceJobSpec(gpus, 0, duration_s, "ResNet-18", 16, "static")

    jobs = [job(1, 1)] * 3 + [job(1, 240), job(1, 1), job(1, 1), job(3, 120), job(4, 30)]
    same_run("gandiva-fair", Cluster(3, 2, 2), jobs, {})


def test_an_empty_round_is_no_decision_in_either() -> None:
    # Found by test_zero_latency_many_traces: the first jobs arrive at 1 s, so
    # the engine's first round is at 120 s; the actors' scheduler used to call
    # Shockwave at 0 s too, on no jobs, which moved its contention integral
    # (ftf_contention "trace": 9 jobs / 8 GPUs from t=0) and, at 240 s, made it
    # preempt job 8, which the engine kept running.
    def job(gpus: int, arrival_s: int, duration_s: int, model: str = "ResNet-18") -> TraceJobSpec:
        mode = "gns" if model == "Transformer" else "static"
        return TraceJobSpec(gpus, arrival_s, duration_s, model, 16, mode)

    jobs = [job(1, 1, 1), job(1, 1, 1), job(1, 121, 1), job(1, 121, 1), job(1, 121, 367)]
    jobs += [job(1, 600, 1), job(1, 600, 1), job(3, 1, 121), job(3, 60, 600, "Transformer")]
    switches = {"scheduling": "round", "ftf_contention": "trace"}
    same_run("shockwave", Cluster(2, 4, 1), jobs, switches)


def test_a_round_whose_only_arrival_failed_is_no_decision_in_either() -> None:
    # Found by the slow tier: a 3-GPU job arrives at 0 s on a 2-GPU cluster and
    # fails; the engine still decided at that round, on no jobs, and moved
    # Shockwave's contention integral (last_contention 0 instead of 1 from 0 s to
    # 120 s): at 600 s the actors preempted job 1 and the engine did not.
    def job(gpus: int, arrival_s: int, duration_s: int, mode: str = "static") -> TraceJobSpec:
        return TraceJobSpec(gpus, arrival_s, duration_s, "ResNet-18", 16, mode)

    jobs = [job(1, 1, 1), job(1, 60, 600, "gns")] + [job(1, 600, 1)] * 4
    jobs += [job(1, 121, 121), job(2, 1, 1), job(3, 0, 1)]
    switches = {"scheduling": "round", "preemption_cost": False, "comm_model": True}
    switches["count_failed"] = True
    same_run("shockwave", Cluster(1, 2, 1), jobs, {**switches, "ftf_contention": "gpus"})


@pytest.mark.parametrize("policy", POLICIES)
@FAST
@given(cluster=clusters(), jobs=traces(), switches=semantics())
def test_zero_latency_actors_and_engine_report_the_same_jobs(
    policy: str, cluster: Cluster, jobs: list[TraceJobSpec], switches: dict[str, Any]
) -> None:
    same_run(policy, cluster, jobs, switches)


@pytest.mark.slow
@pytest.mark.parametrize("core", core_switches(), ids=lambda c: "-".join(map(str, c.values())))
@pytest.mark.parametrize("policy", POLICIES)
@settings(SLOW, max_examples=examples(5))
@given(cluster=clusters(), jobs=traces(jobs_max=12), data=st.data())
def test_zero_latency_every_combination_of_the_core_switches(
    policy: str,
    core: dict[str, Any],
    cluster: Cluster,
    jobs: list[TraceJobSpec],
    data: st.DataObject,
) -> None:
    same_run(policy, cluster, jobs, data.draw(semantics(fixed=core)))


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
@SLOW
@given(cluster=clusters(), jobs=traces(jobs_max=16), switches=semantics())
def test_zero_latency_many_traces(
    policy: str, cluster: Cluster, jobs: list[TraceJobSpec], switches: dict[str, Any]
) -> None:
    same_run(policy, cluster, jobs, switches)


# Event-driven only: in rounds, a job submitted at a round boundary reaches the
# scheduler a few ms after the engine's decision at that instant and waits a
# whole round (a 1 s job: JCT 121 s against 1 s), as it would on a real cluster.
# And traces without events at one instant by construction
# (`traces(generic_times=True)`): the actors' scheduler sees the first of
# two a few ms before the other and may decide on it alone (ossp: a 1 s job
# started before the 30 s one it would run first, JCT +30%).
EVENT = {"scheduling": "event"}
# Each example is 2 runs per policy; shrinking a failure would take minutes: the
# failing example is printed as drawn.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


@settings(FAST, max_examples=examples(3), phases=NO_SHRINK)
@given(
    cluster=clusters(),
    jobs=traces(generic_times=True),
    switches=semantics(fixed=EVENT),
)
def test_default_latency_every_policy_close_to_the_engine_and_ranked_the_same(
    cluster: Cluster, jobs: list[TraceJobSpec], switches: dict[str, Any]
) -> None:
    close_runs(cluster, jobs, switches)


@pytest.mark.slow
@settings(SLOW, max_examples=examples(20))
@given(
    cluster=clusters(),
    jobs=traces(jobs_max=12, generic_times=True),
    switches=semantics(fixed=EVENT),
)
def test_default_latency_many_traces(
    cluster: Cluster, jobs: list[TraceJobSpec], switches: dict[str, Any]
) -> None:
    close_runs(cluster, jobs, switches)


def test_a_job_preempted_before_its_start_is_heard_counts_its_wait_as_queueing() -> None:
    # Found by the slow tier: job 9 waits from 121.7 s, is dispatched at 268 s and
    # preempted at 269 s before its start was heard; the actors lost that 147 s of
    # queueing (13.2 s in all against the engine's 160.5 s).
    def job(gpus: int, at: int, seconds: int, model: str = "ResNet-18") -> TraceJobSpec:
        return TraceJobSpec(gpus, at, seconds, model, 16, "static")

    jobs = [job(1, 0, 1)] * 6 + [job(1, 0, 120), job(1, 268, 1), job(1, 269, 1)]
    jobs += [job(3, 0, 600), job(4, 0, 148, "Transformer")]
    core = {"scheduling": "event", "preemption_cost": True, "comm_model": True}
    same_run("srtf", Cluster(1, 4, 1), jobs, {**core, "ftf_contention": "gpus"})


def test_dally_picks_one_victim_among_gangs_equal_but_for_float_noise() -> None:
    # Found by the slow tier: at 885 s two 4-GPU ResNet-18 gangs (jobs 0 and 8) run
    # with one Nw_sens, a few ulps apart in the engine and equal in the actors; the
    # engine preempted job 8, the actors job 0, and the average JCT parted by 5.0%.
    # Now the tie goes to the job id in both: job 0 is the victim.
    job = _job
    jobs = [
        job(4, 856, 174.9, "ResNet-18", 16, "gns"),
        job(1, 18, 1.86, "ResNet-18", 16, "static"),
        job(1, 390, 1.93, "ResNet-18", 16, "static"),
        job(1, 43, 269.64, "VGG19", 16, "static"),
        job(3, 736, 600.06, "Recommendation", 128, "static"),
        job(4, 419, 54.38, "Transformer", 16, "gns"),
        job(3, 885, 600.89, "Recommendation", 64, "static"),
        job(1, 87, 60.12, "VGG19", 32, "static"),
        job(4, 192, 1800.2, "ResNet-18", 64, "gns"),
        job(1, 317, 101.49, "ResNet-18", 64, "gns"),
        job(1, 0, 30.01, "ResNet-18", 16, "static"),
    ]
    switches = {
        "round_s": 60.0,
        "placement": "count",
        "one_gpu_servers": True,
        "percentiles": "linear",
        "srtf_remaining": "held",
        "comm_model": True,
        "batch_size": "model",
        **EVENT,
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_trace(folder / "trace.tsv", jobs)
        got, want = default_latency_reports(
            "dally", Cluster(4, 2, 1), switches, folder, str(folder / "trace.tsv")
        )
    preempted = {j["job_id"]: j["preemptions"] for j in want["jobs"]}
    assert preempted["0"] == 1 and preempted["8"] == 0
    assert {j["job_id"]: j["preemptions"] for j in got["jobs"]} == preempted
    assert got["jct_s"]["avg"] == pytest.approx(want["jct_s"]["avg"], rel=0.01)


@pytest.mark.parametrize(("resolution", "agree"), [(0.0, False), (1e-4, True)])
def test_themis_rho_resolution_ties_jobs_that_never_waited(resolution: float, agree: bool) -> None:
    # Found by the slow tier: at 240 s job 7 (3 GPUs, since 0 s) and job 8 (8 GPUs,
    # since 66 s) have never waited, ρ = 1 in the engine and 1 + a few ms over their
    # run times in the actors. Ranked exactly (the default), those ms make the actors
    # preempt job 7 where the engine (a tie: the older first) preempts job 8, and the
    # runs part by 6.6%; within `rho_resolution` they tie in both.
    job = _job
    jobs = [job(1, 102, 600.03), job(1, 131, 1.37), job(1, 231, 1.65), job(1, 313, 240.01)]
    jobs += [job(1, 416, 1.94), job(1, 582, 1.92), job(1, 619, 1.75), job(3, 0, 893.74)]
    jobs += [job(8, 66, 240.86, "Transformer"), job(16, 1, 1.02)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_trace(folder / "trace.tsv", jobs)
        raw = scenario("themis", Cluster(3, 4, 2), EVENT, str(folder / "trace.tsv"))
        raw["system"]["policy_params"] = {"themis": {"rho_resolution": resolution}}
        got, want = report(run_actors(raw, folder)), report(run_reference(raw, folder))
    preempted = {j["job_id"]: j["preemptions"] for j in want["jobs"]}
    assert preempted["7"] == 1 and preempted["8"] == 3
    same = {j["job_id"]: j["preemptions"] for j in got["jobs"]} == preempted
    close = got["jct_s"]["avg"] == pytest.approx(want["jct_s"]["avg"], rel=0.01)
    assert (same, close) == (agree, agree)


@pytest.mark.parametrize(("resolution", "agree"), [(0.0, False), (1e-4, True)])
def test_dally_rank_resolution_ties_runners_equal_but_for_start_up_ms(
    resolution: float, agree: bool
) -> None:
    # Found by the slow tier: at 200 s job 1 (3 GPUs) preempts two of the runners on
    # four 1-GPU machines; jobs 5 and 6, one GPU each at full speed, have Nw_sens 1
    # in the engine and 1 minus a few parts in 10^5 in the actors. Ranked exactly (the
    # default), the actors preempt job 6, the engine job 5, and the runs part by 39%.
    job = _job
    jobs = [
        job(2, 65, 30.92, "ResNet-18", 16, "static"),
        job(3, 200, 59.11, "ResNet-50", 16, "static"),
        job(1, 709, 1.23, "ResNet-18", 16, "static"),
        job(2, 125, 600.67, "ResNet-18", 16, "static"),
        job(8, 899, 30.25, "BERT", 128, "accordion"),
        job(1, 70, 955.21, "ResNet-50", 32, "gns"),
        job(1, 182, 30.84, "Recommendation", 128, "accordion"),
        job(2, 860, 261.76, "Transformer", 128, "static"),
    ]
    switches = {
        "preemption_cost": False,
        "equal_rank": "reallocate",
        "srtf_remaining": "held",
        "count_failed": False,
        "percentiles": "nearest-rank",
        "ftf_contention": "jobs",
        "gittins": "tiresias-sim",
        "round_s": 300.0,
        "batch_size": "trace",
        **EVENT,
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_trace(folder / "trace.tsv", jobs)
        raw = scenario("dally", Cluster(4, 1, 1), switches, str(folder / "trace.tsv"))
        raw["system"]["policy_params"] = {"dally": {"rank_resolution": resolution}}
        got, want = report(run_actors(raw, folder)), report(run_reference(raw, folder))
    assert {j["job_id"]: j["preemptions"] for j in want["jobs"]}["6"] == 0
    close = got["jct_s"]["avg"] == pytest.approx(want["jct_s"]["avg"], rel=0.01)
    assert close == agree


def test_a_start_preempted_before_its_gpus_were_free_is_not_the_first_start() -> None:
    # Found by the slow tier (srtf): job 1 is started at 100 s on GPUs job 0 frees after
    # its checkpoint (101.5 s); at 101 s srtf preempts it for the shorter job 2 before it
    # began. The engine reported its first start at 101.5 s, a start that never came
    # (its queueing delay said otherwise); the actors, at 106.5 s, when it began.
    jobs = [_job(4, 0, 600, "Transformer"), _job(3, 100, 30), _job(4, 101, 5)]
    core = {"scheduling": "event", "preemption_cost": True, "comm_model": True}
    same_run("srtf", Cluster(1, 4, 1), jobs, core)
