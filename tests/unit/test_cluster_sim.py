"""The reference single-cluster engine (actors/cluster/engine.py) and its metrics (cluster_metrics).

The policies here are test-only: a strict FIFO, a newest-first policy that
preempts, and scripted ones that return a fixed (possibly wrong) decision.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, ClassVar

import msgspec
import pytest

from actors.cluster.engine import (
    Semantics,
    SimResult,
    cluster_of,
    simulate,
)
from actors.cluster.metrics import contention_factors, rho, summarize
from actors.policies.cluster import perf_model as pm
from actors.policies.cluster.api import (
    AcceptsEveryOffer,
    ClusterView,
    Decision,
    Start,
    TraceJob,
)
from actors.policies.cluster.placement import best_tier, give_back, take
from emulator.errors import PolicyContractError
from emulator.units import S

NO_COSTS = Semantics(preemption_cost=False, comm_model=False)


class NoParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Test policies take no parameters."""


class Fifo(AcceptsEveryOffer):
    """Strict FIFO in arrival order: start the head while it fits, at its best tier."""

    name: ClassVar[str] = "test-fifo"
    Params: ClassVar[type] = NoParams

    def initial_state(self, params: Any) -> None:
        return None

    def decide(self, view: ClusterView, state: Any, params: Any) -> tuple[Decision, Any]:
        machines, starts = view.machines, []
        for j in view.jobs:
            if j.running:
                continue
            got = best_tier(machines, j.gpus)
            if got is None:
                break
            machines = take(machines, got[1])
            starts.append(Start(job_id=j.job_id, placement=got[1], tier=got[0]))
        return Decision(start=tuple(starts)), state


class NewestFirst(AcceptsEveryOffer):
    """The newest waiting job preempts older running jobs (oldest first) until it fits."""

    name: ClassVar[str] = "test-newest-first"
    Params: ClassVar[type] = NoParams

    def initial_state(self, params: Any) -> None:
        return None

    def decide(self, view: ClusterView, state: Any, params: Any) -> tuple[Decision, Any]:
        waiting = [j for j in view.jobs if not j.running]
        if not waiting:
            return Decision(), state
        newest = max(waiting, key=lambda j: (j.submit_us, j.job_id))
        machines, preempt = view.machines, []
        for r in sorted((j for j in view.jobs if j.running), key=lambda j: (j.submit_us, j.job_id)):
            if best_tier(machines, newest.gpus) is not None or r.submit_us >= newest.submit_us:
                break
            preempt.append(r.job_id)
            machines = give_back(machines, r.placement)
        if best_tier(machines, newest.gpus) is None:
            return Decision(), state
        starts = []
        for j in [newest, *(w for w in waiting if w is not newest)]:
            got = best_tier(machines, j.gpus)
            if got is not None:
                machines = take(machines, got[1])
                starts.append(Start(job_id=j.job_id, placement=got[1], tier=got[0]))
        return Decision(preempt=tuple(preempt), start=tuple(starts)), state


class Scripted(AcceptsEveryOffer):
    """Returns whatever `script(view)` says; used for wrong decisions and wake-ups."""

    name: ClassVar[str] = "test-scripted"
    Params: ClassVar[type] = NoParams

    def __init__(self, script: Callable[[ClusterView], Decision]) -> None:
        self.script = script

    def initial_state(self, params: Any) -> None:
        return None

    def decide(self, view: ClusterView, state: Any, params: Any) -> tuple[Decision, Any]:
        return self.script(view), state


def job(
    job_id: str,
    submit_s: float,
    gpus: int,
    duration_s: float,
    model: str = "resnet50",
    mode: str = "static",
) -> TraceJob:
    return TraceJob(
        job_id=job_id,
        submit_us=round(submit_s * S),
        gpus=gpus,
        model=model,
        duration_us=round(duration_s * S),
        mode=mode,
    )  # type: ignore[arg-type]


def by_id(result: SimResult) -> dict[str, Any]:
    return {r.job_id: r for r in result.jobs}


