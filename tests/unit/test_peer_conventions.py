"""The peer simulators' conventions, one switch at a time, with hand-worked numbers.

Each test runs the reference engine (or the metrics, or the pure index)
with one `[system.semantics]` switch flipped and checks the numbers worked
out in its comments. The actor system reads the same switches
(tests/system/test_peer_profiles.py runs both machineries under each profile).
"""

from __future__ import annotations

import pytest

from actors.cluster.engine import JobResult, Semantics, SimResult, cluster_of, simulate
from actors.cluster.metrics import contention_factors, percentile, summarize
from actors.policies.cluster.api import Regime, TraceJob
from actors.policies.cluster.baselines import Fifo, FifoParams, Srtf, SrtfParams
from actors.policies.cluster.gittins import ServiceTable, distribution
from actors.policies.cluster.tiresias.params import GittinsParams
from actors.policies.cluster.tiresias.policy import TiresiasGittins
from actors.policies.cluster.tiresias.sim_gittins import SimGittinsTable
from emulator.units import S

FREE = {"preemption_cost": False, "comm_model": False}


def job(job_id: str, submit_s: float, gpus: int, duration_s: float, **kw: object) -> TraceJob:
    return TraceJob(
        job_id=job_id,
        submit_us=round(submit_s * S),
        gpus=gpus,
        model=str(kw.pop("model", "resnet50")),
        duration_us=round(duration_s * S),
        **kw,  # type: ignore[arg-type]
    )


def finishes(result: SimResult) -> dict[str, float]:
    return {r.job_id: (r.finish_us or 0) / S for r in result.jobs}


# ---- placement = "count" ------------------------------------------------------------------
def test_count_placement_starts_what_consolidation_keeps_waiting():
    # Two 4-GPU machines; three jobs at t=0: a (3 GPUs) and b (3 GPUs) take one
    # machine each, leaving 1 + 1 GPUs free. c (2 GPUs, 100 s) must be on one
    # machine under YARN-CS consolidation: it waits for a to end at 100 s and
    # ends at 200 s. Counting GPUs, 1 + 1 is 2: c starts at 0 and ends at 100.
    jobs = [job("a", 0, 3, 100), job("b", 0, 3, 100), job("c", 0, 2, 100)]
    machines = cluster_of(2, 4, 2)
    topology = simulate(Fifo(), FifoParams(), jobs, machines, Semantics(**FREE))
    count = simulate(Fifo(), FifoParams(), jobs, machines, Semantics(placement="count", **FREE))
    assert finishes(topology) == {"a": 100, "b": 100, "c": 200}
    assert finishes(count) == {"a": 100, "b": 100, "c": 100}


# ---- srtf_remaining = "held" ----------------------------------------------------------------
# A job whose second half runs twice as fast (its own regimes): 200 s of work,
# 100 s at speed 1 then 100 s of work in 50 s; alone it takes 150 s.
FAST_SECOND_HALF = (
    Regime(start=0.0, end=0.5, batch_scale=1, throughput=1.0),
    Regime(start=0.5, end=1.0, batch_scale=2, throughput=2.0),
)


@pytest.mark.parametrize(
    ("clock", "expected"),
    [
        # At t=125 s a has done 100 + 25·2 = 150 s of its 200 s of work: 50 s of
        # work left, below b's 60, so a runs on to 150 and b runs 150 → 210.
        ("work", {"a": 150, "b": 210}),
        # Counted as duration − time held (the Tiresias simulator), a has
        # 200 − 125 = 75 s left, above b's 60: b preempts it and ends at 185;
        # a's 50 s of work left take 25 s at speed 2: it ends at 210.
        ("held", {"a": 210, "b": 185}),
    ],
)
def test_srtf_remaining_time_counts_work_or_time_held(clock: str, expected: dict[str, float]):
    jobs = [job("a", 0, 1, 200, regimes=FAST_SECOND_HALF), job("b", 125, 1, 60)]
    sem = Semantics(srtf_remaining=clock, **FREE)  # type: ignore[arg-type]
    result = simulate(Srtf(), SrtfParams(), jobs, cluster_of(1, 1, 1), sem)
    assert finishes(result) == expected
    assert sum(r.preemptions for r in result.jobs) == (clock == "held")


# ---- gittins = "tiresias-sim": the index itself --------------------------------------------
# Four equally likely services (GPU·s) and the quantum Δ = 300.
SAMPLE = distribution([100, 200, 400, 1000])


