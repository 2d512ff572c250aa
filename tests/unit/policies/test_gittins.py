"""The Gittins index over a discrete service distribution (actors/policies/cluster/gittins.py)."""

from __future__ import annotations

import random

import msgspec
import pytest

from actors.policies.cluster.gittins import (
    ServiceDistribution,
    ServiceTable,
    distribution,
    from_sample,
    gittins_index,
    gittins_ratio,
)

# Tiresias Fig. 20 / Appendix C: services 4, 8 and 12, each with probability 1/3.
FIG20 = distribution([4.0, 8.0, 12.0], [1 / 3, 1 / 3, 1 / 3])

# G(a) = sup_Δ P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a]; the sup is at
# Δ = s − a for a support point s > a. Worked by hand:
FIG20_INDEX = [
    # a = 0: S − a ∈ {4, 8, 12}. Δ=4: (1/3)/4 = 1/12; Δ=8: (2/3)/((4+8+8)/3) = 1/10;
    #        Δ=12: 1/((4+8+12)/3) = 1/8  -> 1/8
    (0.0, 1 / 8),
    # a = 1: {3, 7, 11}. Δ=3: (1/3)/3 = 1/9; Δ=7: (2/3)/(17/3) = 2/17; Δ=11: 3/21 = 1/7 -> 1/7
    (1.0, 1 / 7),
    # a = 2: {2, 6, 10}. Δ=2: (1/3)/2 = 1/6; Δ=6: (2/3)/(14/3) = 1/7; Δ=10: 3/18 = 1/6 -> 1/6
    (2.0, 1 / 6),
    # a = 2.5: {1.5, 5.5, 9.5}. Δ=1.5: (1/3)/1.5 = 2/9; Δ=5.5: (2/3)/(12.5/3) = 0.16;
    #          Δ=9.5: 3/16.5 = 0.1818 -> 2/9
    (2.5, 2 / 9),
    # a = 3: {1, 5, 9}. Δ=1: (1/3)/1 = 1/3; Δ=5: (2/3)/(11/3) = 2/11; Δ=9: 3/15 = 1/5 -> 1/3
    (3.0, 1 / 3),
    # a = 4: the 4-job is done, S ∈ {8, 12} w.p. 1/2 each: {4, 8}.
    #        Δ=4: (1/2)/4 = 1/8; Δ=8: 1/((4+8)/2) = 1/6 -> 1/6
    (4.0, 1 / 6),
    # a = 5: {3, 7}. Δ=3: (1/2)/3 = 1/6; Δ=7: 1/5 -> 1/5
    (5.0, 1 / 5),
    # a = 6: {2, 6}. Δ=2: (1/2)/2 = 1/4; Δ=6: 1/4 -> 1/4
    (6.0, 1 / 4),
    # a = 7: {1, 5}. Δ=1: (1/2)/1 = 1/2; Δ=5: 1/3 -> 1/2
    (7.0, 1 / 2),
    # a = 8..11: only S = 12 is left: Δ = 12 − a finishes it surely: 1/(12 − a)
    (8.0, 1 / 4),
    (9.0, 1 / 3),
    (10.0, 1 / 2),
    (11.0, 1.0),
    # a = 12: every job of the distribution is done; nothing is known: 0
    (12.0, 0.0),
    (50.0, 0.0),
]


@pytest.mark.parametrize(("attained", "index"), FIG20_INDEX, ids=[f"a={a}" for a, _ in FIG20_INDEX])
def test_fig20_index_values(attained: float, index: float) -> None:
    assert gittins_index(FIG20, attained) == pytest.approx(index, rel=1e-12)


RATIOS = [
    # (a, Δ, ratio)
    (0.0, 4.0, 1 / 12),  # (1/3) / 4
    (0.0, 6.0, 1 / 16),  # (1/3) / ((4+6+6)/3)
    (0.0, 8.0, 1 / 10),  # (2/3) / ((4+8+8)/3)
    (0.0, 100.0, 1 / 8),  # everybody finishes: 1 / E[S]
    (4.0, 4.0, 1 / 8),  # S ∈ {8, 12}: (1/2) / 4
    (9.0, 1.0, 0.0),  # 12 − 9 = 3 > 1: nobody finishes
]