def jct_s(result: SimResult, job_id: str) -> float:
    r = by_id(result)[job_id]
    return (r.finish_us - r.submit_us) / S


# --- a lone job ----------------------------------------------------------------

# Two racks of one 4-GPU machine: an 8-GPU job must span racks (network tier).
TWO_RACKS = cluster_of(2, 4, 1)


@pytest.mark.parametrize(
    ("semantics", "model", "expected_s"),
    [
        (NO_COSTS, "resnet18", 100.0),
        (Semantics(comm_model=False), "resnet18", 100.0),
        # ResNet-18 at network tier on 8 GPUs: 100 s × 28.49/1.07 = 2662.617 s.
        (Semantics(), "resnet18", 100.0 * 28.49 / 1.07),
        # VGG11: 100 s × 1.07/1.01 = 105.941 s.
        (Semantics(), "vgg11", 100.0 * 1.07 / 1.01),
    ],
)
def test_lone_job_runs_its_duration_stretched_by_the_network_slowdown(
    semantics: Semantics, model: str, expected_s: float
) -> None:
    result = simulate(Fifo(), NoParams(), [job("a", 0, 8, 100, model)], TWO_RACKS, semantics)
    r = by_id(result)["a"]
    assert r.first_start_us == 0
    assert r.finish_us == pytest.approx(expected_s * S, abs=1)
    # The time lost to communication is the stretch itself; 8 GPUs held throughout.
    assert r.comm_overhead_us == pytest.approx((expected_s - 100.0) * S, abs=2)
    assert result.gpu_busy_us == 8 * r.finish_us
    assert summarize(result)["utilization"] == pytest.approx(1.0)


def test_lone_job_on_one_machine_is_not_slowed() -> None:
    result = simulate(Fifo(), NoParams(), [job("a", 7, 4, 100, "mobilenetv3")], TWO_RACKS)
    assert by_id(result)["a"].finish_us == 107 * S


def test_gns_job_speeds_up_through_its_regimes() -> None:
    # 25 s of work at each of 1, g, g², g³: 100 s × 0.78205 = 78.205 s (ceil per regime: ≤ 4 µs).
    result = simulate(Fifo(), NoParams(), [job("a", 0, 1, 100, mode="gns")], TWO_RACKS)
    r = by_id(result)["a"]
    assert r.finish_us == pytest.approx(100 * S * pm.exclusive_factor("gns"), abs=4)
    assert r.exclusive_us == r.finish_us  # alone and consolidated, it runs its exclusive time


# --- preemption cost -------------------------------------------------------------

ONE_GPU = cluster_of(1, 1, 1)
# A (100 s) runs from 0; B (20 s) arrives at 10 s and preempts it.
PREEMPTED = [job("a", 0, 1, 100), job("b", 10, 1, 20)]
CKPT_S = 0.5 + 97.7 / 200  # ResNet-50 checkpoint: 0.9885 s
RESTORE_S = 5.0 + 97.7 / 200  # ResNet-50 restore on 1 GPU: 5.4885 s


@pytest.mark.parametrize(
    ("cost", "a_jct_s", "b_start_s", "b_jct_s"),
    [
        # No cost: B runs 10–30, A resumes at 30 with 90 s left: done at 120.
        (False, 120.0, 10.0, 20.0),
        # With cost: A checkpoints 10–10.9885 holding the GPU, so B starts at
        # 10.9885 and ends at 30.9885; A restores for 5.4885 s, runs 90 s: 126.477.
        (True, 120.0 + CKPT_S + RESTORE_S, 10.0 + CKPT_S, 20.0 + CKPT_S),
    ],
)
def test_preemption_cost_adds_checkpoint_and_restore(
    cost: bool, a_jct_s: float, b_start_s: float, b_jct_s: float
) -> None:
    sem = Semantics(preemption_cost=cost, comm_model=False)
    result = simulate(NewestFirst(), NoParams(), PREEMPTED, ONE_GPU, sem)
    a, b = by_id(result)["a"], by_id(result)["b"]
    assert jct_s(result, "a") == pytest.approx(a_jct_s, abs=1e-6)
    assert b.first_start_us == pytest.approx(b_start_s * S, abs=1)
    assert jct_s(result, "b") == pytest.approx(b_jct_s, abs=1e-6)
    assert (a.preemptions, b.preemptions) == (1, 0)
    assert a.checkpoint_us == (round(CKPT_S * S) if cost else 0)
    assert a.restore_us == (round(RESTORE_S * S) if cost else 0)
    for r in (a, b):  # every µs of a job's life is queued, running or checkpointing
        assert r.finish_us - r.submit_us == r.queued_us + r.run_us + r.checkpoint_us
    # A waited for B: 20 s either way (from its checkpoint's end to B's end).
    assert a.queued_us == 20 * S
    m = summarize(result)
    assert m["preemptions"] == 1
    assert m["preemption_overhead_s"] == pytest.approx(CKPT_S + RESTORE_S if cost else 0.0)


