"""Shockwave §8.2's other baselines: ossp, mst, allox, gandiva-fair, with hand-worked numbers.

Each policy's definition (and where the paper left it open) is in its
module's docstring under `actors/policies/cluster/shockwave_baselines/`.
Jobs here are static unless a test says otherwise, so a job's speed-up is 1
and its remaining time is (1 − progress) × duration.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from actors.cluster.engine import Semantics, cluster_of, simulate
from actors.policies.cluster.api import ClusterView, JobView, Slot, TraceJob
from actors.policies.cluster.registry import cluster_policy
from actors.policies.cluster.shockwave_baselines.allox import AlloX, AlloxParams, filtered
from actors.policies.cluster.shockwave_baselines.gandiva_fair import (
    GandivaFair,
    GandivaFairParams,
    GandivaFairState,
    advance,
)
from actors.policies.cluster.shockwave_baselines.mst import (
    MaxSumThroughput,
    MstParams,
    max_throughput_set,
)
from actors.policies.cluster.shockwave_baselines.ossp import Ossp, OsspParams, OsspState
from actors.policies.cluster.shockwave_baselines.speed import remaining_now_s, speedup
from actors.policies.cluster.shockwave_baselines.window import (
    WindowJob,
    bound_s,
    greedy_counts,
    pack_rounds,
    plan_window,
)
from actors.policies.registry import convert_params
from emulator.errors import InputError
from emulator.units import S


def _job(
    job_id: str,
    gpus: int,
    submit_s: int,
    duration_s: int,
    *,
    executed_s: int = 0,
    progress: float | None = None,
    placement: tuple[tuple[str, int], ...] = (),
    batch_size: int = 0,
) -> JobView:
    return JobView(
        job_id=job_id,
        gpus=gpus,
        model="m",  # base batch size 32 (perf_model)
        submit_us=submit_s * S,
        queued_since_us=submit_s * S,
        duration_us=duration_s * S,
        executed_us=executed_s * S,
        progress=executed_s / duration_s if progress is None else progress,
        placement=placement,
        batch_size=batch_size,
    )


def _view(now_s: int, free: int, *jobs: JobView, total: int = 4, round_s: int = 100) -> ClusterView:
    return ClusterView(
        now_us=now_s * S,
        jobs=jobs,
        round_us=round_s * S,
        machines=(Slot(host="m0", rack="r0", gpus_total=total, gpus_free=free),),
    )


def _started(decision: Any) -> list[str]:
    return [s.job_id for s in decision.start]


# --- the reactive view of a job ------------------------------------------------------------


def test_speed_is_the_current_batch_sizes_and_remaining_time_follows_it() -> None:
    # Batch 128 = 4x the base 32: two doublings, 1.7^(2/3) = 1.4244 (perf_model); 60% of a
    # 1000 s job left at that speed: 600 / 1.4244 = 421.2 s.
    job = _job("a", 1, 0, 1000, progress=0.4, batch_size=128)
    assert speedup(job) == pytest.approx(1.7 ** (2 / 3))
    assert remaining_now_s(job) == pytest.approx(600 / 1.7 ** (2 / 3))
    assert speedup(_job("b", 1, 0, 1000)) == 1.0


# --- ossp ----------------------------------------------------------------------------------

# M = 4 GPUs, T = 2 rounds of 100 s: 8 GPU-rounds. A (1 GPU, 1000 s left), B (2, 150),
# C (1, 50), D (2, 400).
WINDOW = (
    WindowJob(job_id="A", gpus=1, remaining_s=1000),
    WindowJob(job_id="B", gpus=2, remaining_s=150),
    WindowJob(job_id="C", gpus=1, remaining_s=50),
    WindowJob(job_id="D", gpus=2, remaining_s=400),
)


def test_ossp_window_takes_the_least_makespan_bound_then_the_most_even_work_left() -> None:
    # Stage 1: A keeps at least 1000 - 2*100 = 800 s, so H >= 800, reached iff A gets both
    # rounds (the work left, (800 + 2*R'_B + R'_C + 2*R'_D) / 4, stays far below).
    # Stage 2, 6 GPU-rounds for B, C, D; Σ g·R'²: A 800² = 640000 plus
    #   D 2 rounds + B 1: 2*200² + 2*50² + 50²    =  87500  <- least: 727500
    #   D 2 rounds + C 1: 2*200² + 2*150² + 0     = 125000
    #   D 1 round + B 2:  2*300² + 0 + 50²        = 182500
    window = plan_window(WINDOW, 4, 2, 100.0)
    assert window.optimal
    assert window.counts == (2, 1, 0, 2)
    assert window.makespan_bound_s == pytest.approx(800.0)
    # First-fit, most rounds first: A and D take 3 GPUs in both rounds, so B's 2-GPU gang
    # finds no round with 2 free (the MILP counts GPU-rounds, not rounds: see window.py).
    assert window.rounds == (("A", "D"), ("A", "D"))


@pytest.mark.parametrize(
    ("counts", "bound"),
    [
        # R' = 800, 50, 50, 200: load (800 + 100 + 50 + 400) / 4 = 337.5 < 800.
        ((2, 1, 0, 2), 800.0),
        # Nothing run: load (1000 + 300 + 50 + 800) / 4 = 537.5 < the longest, 1000.
        ((0, 0, 0, 0), 1000.0),
    ],
)
def test_ossp_makespan_bound_is_the_larger_of_load_and_longest(
    counts: tuple[int, ...], bound: float
) -> None:
    assert bound_s(WINDOW, counts, 4, 100.0) == pytest.approx(bound)


def test_ossp_greedy_fallback_gives_rounds_to_the_longest_first() -> None:
    # Most left first: A (1000, then 900: its 2 rounds), D (400, then 300), B (150 > C's 50):
    # 1 + 1 + 2 + 2 + 2 = the 8 GPU-rounds, so C gets none.
    assert greedy_counts(WINDOW, 4, 2, 100.0) == (2, 1, 0, 2)


def test_ossp_pack_rounds_keeps_running_jobs_first_among_equal_counts() -> None:
    jobs = (
        WindowJob(job_id="a", gpus=2, remaining_s=500),
        WindowJob(job_id="b", gpus=2, remaining_s=400, running=True),
    )
    # Both get 1 of 2 rounds on 2 GPUs: the running b keeps round 1 although a has more left.
    assert pack_rounds(jobs, (1, 1), 2, 2) == (("b",), ("a",))


def test_ossp_leases_the_plans_first_round_and_fills_the_idle_gpu() -> None:
    params = OsspParams(round_s=100, window_rounds=2)
    jobs = (_job("A", 1, 0, 1000), _job("B", 2, 0, 150), _job("C", 1, 0, 50), _job("D", 2, 0, 400))
    decision, state = Ossp().decide(_view(1000, 4, *jobs), OsspState(), params)
    # Round 1 of the plan above: A and D; the GPU they leave goes to the longest job left
    # that fits: B (2 GPUs) does not, C does.
    assert decision.preempt == ()
    assert _started(decision) == ["A", "D", "C"]
    assert decision.wake_at_us == 1100 * S
    assert state.plan == (("A", "D"),) and state.plan_for == ("A", "B", "C", "D")
    assert state.solves == 1 and state.fallbacks == 0
    # Next boundary, same jobs (now running): the plan's second round, without a new solve.
    running = tuple(
        msgspec.structs.replace(j, placement=(("m0", j.gpus),)) if j.job_id != "B" else j
        for j in jobs
    )
    decision, state = Ossp().decide(_view(1100, 0, *running), state, params)
    assert decision.preempt == () and decision.start == ()
    assert state.solves == 1 and state.plan == ()


# --- mst -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "throughputs", "capacity", "chosen"),
    [
        # {0, 1} = 4 beats {2} = 3.
        ((2, 2, 3), (2.0, 2.0, 3.0), 4, (0, 1)),
        # {0, 1} = 1 + 2.38 = 3.38 beats {0, 2} = 3.0 (job 1's batch has doubled: 2 × 1.19).
        ((1, 2, 2), (1.0, 2.38, 2.0), 3, (0, 1)),
        # All equal: the earliest jobs, in the caller's order (running ones first).
        ((1, 1, 1), (1.0, 1.0, 1.0), 2, (0, 1)),
        # A gang wider than the cluster is never chosen.
        ((8, 1), (8.0, 1.0), 4, (1,)),
    ],
)
def test_mst_knapsack(
    gpus: tuple[int, ...], throughputs: tuple[float, ...], capacity: int, chosen: tuple[int, ...]
) -> None:
    assert max_throughput_set(gpus, throughputs, capacity) == chosen


def test_mst_keeps_running_jobs_on_ties_and_preempts_for_a_faster_one() -> None:
    running = _job("r", 1, 0, 1000, executed_s=100, placement=(("m0", 1),))
    # One GPU. A waiting static job ties with r (1.0 each): r keeps its lease.
    decision, _ = MaxSumThroughput().decide(
        _view(1000, 0, running, _job("w", 1, 50, 1000), total=1), None, MstParams(round_s=100)
    )
    assert decision.preempt == () and decision.start == ()
    # A waiting job preempted at batch 128 (speed-up 1.42) beats it: r is preempted.
    fast = _job("f", 1, 50, 1000, executed_s=300, batch_size=128)
    decision, _ = MaxSumThroughput().decide(
        _view(1000, 0, running, fast, total=1), None, MstParams(round_s=100)
    )
    assert decision.preempt == ("r",) and _started(decision) == ["f"]


# --- allox ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gangs", "free", "fraction", "kept"),
    [
        # ceil(0.2 * 10) = 2 one-GPU jobs, but 4 GPUs are free: 4 (the artifact's max(αm, n)).
        ((1,) * 10, 4, 0.2, 4),
        # ceil(0.2 * 10) = 2 already fill 2 GPUs.
        ((1,) * 10, 2, 0.2, 2),
        # ceil(0.5 * 3) = 2 gangs of 4 GPUs: 8 >= 4 free.
        ((4, 4, 4), 4, 0.5, 2),
        # At least one job passes.
        ((1, 1), 0, 0.01, 1),
    ],
)
def test_allox_filter_size(gangs: tuple[int, ...], free: int, fraction: float, kept: int) -> None:
    waiting = [_job(f"j{i}", g, i, 100) for i, g in enumerate(gangs)]
    assert filtered(waiting, free, fraction) == kept


def test_allox_starts_the_shortest_of_the_least_served_and_never_preempts() -> None:
    # 4 free GPUs; all waiting jobs have run 0 s, so the filter takes the oldest:
    # ceil(0.4 * 5) = 2 (a, b: 2 GPUs) < 4 free, so c joins (4 GPUs). Shortest first among
    # a (5000 s), b (100 s), c (50 s): c (2 GPUs), b (1), a (1). d and e wait.
    jobs = (
        _job("a", 1, 0, 5000),
        _job("b", 1, 10, 100),
        _job("c", 2, 20, 50),
        _job("d", 1, 30, 10),
        _job("e", 4, 40, 20),
    )
    decision, _ = AlloX().decide(_view(100, 4, *jobs), None, AlloxParams(filter_fraction=0.4))
    assert decision.preempt == ()
    assert _started(decision) == ["c", "b", "a"]
    # A long job holding 3 of the 4 GPUs is not preempted for the short d: d takes the last one.
    long = _job("a", 3, 0, 5000, executed_s=60, placement=(("m0", 3),))
    decision, _ = AlloX().decide(_view(100, 1, long, jobs[3], jobs[4]), None, AlloxParams())
    assert decision.preempt == () and _started(decision) == ["d"]


def test_allox_filters_by_share_served_before_age() -> None:
    # x (older, ran 50 of its 100 s of life: share 0.5) is served after y (share 0).
    x = _job("x", 1, 0, 20, executed_s=50, progress=0.5)
    y = _job("y", 1, 10, 1000)
    decision, _ = AlloX().decide(
        _view(100, 1, x, y, total=1), None, AlloxParams(filter_fraction=0.5)
    )
    assert _started(decision) == ["y"]


# --- gandiva-fair ----------------------------------------------------------------------------

STRIDE = GandivaFairState(
    passes={"A": 10.0, "B": 12.0}, executed_us={"A": 100 * S, "B": 50 * S}, global_pass=11.0
)


@pytest.mark.parametrize(
    ("tickets", "passes", "global_pass"),
    [
        # A (2 GPUs) ran 60 s more: 120 GPU-s over the 3 tickets of A and B moves the global
        # pass 40 -> 51. A's pass: 10 + 120 / 2 = 70; B waited: 12; the new C starts at 51.
        ("gpus", {"A": 70.0, "B": 12.0, "C": 51.0}, 51.0),
        # One ticket each: global 11 + 120 / 2 = 71; A 10 + 120 = 130; C at 71.
        ("equal", {"A": 130.0, "B": 12.0, "C": 71.0}, 71.0),
    ],
)
def test_gandiva_fair_stride_passes(
    tickets: str, passes: dict[str, float], global_pass: float
) -> None:
    a = _job("A", 2, 0, 1000, executed_s=160, placement=(("m0", 2),))
    b = _job("B", 1, 0, 1000, executed_s=50)
    c = _job("C", 4, 150, 1000)
    params = GandivaFairParams(tickets=tickets)  # type: ignore[arg-type]
    got = advance(_view(200, 2, a, b, c), STRIDE, params)
    assert got.passes == pytest.approx(passes)
    assert got.global_pass == pytest.approx(global_pass)
    assert got.executed_us == {"A": 160 * S, "B": 50 * S, "C": 0}


def test_gandiva_fair_leases_lowest_pass_first_skipping_gangs_that_do_not_fit() -> None:
    # Passes as above: B 12, C 51, A 70. On 4 GPUs: B (1), C (4) does not fit the 3 left,
    # A (2) does: A keeps running, B starts, C waits.
    a = _job("A", 2, 0, 1000, executed_s=160, placement=(("m0", 2),))
    b = _job("B", 1, 0, 1000, executed_s=50)
    c = _job("C", 4, 150, 1000)
    decision, state = GandivaFair().decide(_view(200, 2, a, b, c), STRIDE, GandivaFairParams())
    assert decision.preempt == () and _started(decision) == ["B"]
    assert decision.wake_at_us == 300 * S  # rounds of 100 s here
    assert state.global_pass == pytest.approx(51.0)


# --- parameters and a whole run ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw", "path"),
    [
        ("ossp", {"window_rounds": 0}, "window_rounds"),
        ("ossp", {"round_s": -1.0}, "round_s"),
        ("mst", {"round_s": 0}, "round_s"),
        ("allox", {"filter_fraction": 1.5}, "filter_fraction"),
        ("gandiva-fair", {"tickets": "users"}, "tickets"),
        ("gandiva-fair", {"quantum": 1}, "quantum"),
    ],
)
def test_bad_parameters_name_their_key(name: str, raw: dict[str, Any], path: str) -> None:
    with pytest.raises(InputError) as caught:
        convert_params(cluster_policy(name).Params, raw)
    assert caught.value.path == path


@pytest.mark.parametrize("name", ["ossp", "mst", "allox", "gandiva-fair"])
def test_every_baseline_finishes_a_small_trace_in_rounds(name: str) -> None:
    # 12 jobs of 1-4 GPUs on 4 GPUs, 2-minute rounds: every job finishes, each policy
    # decides feasibly (the engine checks every decision), and nothing idles forever.
    jobs = [
        TraceJob(
            job_id=f"j{i:02d}",
            submit_us=60 * i * S,
            gpus=(1, 2, 4)[i % 3],
            model="resnet18",
            duration_us=(300 + 450 * (i % 4)) * S,
            mode=("static", "gns", "accordion")[i % 3],  # type: ignore[arg-type]
        )
        for i in range(12)
    ]
    policy = cluster_policy(name)
    result = simulate(
        policy,
        policy.Params(),
        jobs,
        cluster_of(1, 4, 1),
        Semantics(scheduling="round", round_s=120),
    )
    assert all(r.finish_us is not None for r in result.jobs)
    assert not result.stalled