@pytest.mark.parametrize(("attained", "quantum", "ratio"), RATIOS)
def test_ratio_for_one_quantum(attained: float, quantum: float, ratio: float) -> None:
    assert gittins_ratio(FIG20, attained, quantum) == pytest.approx(ratio, rel=1e-12)


@pytest.mark.parametrize(
    ("cap", "index"),
    [
        (4.0, 1 / 12),  # only Δ ≤ 4: the Δ=4 candidate
        (5.0, 1 / 12),  # Δ=5 itself: (1/3)/((4+5+5)/3) = 1/14 < 1/12
        (8.0, 1 / 10),  # Δ=8 is the best below the cap
        (12.0, 1 / 8),
        (1000.0, 1 / 8),
    ],
)
def test_index_with_a_capped_quantum(cap: float, index: float) -> None:
    assert gittins_index(FIG20, 0.0, cap) == pytest.approx(index, rel=1e-12)


def test_sup_is_the_best_ratio_over_a_fine_grid_of_quanta() -> None:
    # The sup over all Δ equals the max over support points: check against a
    # brute-force grid (which includes every support point) on random distributions.
    rng = random.Random(20190226)
    for _ in range(20):
        values = sorted(rng.sample(range(1, 40), 5))
        dist = distribution(values, [rng.uniform(0.1, 1.0) for _ in values])
        table = ServiceTable(dist)
        for attained in (0.0, 0.5, float(values[1]), values[2] + 0.25):
            grid = [d / 4 for d in range(1, 4 * 40)]
            brute = max(table.ratio(attained, d) for d in grid)
            assert table.index(attained) == pytest.approx(brute, rel=1e-12)


def test_from_sample_merges_repeats_into_probabilities() -> None:
    # 12 appears twice in four finished jobs: P(12) = 1/2, P(4) = P(8) = 1/4.
    dist = from_sample([12.0, 4.0, 12.0, 8.0])
    assert dist.values == (4.0, 8.0, 12.0)
    assert dist.probs == pytest.approx((0.25, 0.25, 0.5))
    # Weights need not be normalised.
    assert distribution([8, 4], [2, 2]).probs == pytest.approx((0.5, 0.5))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: distribution([], None), "gittins.values must not be empty"),
        (lambda: distribution([4.0, 0.0]), "gittins.values[0] must be > 0"),
        (lambda: distribution([4.0, 8.0], [1.0]), "gittins.probs has 1 entries for 2 values"),
        (lambda: distribution([4.0, 8.0], [1.0, -1.0]), "gittins.probs[1] must be > 0"),
        (
            lambda: ServiceDistribution(values=(8.0, 4.0), probs=(0.5, 0.5)),
            "gittins.values[1] must be > values[0]",
        ),
        (lambda: ServiceDistribution(values=(4.0,), probs=(0.5,)), "gittins.probs must sum to 1"),
        (lambda: gittins_ratio(FIG20, 0.0, 0.0), "gittins quantum must be > 0"),
        (lambda: gittins_index(FIG20, 0.0, -1.0), "gittins quantum_max must be > 0"),
    ],
)
def test_invalid_inputs_are_rejected_by_name(build, message: str) -> None:
    with pytest.raises((ValueError, msgspec.ValidationError)) as err:
        build()
    assert message in str(err.value)


def test_a_support_point_within_the_slack_above_the_attained_service_counts_as_outlived() -> None:
    # Services 4, 8, 12 GPU-s. A job at 3.999 finishes within 4 more only if its
    # service is 4; with a slack of 0.01 it counts as past 4, and no point lies in
    # (4.009, 7.999]. The Tiresias policy passes its `crossing_slack_s`.
    table = ServiceTable(distribution((4.0, 8.0, 12.0)))
    assert table.ratio(3.999, 4.0) == pytest.approx((1 / 3) / (0.001 / 3 + 4 * 2 / 3))
    assert table.ratio(3.999, 4.0, slack=0.01) == 0.0
    assert table.ratio(3.999, 4.0, slack=0.0009) == table.ratio(3.999, 4.0)