# --- round mode --------------------------------------------------------------------


class Spy(Fifo):
    """FIFO that records the instants it decides at (a test-only side effect).

    It asks to be woken at `wake_at_s` until that time has passed.
    """

    def __init__(self, wake_at_s: float | None = None) -> None:
        self.wake_at_us = None if wake_at_s is None else round(wake_at_s * S)
        self.seen: list[tuple[int, int | None]] = []

    def decide(self, view: ClusterView, state: Any, params: Any) -> tuple[Decision, Any]:
        self.seen.append((view.now_us, view.round_us))
        decision, state = super().decide(view, state, params)
        wake = self.wake_at_us if self.wake_at_us and view.now_us < self.wake_at_us else None
        return msgspec.structs.replace(decision, wake_at_us=wake), state


TWO_JOBS = [job("a", 5, 1, 30), job("b", 70, 1, 10)]


def test_round_mode_decides_only_at_round_boundaries() -> None:
    # One GPU, 60 s rounds. A (30 s) arrives at 5 s: starts at the 60 s round,
    # ends at 90 s; B arrives at 70 s and waits for the 120 s round even though
    # the GPU is free from 90 s; it ends at 130 s. The empty first round is
    # skipped, and the wake-up asked for at 50 s is ignored.
    spy = Spy(wake_at_s=50)
    sem = Semantics(scheduling="round", round_s=60, preemption_cost=False, comm_model=False)
    result = simulate(spy, NoParams(), TWO_JOBS, ONE_GPU, sem)
    assert {r.job_id: r.first_start_us for r in result.jobs} == {"a": 60 * S, "b": 120 * S}
    assert spy.seen == [(60 * S, 60 * S), (120 * S, 60 * S)]
    assert result.decisions == 2


@pytest.mark.parametrize(
    ("wake_at_s", "decisions_s"),
    [
        # Arrivals at 5 and 70 s, completions at 35 and 80 s.
        (None, [5, 35, 70, 80]),
        # Plus the wake-up asked for at 50 s.
        (50, [5, 35, 50, 70, 80]),
    ],
)
def test_event_mode_decides_at_arrivals_completions_and_wake_ups(
    wake_at_s: float | None, decisions_s: list[int]
) -> None:
    spy = Spy(wake_at_s)
    result = simulate(spy, NoParams(), TWO_JOBS, ONE_GPU, NO_COSTS)
    assert {r.job_id: r.first_start_us for r in result.jobs} == {"a": 5 * S, "b": 70 * S}
    assert spy.seen == [(t * S, None) for t in decisions_s]


# --- failures and wrong decisions ---------------------------------------------------


def test_a_job_wider_than_the_cluster_fails_at_arrival() -> None:
    jobs = [job("huge", 0, 16, 10), job("a", 0, 4, 10)]
    result = simulate(Fifo(), NoParams(), jobs, TWO_RACKS, NO_COSTS)
    huge = by_id(result)["huge"]
    assert huge.failed and huge.finish_us is None and huge.first_start_us is None
    assert by_id(result)["a"].finish_us == 10 * S  # "huge" never blocks the queue
    assert summarize(result)["failed"] == 1


