"""Shockwave's planning window: jobs about to finish, gang budgets, and the vectorised greedy."""

from __future__ import annotations

import random

import pytest

from actors.policies.cluster.api import ClusterView, JobView, Slot
from actors.policies.cluster.shockwave import greedy
from actors.policies.cluster.shockwave import policy as sw
from actors.policies.cluster.shockwave import predictor as pred
from actors.policies.cluster.shockwave import solver as so
from actors.policies.cluster.shockwave.ftf import Estimate, JobMemo, estimate, rank_rho
from emulator.units import S


def _near_done_problem(seated: bool) -> so.PlanProblem:
    # 4 GPUs, 2 rounds, two 4-GPU jobs. "done" has 3 s left: its round is worth
    # log(1/0.998) = 0.002; "young" gains log(0.2/0.1) = 0.69, then log(0.3/0.2) = 0.41.
    done = so.PlanJob(
        job_id="done",
        gpus=4,
        weight=1.0,
        utility=(0.998, 1.0),
        remaining_s=(3.0, 0.0),
        priority=1.0,
        seated=seated,
    )
    young = so.PlanJob(
        job_id="young",
        gpus=4,
        weight=1.0,
        utility=(0.1, 0.2, 0.3),
        remaining_s=(1080.0, 960.0, 840.0),
        priority=1.5,
    )
    return so.PlanProblem(jobs=(done, young), gpus_total=4, rounds=2, z0=1e6)


@pytest.mark.parametrize("method", ["greedy", "milp"])
def test_a_job_about_to_finish_is_seated_in_the_first_round(method: str) -> None:
    # Left to the objective, "young" takes both rounds (0.69 + 0.41 > 0.69 + 0.002)
    # and "done" waits a whole window: the finite window's blind spot.
    assert so.solve(_near_done_problem(False), method).rounds == (("young",), ("young",))
    # Seated, "done" holds the first round; "young" gets the other.
    assert so.solve(_near_done_problem(True), method).rounds == (("done",), ("young",))


def test_only_a_job_finishing_in_one_round_can_be_seated() -> None:
    with pytest.raises(ValueError, match="only a job finishing in one round is seated"):
        so.PlanJob(
            job_id="x",
            gpus=1,
            weight=1.0,
            utility=(0.1, 0.2, 0.3),
            remaining_s=(200.0, 80.0, 0.0),
            seated=True,
        )


def _est(rho: float, remaining_s: float) -> Estimate:
    return Estimate(
        remaining_s=remaining_s,
        total_s=1000.0,
        contention=1.0,
        rho=rho,
        segments=(pred.Segment(start=0.9, end=1.0, scale=1),),
    )


def _view_job(job_id: str, gpus: int, submit_s: int = 0) -> JobView:
    return JobView(
        job_id=job_id,
        gpus=gpus,
        model="m",
        submit_us=submit_s * S,
        queued_since_us=submit_s * S,
        duration_us=1000 * S,
    )


def test_seated_jobs_are_the_finishing_ones_worst_rho_first_while_gangs_fit() -> None:
    # 8 GPUs; a, b, c finish within a round (50 s left) with ρ̂ 1.2, 1.5, 1.0 and 4 GPUs
    # each: b and a fit, c does not; d (1 GPU, 500 s left) needs more than one round.
    jobs = [_view_job("a", 4), _view_job("b", 4), _view_job("c", 4), _view_job("d", 1)]
    est = {"a": _est(1.2, 50), "b": _est(1.5, 50), "c": _est(1.0, 50), "d": _est(3.0, 500)}
    assert sw._seated(jobs, est, sw.ShockwaveParams(), 8) == {"a", "b"}


def test_policy_runs_the_job_that_finishes_within_a_round_first() -> None:
    # t = 1080 s, one 4-GPU machine, window of 2 rounds. a (2000 s) is half done and
    # running; b (1000 s) has 10 s left and waits. Contention max(1, 2/4) = 1 over
    # both lives: ρ̂_a = (1080 + 1000) / 2000 = 1.04, ρ̂_b = (1080 + 10) / 1000 = 1.09.
    # a's next two rounds gain 0.113 and 0.102 (x 4 x 1.04^5), b's one 0.010 (x 4 x
    # 1.09^5): the program alone gives both rounds to a; b is seated and runs now.
    machine = (Slot(host="m0", rack="r0", gpus_total=4, gpus_free=0),)
    a = JobView(
        job_id="a",
        gpus=4,
        model="m",
        submit_us=0,
        queued_since_us=0,
        duration_us=2000 * S,
        first_start_us=0,
        executed_us=1000 * S,
        progress=0.5,
        placement=(("m0", 4),),
    )
    b = JobView(
        job_id="b",
        gpus=4,
        model="m",
        submit_us=0,
        queued_since_us=990 * S,
        duration_us=1000 * S,
        first_start_us=0,
        executed_us=990 * S,
        progress=0.99,
    )
    view = ClusterView(now_us=1080 * S, machines=machine, jobs=(a, b), round_us=120 * S)
    pol, params = sw.Shockwave(), sw.ShockwaveParams(window_rounds=2)
    decision, state = pol.decide(view, pol.initial_state(params), params)
    assert decision.preempt == ("a",)
    assert [s.job_id for s in decision.start] == ["b"]
    assert state.plan == (("a",),)