@pytest.mark.parametrize(
    ("attained", "index"),
    [
        # Below the first sample point the index is that point's, at a = 99:
        # finishers within 399 are {100, 200}: P = 0.5; e = (100·¼ + 200·¼ +
        # 300·½) / 1 = 225 (full services, not S − a); P·10⁶/e = 2222.2222.
        (0.0, 2222.2222),
        (99.9, 2222.2222),
        # From 100 on, a snaps to 200 − 1 = 199: survivors {200, 400, 1000} (¾);
        # finishers within 499 are {200, 400}: P = ½ / ¾ = 0.66667 (5 decimals);
        # e = (200·¼ + 400·¼ + 300·¼) / ¾ = 300; 666670 / 300 = 2222.2333.
        (100.0, 2222.2333),
        (150.0, 2222.2333),
        # From 200 on, a snaps to 399: survivors {400, 1000} (½); within 699
        # only 400: P = 0.5; e = (400·¼ + 300·¼) / ½ = 350; 10⁶·0.5/350 = 1428.5714.
        (250.0, 1428.5714),
        # Snapped to 999: a + Δ passes the last point less 1, which the
        # simulator counts as not finishing: P = 0, index 0; past it, 0 too.
        (400.0, 0.0),
        (1000.0, 0.0),
    ],
)
def test_the_simulators_gittins_index(attained: float, index: float):
    assert SimGittinsTable(SAMPLE, 300.0).index(attained) == pytest.approx(index, abs=1e-9)


def test_the_papers_index_uses_the_remaining_service_instead():
    # At a = 150 the paper's ratio: survivors {200, 400, 1000} (¾), finishing
    # within 450: {200, 400}, P = ⅔; E[min(S − 150, 300) | S > 150] =
    # (50·¼ + 250·¼ + 300·¼) / ¾ = 200: ratio ⅔ / 200 = 3333.3 per 10⁶, where
    # the simulator's, snapped and on full services, says 2222.2333.
    assert ServiceTable(SAMPLE).ratio(150.0, 300.0) * 1e6 == pytest.approx(3333.333, rel=1e-6)


# ---- equal_rank = "reallocate" --------------------------------------------------------------
# Two GPUs and the simulator's index over services {1000, 2000} GPU·s: every
# job below 1000 GPU·s has the same index. r (1 GPU, 10 s) starts at 0; p
# (2 GPUs, 100 s) arrives at 1 s and does not fit; s (1 GPU, 100 s) arrives at
# 2 s and takes the free GPU. At 10 s r ends: p (submitted at 1 s) and s
# (running since 2 s, 8 GPU·s) have equal index.
FLAT = GittinsParams(service_values_gpu_s=(1000.0, 2000.0))
EQUAL_RANK_JOBS = [job("r", 0, 1, 10), job("p", 1, 2, 100), job("s", 2, 1, 100)]


@pytest.mark.parametrize(
    ("equal_rank", "expected", "preemptions"),
    [
        # Keeping: s keeps its GPU, p waits for it to end at 102 and ends at 202.
        ("keep", {"r": 10, "s": 102, "p": 202}, 0),
        # Reallocating in (index, submit) order: p (1 s) comes before s (2 s),
        # takes both GPUs at 10 s and ends at 110; s, preempted after 8 s, has
        # 92 s left and ends at 202.
        ("reallocate", {"r": 10, "p": 110, "s": 202}, 1),
    ],
)
def test_equal_rank_reallocation(equal_rank: str, expected: dict[str, float], preemptions: int):
    sem = Semantics(gittins="tiresias-sim", equal_rank=equal_rank, **FREE)  # type: ignore[arg-type]
    result = simulate(TiresiasGittins(), FLAT, EQUAL_RANK_JOBS, cluster_of(1, 2, 1), sem)
    assert finishes(result) == expected
    assert sum(r.preemptions for r in result.jobs) == preemptions