def _offer(job_id: str, placement: tuple[tuple[str, int], ...], tier: str = "network") -> Decision:
    return Decision(start=(Start(job_id=job_id, placement=placement, tier=tier),))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (lambda v: Decision(preempt=("a",)), "job 'a': preempted but it is not running"),
        (lambda v: _offer("ghost", (("m000", 1),)), "job 'ghost': offered but it is not waiting"),
        (lambda v: _offer("a", (("m000", 1),)), "is not 8 GPUs"),
        (lambda v: _offer("a", (("m000", 8),)), "over the free GPUs of m000"),
        (lambda v: _offer("a", (("m000", 4), ("m999", 4))), "names 'm999'"),
        (lambda v: _offer("a", (("m000", 4), ("m001", 4)), "rack"), "network-tier placement"),
    ],
)
def test_an_invalid_decision_raises_naming_policy_and_job(script: Callable, message: str) -> None:
    with pytest.raises(PolicyContractError, match="policy 'test-scripted'") as err:
        simulate(Scripted(script), NoParams(), [job("a", 0, 8, 10)], TWO_RACKS)
    assert message in str(err.value)


def test_a_running_job_offered_again_raises() -> None:
    def script(v: ClusterView) -> Decision:
        return _offer("a", (("m000", 1),))

    jobs = [job("a", 0, 1, 10), job("b", 5, 1, 10)]  # the 5 s decision offers "a" again
    with pytest.raises(PolicyContractError, match="job 'a': offered but it is not waiting"):
        simulate(Scripted(script), NoParams(), jobs, TWO_RACKS)


def test_waking_at_the_same_instant_forever_is_a_livelock() -> None:
    policy = Scripted(lambda v: Decision(wake_at_us=v.now_us))
    with pytest.raises(PolicyContractError, match="test-scripted"):
        simulate(policy, NoParams(), [job("a", 3, 1, 10)], TWO_RACKS)


def test_a_policy_that_never_starts_anything_stalls_the_run() -> None:
    policy = Scripted(lambda v: Decision(wake_at_us=v.now_us + S))
    result = simulate(policy, NoParams(), [job("a", 0, 1, 10)], TWO_RACKS)
    assert result.stalled and summarize(result)["unfinished"] == 1


def test_until_stops_the_run_with_jobs_unfinished() -> None:
    result = simulate(Fifo(), NoParams(), [job("a", 0, 1, 100)], TWO_RACKS, until_us=40 * S)
    r = by_id(result)["a"]
    assert r.finish_us is None and r.run_us == 40 * S and result.end_us == 40 * S
    assert summarize(result)["unfinished"] == 1


# --- determinism and speed -------------------------------------------------------------


def random_trace(n: int, seed: int, gpus: tuple[int, ...] = (1, 1, 2, 4, 8)) -> list[TraceJob]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(1 / 30)
        out.append(
            job(
                f"j{i:04d}",
                round(t),
                rng.choice(gpus),
                rng.uniform(60, 3600),
                rng.choice(["resnet50", "vgg16", "bert", "unknown"]),
                rng.choice(["static", "gns", "accordion"]),
            )
        )
    return out


@pytest.mark.parametrize("scheduling", ["event", "round"])
def test_same_input_gives_identical_results_whatever_the_input_order(scheduling: str) -> None:
    jobs = random_trace(150, seed=7)
    sem = Semantics(scheduling=scheduling)  # type: ignore[arg-type]
    machines = cluster_of(8, 4, 2)
    first = simulate(NewestFirst(), NoParams(), jobs, machines, sem)
    again = simulate(NewestFirst(), NoParams(), jobs, machines, sem)
    shuffled = simulate(
        NewestFirst(), NoParams(), random.Random(1).sample(jobs, len(jobs)), machines, sem
    )
    assert msgspec.json.encode(first) == msgspec.json.encode(again)

    # Input order only permutes the result list.
    def by_job(r: Any) -> str:
        return r.job_id

    assert sorted(first.jobs, key=by_job) == sorted(shuffled.jobs, key=by_job)
    assert sum(r.preemptions for r in first.jobs) > 0
    for r in first.jobs:
        assert r.finish_us is not None
        assert r.finish_us - r.submit_us == r.queued_us + r.run_us + r.checkpoint_us
    assert 0 < summarize(first)["utilization"] <= 1.0