def test_budget_is_rho_to_the_k_times_weight_times_gang() -> None:
    # ρ̂ = 1.2, k = 5, weight 2, 4 GPUs: 1.2^5 x 2 x 4 = 19.907.
    job = JobView(
        job_id="g",
        gpus=4,
        model="m",
        submit_us=0,
        queued_since_us=0,
        duration_us=1000 * S,
        weight=2.0,
    )
    row = sw._plan_job(job, _est(1.2, 100), sw.ShockwaveParams())
    assert row.weight == pytest.approx(1.2**5 * 2 * 4)
    assert (row.utility, row.remaining_s) == (pytest.approx((0.9, 1.0)), (100.0, 0.0))


def test_contention_is_averaged_before_it_is_clamped() -> None:
    # One job on 4 GPUs: 0.25 jobs per GPU is remembered as such (the report clamps
    # the life average, not each instant), and an average of 0.5 counts as 1.
    view = ClusterView(
        now_us=120 * S,
        machines=(Slot(host="m0", rack="r0", gpus_total=4, gpus_free=4),),
        jobs=(_view_job("a", 1),),
        round_us=120 * S,
    )
    pol, params = sw.Shockwave(), sw.ShockwaveParams()
    _, state = pol.decide(view, pol.initial_state(params), params)
    assert state.last_contention == 0.25
    memo = JobMemo(belief=pred.prior("static", 100, 1), contention_us=0.5 * 100 * S)
    assert estimate(_view_job("a", 1), memo, 100 * S, 0.5).contention == 1.0


def test_rho_within_float_noise_ranks_as_a_tie() -> None:
    assert rank_rho(_est(1.0 + 1e-12, 1)) == rank_rho(_est(1.0 - 1e-12, 1)) == 1.0
    assert rank_rho(_est(1.01, 1)) > rank_rho(_est(1.0, 1))


def _random_problem(rng: random.Random) -> so.PlanProblem:
    jobs = []
    for i in range(rng.randint(2, 9)):
        f0, rate, util, rem = rng.uniform(0.0, 0.9), rng.uniform(0.02, 0.4), [], []
        left = (1 - f0) / rate * 120
        for n in range(rng.randint(1, 6)):
            util.append(min(1.0, f0 + n * rate))
            rem.append(max(0.0, left - 120 * n))
        jobs.append(
            so.PlanJob(
                job_id=f"j{i}",
                gpus=rng.choice([1, 2, 4]),
                weight=rng.uniform(0.5, 3.0) ** 5,
                utility=tuple(util),
                remaining_s=tuple(rem),
            )
        )
    return so.PlanProblem(
        jobs=tuple(jobs),
        gpus_total=8,
        rounds=5,
        z0=rng.uniform(1e3, 1e5),
        makespan_weight=rng.choice([1e-3, 1.0, 10.0]),
    )


def test_vectorised_trials_match_the_objective() -> None:
    # Every candidate the greedy weighs (one more round for job i; one round less for
    # a, kept by nobody or given to b) is the objective of the changed counts.
    rng = random.Random(11)
    for _ in range(30):
        p = _random_problem(rng)
        counts = [rng.randrange(len(j.utility)) for j in p.jobs]
        val = greedy._Value(p, counts)
        assert val.value() == pytest.approx(so.objective(p, counts), rel=1e-12, abs=1e-12)
        more = val.one_more()
        for i, j in enumerate(p.jobs):
            if counts[i] + 1 < len(j.utility):
                up = [*counts[:i], counts[i] + 1, *counts[i + 1 :]]
                assert more[i] == pytest.approx(so.objective(p, up), rel=1e-12, abs=1e-12)
        for a in (i for i, n in enumerate(counts) if n > 0):
            down = [*counts[:a], counts[a] - 1, *counts[a + 1 :]]
            alone, given = val.hand_over(a)
            assert alone == pytest.approx(so.objective(p, down), rel=1e-12, abs=1e-12)
            for b, j in enumerate(p.jobs):
                if b != a and down[b] + 1 < len(j.utility):
                    moved = [*down[:b], down[b] + 1, *down[b + 1 :]]
                    assert given[b] == pytest.approx(so.objective(p, moved), rel=1e-12, abs=1e-12)
