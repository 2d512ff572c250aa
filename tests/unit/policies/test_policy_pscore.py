"""P_score: the preference order, its scalar value, and sums over a workload's jobs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.policies.mast.placement.pscore import JOBS_PER_WORKLOAD_MAX, PScore

H_S = 3_600


def free(racks: int = 1) -> PScore:
    return PScore(racks=racks)


def preempt(victims: int = 1, priority: int = 7, run_s: int = 10 * H_S, racks: int = 1):
    return PScore(victims=victims, victim_priority=priority, victim_run_s=run_s, racks=racks)


BETTER = [
    # (name, better, worse)
    ("no preemption beats preemption, even spread", free(racks=9), preempt(racks=1)),
    # victims of priority 7 beat one of priority 6, though there are three and they are young
    (
        "lower-priority victims",
        preempt(victims=3, priority=7, run_s=60),
        preempt(victims=1, priority=6, run_s=100 * H_S),
    ),
    # the most important victim decides: {7, 5} is worse than {6, 6}
    ("the most important victim counts", preempt(priority=6), preempt(priority=5)),
    ("fewer victims", preempt(victims=1, run_s=60), preempt(victims=2, run_s=100 * H_S)),
    ("longer-running victims", preempt(run_s=10 * H_S, racks=5), preempt(run_s=H_S, racks=1)),
    # a victim that started 5 minutes ago vs 50: the old one is the better pick
    ("just-started jobs are spared", preempt(run_s=50 * 60), preempt(run_s=5 * 60)),
    ("locality without preemption", free(racks=1), free(racks=2)),
    ("locality with preemption", preempt(racks=1), preempt(racks=2)),
]


@pytest.mark.parametrize(("better", "worse"), [c[1:] for c in BETTER], ids=[c[0] for c in BETTER])
def test_preference_order(better: PScore, worse: PScore) -> None:
    assert better.value > worse.value
    assert better.order_key > worse.order_key


def test_worked_values() -> None:
    # free, 2 racks: W_FREE - 2 = 1e13 - 2
    assert free(racks=2).value == 1e13 - 2
    # 1 victim of priority 7 that ran 1 h (60 min), 1 rack:
    # -(1e11*(7-7) + 1e8*1 + 1e3*(9999-60) + 1*1) = -(1e8 + 9,939,000 + 1)
    assert preempt(run_s=H_S).value == -109_939_001.0
    # 2 victims, top priority 5, 20 min, 3 racks:
    # -(1e11*2 + 1e8*2 + 1e3*(9999-20) + 3) = -(200,000,000,000 + 200,000,000 + 9,979,000 + 3)
    assert preempt(victims=2, priority=5, run_s=1_200, racks=3).value == -200_209_979_003.0


def total(jobs: list[PScore]) -> float:
    return sum(j.value for j in jobs)


def test_workload_sums_keep_the_preferences() -> None:
    # Two-job workloads, job by job as worked out in the bands:
    # one preempting job always loses to none, whatever the racks: (1e13-1 + 1e13-99) vs
    # (1e13-1 + -(1e8 + 1e3*9399 + 1)).
    assert total([free(1), free(99)]) > total([free(1), preempt()])
    # the same kinds of plans in the other order score the same
    assert total([free(), preempt()]) == total([preempt(), free()])
    # importance dominates count, run time and racks summed over the jobs:
    # [victim p6 x1, free] vs [victims p7 x99 (young), free 99 racks]
    worse = [preempt(victims=1, priority=6, run_s=100 * H_S), free(1)]
    better = [preempt(victims=99, priority=7, run_s=0, racks=99), free(99)]
    assert total(better) > total(worse)


keys = st.builds(
    PScore,
    victims=st.integers(0, 99),
    victim_priority=st.integers(1, 7),
    victim_run_s=st.integers(0, 9_999 * 60),
    racks=st.integers(0, 99),
).map(
    lambda s: s if s.victims else PScore(racks=s.racks)  # no victims -> no victim facts
)


@given(keys, keys)
def test_value_orders_like_the_key_within_the_caps(a: PScore, b: PScore) -> None:
    if a.order_key > b.order_key:
        assert a.value > b.value
    elif a.order_key == b.order_key:
        assert a.value == b.value


@given(
    st.lists(keys, min_size=1, max_size=JOBS_PER_WORKLOAD_MAX),
    st.lists(keys, min_size=1, max_size=JOBS_PER_WORKLOAD_MAX),
)
def test_fewer_preempting_jobs_always_win_the_sum(a: list[PScore], b: list[PScore]) -> None:
    # Compare workloads of the same number of jobs (one workload, two regions).
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    preempting_a = sum(s.preempts for s in a)
    preempting_b = sum(s.preempts for s in b)
    if preempting_a < preempting_b:
        assert total(a) > total(b)