def test_a_thousand_jobs_on_256_gpus_with_fifo_is_fast() -> None:
    jobs = random_trace(1000, seed=3, gpus=(1, 1, 2, 4, 8, 16))
    started = time.perf_counter()
    result = simulate(Fifo(), NoParams(), jobs, cluster_of(64, 4, 8))
    assert time.perf_counter() - started < 4.0  # ~0.4 s on a laptop; generous for loaded CI
    assert all(r.finish_us is not None for r in result.jobs)


# --- metrics on a hand-worked example ------------------------------------------------


@pytest.mark.parametrize("count_failed", [True, False])
def test_metrics_on_three_jobs_by_hand(count_failed: bool) -> None:
    # One GPU, FIFO, no costs. A (0 s, 100 s) runs 0–100, B (10 s, 50 s) runs
    # 100–150, C (20 s, 10 s) runs 150–160. "wide" (2 GPUs) fails at arrival.
    jobs = [job("a", 0, 1, 100), job("b", 10, 1, 50), job("c", 20, 1, 10), job("wide", 5, 2, 10)]
    sem = Semantics(preemption_cost=False, comm_model=False, count_failed=count_failed)
    m = summarize(simulate(Fifo(), NoParams(), jobs, ONE_GPU, sem))
    # JCT 100, 140, 140 (+ 0 for the failed job when counted).
    # Counted: avg 380/4 = 95; sorted [0,100,140,140]: median 120; p95 rank 2.85 -> 140.
    # Not counted: avg 126.667; median 140; p95 rank 1.9 -> 140.
    jct = (
        {"avg": 95.0, "median": 120.0, "p95": 140.0}
        if count_failed
        else {"avg": 380 / 3, "median": 140.0, "p95": 140.0}
    )
    assert m["jct_s"] == pytest.approx(jct)
    # Queueing 0, 90, 130 (+ 0). Counted: avg 55; median (0,0,90,130) 45; p95 rank
    # 2.85 -> 90 + 0.85·40 = 124. Not counted: avg 73.333; median 90; p95 rank 1.9 -> 126.
    queued = (
        {"avg": 55.0, "median": 45.0, "p95": 124.0}
        if count_failed
        else {"avg": 220 / 3, "median": 90.0, "p95": 126.0}
    )
    assert m["queueing_delay_s"] == pytest.approx(queued)
    assert m["makespan_s"] == 160.0
    assert m["utilization"] == pytest.approx(1.0)  # 160 GPU-s held of 1 GPU × 160 s
    # Jobs present: 1 on [0,10), 2 on [10,20), 3 on [20,100), 2 on [100,150), 1 on [150,160).
    # A [0,100]: (10·1 + 10·2 + 80·3)/100 = 2.7 jobs per GPU -> ρ = 100/(100·2.7) = 0.370.
    # B [10,150]: (10·2 + 80·3 + 50·2)/140 = 2.571 -> ρ = 140/(50·2.571) = 1.089.
    # C [20,160]: (80·3 + 50·2 + 10·1)/140 = 2.5 -> ρ = 140/(10·2.5) = 5.6.
    assert m["ftf"] == pytest.approx({"worst": 5.6, "unfair_fraction": 2 / 3})
    assert (m["preemptions"], m["comm_overhead_s"], m["unfinished"], m["failed"]) == (0, 0, 0, 1)
    assert m["semantics"]["count_failed"] is count_failed


def test_contention_below_one_job_per_gpu_counts_as_one() -> None:
    # Two 1-GPU jobs alone on 8 GPUs: 2/8 jobs per GPU is clamped to 1, so ρ = JCT/exclusive = 1.
    jobs = [job("a", 0, 1, 100), job("b", 0, 1, 50, mode="gns")]
    m = summarize(simulate(Fifo(), NoParams(), jobs, TWO_RACKS, NO_COSTS))
    assert m["ftf"]["worst"] == pytest.approx(1.0, abs=1e-6)
    assert m["ftf"]["unfair_fraction"] == 0.0