# ---- restart_overhead_s --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("scheduling", "expected", "busy_s"),
    [
        # Rounds of 120 s: a (300 s) starts at 0 and loses 20 s first: ends at
        # 320. b (100 s) would end within its first round less 5 s (115 s), so
        # the peer spares it: ends at 100. Busy time excludes the 20 s: 400 s.
        ("round", {"a": 320, "b": 100}, 400),
        # Event-driven, every run pays: a ends at 320, b at 120.
        ("event", {"a": 320, "b": 120}, 400),
    ],
)
def test_restart_overhead(scheduling: str, expected: dict[str, float], busy_s: float):
    jobs = [job("a", 0, 1, 300), job("b", 0, 1, 100)]
    sem = Semantics(scheduling=scheduling, restart_overhead_s=20, **FREE)  # type: ignore[arg-type]
    result = simulate(Fifo(), FifoParams(), jobs, cluster_of(2, 1, 2), sem)
    assert finishes(result) == expected
    assert result.gpu_busy_us == busy_s * S
    overhead = {r.job_id: r.restart_overhead_us / S for r in result.jobs}
    assert overhead == {"a": 20, "b": 0 if scheduling == "round" else 20}
    # Reported as preemption overhead (restore) too, and on its own.
    report = summarize(result)
    assert report["restart_overhead_s"] == sum(overhead.values())
    assert report["preemption_overhead_s"] == sum(overhead.values())


# ---- percentiles = "nearest-rank" -----------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "p", "linear", "nearest"),
    [
        # 1..20: rank (n − 1)·0.95 = 18.05 → 19 + 0.05 = 19.05; nearest rank
        # ⌈20·0.95⌉ = 19 → the 19th value, 19.
        (list(range(1, 21)), 95, 19.05, 19),
        # 1..10: 9.55 vs ⌈9.5⌉ = 10 → 10.
        (list(range(1, 11)), 95, 9.55, 10),
        # Median of 1..4: 2.5 vs ⌈2⌉ = 2 → 2.
        ([4, 1, 3, 2], 50, 2.5, 2),
        # One value: itself either way.
        ([7.0], 95, 7.0, 7.0),
    ],
)
def test_percentiles(values: list[float], p: float, linear: float, nearest: float):
    assert percentile(values, p) == pytest.approx(linear)
    assert percentile(values, p, "nearest-rank") == nearest


def test_the_report_uses_the_runs_percentiles():
    # Ten 1-GPU jobs of 10, 20, …, 100 s on ten GPUs: JCTs are the durations.
    jobs = [job(f"j{i}", 0, 1, 10 * i) for i in range(1, 11)]
    machines = cluster_of(10, 1, 10)
    linear = summarize(simulate(Fifo(), FifoParams(), jobs, machines, Semantics(**FREE)))
    sem = Semantics(percentiles="nearest-rank", **FREE)
    nearest = summarize(simulate(Fifo(), FifoParams(), jobs, machines, sem))
    assert linear["jct_s"]["p95"] == pytest.approx(95.5)  # 90 + 0.55·10
    assert nearest["jct_s"]["p95"] == 100  # ⌈9.5⌉ = 10th
    assert nearest["jct_s"]["median"] == 50  # ⌈5⌉ = 5th


# ---- ftf_contention = "trace" ---------------------------------------------------------------
def _result(sem: Semantics) -> SimResult:
    """Four jobs on 2 GPUs; a: 0 → 100 s, b: 0 → 300 s, c: 100 → 200 s, d: 200 → 300 s."""
    spans = {"a": (0, 100), "b": (0, 300), "c": (100, 200), "d": (200, 300)}
    results = tuple(
        JobResult(
            job_id=k,
            gpus=1,
            model="resnet50",
            submit_us=s * S,
            first_start_us=s * S,
            finish_us=f * S,
            preemptions=0,
            comm_overhead_us=0,
            failed=False,
            exclusive_us=100 * S,
        )
        for k, (s, f) in spans.items()
    )
    return SimResult(
        policy="x",
        semantics=sem,
        jobs=results,
        makespan_us=300 * S,
        end_us=300 * S,
        gpus_total=2,
        gpu_busy_us=0,
        decisions=0,
    )


def test_trace_contention_is_one_factor_for_every_job():
    # "trace": N = 4 jobs / 2 GPUs = 2 for everyone: ρ(b) = 300 / (100·2) = 1.5.
    trace = contention_factors(_result(Semantics(ftf_contention="trace")))
    assert trace == {"a": 2.0, "b": 2.0, "c": 2.0, "d": 2.0}
    # "jobs": present jobs averaged over each life: a sees 2 the whole time
    # (a, b) → N = 1; b sees 2 jobs for 300 s → 1; never below 1.
    jobs = contention_factors(_result(Semantics(ftf_contention="jobs")))
    assert jobs == {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}
    report = summarize(_result(Semantics(ftf_contention="trace")))
    assert report["ftf"]["worst"] == pytest.approx(1.5)