@pytest.mark.parametrize(
    ("counts", "rhos"),
    [
        # A (2 GPUs, 100 s) runs 0–100 on both GPUs, B (1 GPU, 50 s) waits and runs 100–150.
        # Jobs per GPU: A [0,100] 2/2 = 1 -> ρ 1; B [0,150] (100·2 + 50·1)/150/2 = 0.83,
        # clamped to 1 -> ρ 150/50 = 3.
        ("jobs", (1.0, 3.0)),
        # GPUs asked per GPU: A 3/2 -> ρ 100/150; B (100·3 + 50·1)/150/2 = 7/6 -> ρ 150/(50·7/6).
        ("gpus", (100 / 150, 150 / (50 * 7 / 6))),
    ],
)
def test_ftf_contention_counts_jobs_or_the_gpus_they_ask_for(
    counts: str, rhos: tuple[float, float]
) -> None:
    jobs = [job("a", 0, 2, 100), job("b", 0, 1, 50)]
    sem = Semantics(preemption_cost=False, comm_model=False, ftf_contention=counts)  # type: ignore[arg-type]
    result = simulate(Fifo(), NoParams(), jobs, cluster_of(1, 2, 1), sem)
    n_avg = contention_factors(result)
    got = tuple(rho(r, n_avg[r.job_id]) for r in sorted(result.jobs, key=lambda r: r.job_id))
    assert got == pytest.approx(rhos)
    m = summarize(result)
    assert m["ftf"]["worst"] == pytest.approx(max(rhos))
    assert m["semantics"]["ftf_contention"] == counts


class Chaos(AcceptsEveryOffer):
    """Seeded random decisions (a pure function of the view): preempts, starts, wake-ups.

    It also checks, at every call, that the view accounts for every GPU:
    free + held by running jobs == total.
    """

    name: ClassVar[str] = "test-chaos"
    Params: ClassVar[type] = NoParams

    def initial_state(self, params: Any) -> int:
        return 0

    def decide(self, view: ClusterView, state: Any, params: Any) -> tuple[Decision, Any]:
        total = sum(s.gpus_total for s in view.machines)
        held = sum(j.gpus for j in view.jobs if j.running)
        assert sum(s.gpus_free for s in view.machines) + held == total
        rng = random.Random(state * 1_000_003 + view.now_us)
        running = [j for j in view.jobs if j.running]
        preempt = [j for j in running if rng.random() < 0.3]
        machines = view.machines
        for j in preempt:
            machines = give_back(machines, j.placement)
        starts = []
        for j in view.jobs:
            if not j.running and rng.random() < 0.7:
                got = best_tier(machines, j.gpus)
                if got is not None:
                    machines = take(machines, got[1])
                    starts.append(Start(job_id=j.job_id, placement=got[1], tier="network"))
        decision = Decision(
            preempt=tuple(j.job_id for j in preempt),
            start=tuple(starts),
            wake_at_us=view.now_us + rng.choice([0, 1, 500_000, 30 * S]),
        )
        return decision, state + 1


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("scheduling", ["event", "round"])
def test_random_preemptions_keep_the_books_balanced(seed: int, scheduling: str) -> None:
    jobs = random_trace(40, seed=seed)
    sem = Semantics(scheduling=scheduling, round_s=30)  # type: ignore[arg-type]
    result = simulate(Chaos(), NoParams(), jobs, cluster_of(4, 4, 2), sem)
    assert not result.stalled
    assert sum(r.preemptions for r in result.jobs) > 10
    for r in result.jobs:
        assert r.finish_us is not None and r.queued_us >= 0 and r.run_us >= r.restore_us
        assert r.finish_us - r.submit_us == r.queued_us + r.run_us + r.checkpoint_us
        assert r.finish_us - r.first_start_us >= r.exclusive_us - 4  # never faster than alone
    assert result.gpu_busy_us <= result.gpus_total * result.end_us
