"""Philly-, Gavel- and Dally-like workload generators: published proportions, arrivals, seeds.

Proportion checks draw N jobs from a fixed seed and compare each share with
the published one within `tol`. The standard error of a share p over N
draws is √(p(1−p)/N); each tolerance is about four of them (worked out in
the comments), so a correct generator fails with odds far below 1e-4 while
a wrong proportion (a swapped or missing weight) is off by several times
the tolerance.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections import Counter

import msgspec
import pytest

from actors.cluster.workloads import (
    DALLY_MODELS,
    DALLY_POISSON,
    GAVEL_MODELS,
    TIRESIAS_MODELS,
    Arrivals,
    DallyParams,
    GavelParams,
    PhillyParams,
    arrival_times_us,
    dally_jobs,
    gavel_jobs,
    gavel_size_class,
    philly_jobs,
)
from emulator.rng import RngStreams
from emulator.units import S

N = 20_000


def _rng(seed: int = 7) -> random.Random:
    return RngStreams(seed).stream("workload", "cluster")


def _share(values: list, key: object) -> float:
    return sum(1 for v in values if v == key) / len(values)


@pytest.fixture(scope="module")
def philly() -> tuple:
    return philly_jobs(PhillyParams(arrivals=Arrivals(rate_per_s=1 / 30, num_jobs=N)), _rng())


@pytest.fixture(scope="module")
def gavel() -> tuple:
    params = GavelParams(arrivals=Arrivals(rate_per_s=0.1, num_jobs=N), mode_weights=(1, 1, 2))
    return gavel_jobs(params, _rng())


@pytest.fixture(scope="module")
def gavel_classes(gavel) -> list[str]:
    return [gavel_size_class(j) for j in gavel]


# Tiresias §5.1: 480 jobs = 240 one-GPU + 40×2 + 80×4 + 90×8 + 25×16 + 5×32.
# SE at N = 20,000: p=0.5 → 0.0035, p=0.1875 → 0.0028, p=0.0104 → 0.0007.
@pytest.mark.parametrize(
    ("gpus", "share", "tol"),
    [
        (1, 240 / 480, 0.014),  # 0.5
        (2, 40 / 480, 0.008),  # 0.0833
        (4, 80 / 480, 0.011),  # 0.1667
        (8, 90 / 480, 0.011),  # 0.1875
        (16, 25 / 480, 0.006),  # 0.0521
        (32, 5 / 480, 0.003),  # 0.0104
    ],
)
def test_philly_gpu_counts_follow_the_testbed_mix(philly, gpus, share, tol):
    got = _share([j.gpus for j in philly], gpus)
    assert abs(got - share) <= tol, (gpus, got, share)


# Table 3: SS/SL/LS/LL = 63.5/12.5/16.5/7.5 %, small = ≤ 4 GPUs, short = < 800 s.
# P(short | small) = 63.5/76 = 0.8355 over ~15,000 small jobs (SE 0.003);
# P(short | large) = 16.5/24 = 0.6875 over ~5,000 large jobs (SE 0.0066).
@pytest.mark.parametrize(
    ("small", "short_share", "tol"),
    [(True, 63.5 / 76, 0.012), (False, 16.5 / 24, 0.026)],
)
def test_philly_short_share_per_size_follows_table_3(philly, small, short_share, tol):
    jobs = [j for j in philly if (j.gpus <= 4) == small]
    got = _share([j.duration_us < 800 * S for j in jobs], True)
    assert abs(got - short_share) <= tol, (small, got, short_share)


def test_philly_durations_span_2_min_to_2_h_and_models_are_uniform(philly):
    assert min(j.duration_us for j in philly) >= 120 * S
    assert max(j.duration_us for j in philly) <= 7200 * S
    # 10 models, 0.1 each (SE 0.0021 at N = 20,000).
    counts = Counter(j.model for j in philly)
    assert set(counts) == set(TIRESIAS_MODELS)
    assert all(abs(c / N - 0.1) <= 0.009 for c in counts.values()), counts


# The bounded Pareto tail (workloads.PhillyParams.duration_tail_alpha = 0.76 on [120, 7200] s)
# against what Tiresias publishes of its testbed run, expected values worked out from the law:
# SS mean α/(1-α)·(800^(1-α) - 120^(1-α)) / (120^-α - 800^-α) = 287 s (Bin 1's average JCT under
# Tiresias-L: 300 s); median = the short bin's 0.5/0.8 quantile, 120·(1 - 0.625·(1 - 0.15^α))^(-1/α)
# = 282 s (27x Tiresias-L's median JCT with 13 s and 7464 s median queueing: ~274 s); mean
# 0.8·287 + 0.2·2167 = 663 s (Fig. 10 and Table 4: 630-790 s). SE at N = 20,000 (sd ~1010 s):
# mean 7 s, SS mean ~1.3 s.
def test_philly_durations_have_the_testbeds_heavy_tail(philly):
    durations = sorted(j.duration_us / S for j in philly)
    short_small = [j.duration_us / S for j in philly if j.gpus <= 4 and j.duration_us < 800 * S]
    assert abs(durations[len(durations) // 2] - 282) <= 12
    assert abs(statistics.fmean(short_small) - 287) <= 6
    assert abs(statistics.fmean(durations) - 663) <= 25
    # One bounded Pareto over the whole range puts Table 3's 80% of jobs below 800 s.
    alpha = PhillyParams().duration_tail_alpha
    assert (1 - (120 / 800) ** alpha) / (1 - (120 / 7200) ** alpha) == pytest.approx(0.8, abs=0.002)


def test_philly_tail_alpha_0_is_log_uniform_within_the_bins():
    # Same draws, α = 0: each duration is lo·(hi/lo)^u, so its log is uniform within its bin.
    jobs = philly_jobs(PhillyParams(duration_tail_alpha=0.0), _rng(3))
    short = [
        math.log(j.duration_us / S / 120) / math.log(800 / 120)
        for j in jobs
        if j.duration_us < 800 * S
    ]
    assert abs(statistics.fmean(short) - 0.5) <= 0.05 and len(short) > 300


def test_philly_duration_scale_stretches_every_duration_and_nothing_else():
    base = philly_jobs(PhillyParams(), _rng(3))
    long = philly_jobs(PhillyParams(duration_scale=18.0), _rng(3))
    for a, b in zip(base, long, strict=True):
        # 18 × the same draw; both sides round to whole µs, so 18 µs of slack.
        assert abs(b.duration_us - 18 * a.duration_us) <= 18
        assert (a.job_id, a.submit_us, a.gpus, a.model) == (b.job_id, b.submit_us, b.gpus, b.model)


# Shockwave §8.1: small/medium/large/xlarge with 0.72/0.2/0.05/0.03 (SE 0.0032,
# 0.0028, 0.0015, 0.0012 at N = 20,000); workers 1/2/4/8 at 0.6/0.3/0.09/0.01.
@pytest.mark.parametrize(
    ("size", "share", "tol"),
    [
        ("small", 0.72, 0.013),
        ("medium", 0.2, 0.012),
        ("large", 0.05, 0.006),
        ("xlarge", 0.03, 0.005),
    ],
)
def test_gavel_size_classes_follow_the_paper(gavel_classes, size, share, tol):
    got = _share(gavel_classes, size)
    assert abs(got - share) <= tol, (size, got, share)


@pytest.mark.parametrize(
    ("gpus", "share", "tol"), [(1, 0.6, 0.014), (2, 0.3, 0.013), (4, 0.09, 0.008), (8, 0.01, 0.003)]
)
def test_gavel_worker_counts_follow_the_mix(gavel, gpus, share, tol):
    got = _share([j.gpus for j in gavel], gpus)
    assert abs(got - share) <= tol, (gpus, got, share)


# mode_weights (1, 1, 2) → static 0.25, accordion 0.25, gns 0.5 (SE ≤ 0.0035).
@pytest.mark.parametrize(("mode", "share"), [("static", 0.25), ("accordion", 0.25), ("gns", 0.5)])
def test_gavel_modes_follow_the_given_shares(gavel, mode, share):
    assert abs(_share([j.mode for j in gavel], mode) - share) <= 0.014


def test_gavel_gpu_hours_stay_in_the_class_edges_and_models_come_from_table_2(gavel):
    gpu_hours = [j.gpus * j.duration_us / S / 3600 for j in gavel]
    assert min(gpu_hours) >= 0.2 - 1e-6 and max(gpu_hours) <= 144 + 1e-6
    assert set(Counter(j.model for j in gavel)) == set(GAVEL_MODELS)


def test_gavel_default_modes_are_the_artifacts_dynamic_mix():
    # Default (0, 0.5, 0.5): no static job at all.
    jobs = gavel_jobs(GavelParams(), _rng())
    assert len(jobs) == 460 and {j.mode for j in jobs} == {"accordion", "gns"}


# ---- arrivals ---------------------------------------------------------------------------
# Gaps are exponential with mean 1/rate; the sample mean of 20,000 gaps has
# SE (1/rate)/√20,000 = 0.71 % of the mean, so 3 % is four SEs. An
# exponential's standard deviation equals its mean (coefficient of variation 1).
@pytest.mark.parametrize(("rate_per_s", "mean_gap_s"), [(1 / 30, 30.0), (0.1, 10.0), (0.2, 5.0)])
def test_poisson_gaps_have_mean_one_over_rate(rate_per_s, mean_gap_s):
    times = arrival_times_us(Arrivals(rate_per_s=rate_per_s, num_jobs=N), _rng())
    gaps = [(b - a) / S for a, b in itertools.pairwise(times)]
    assert times[0] == 0 and len(times) == N
    assert abs(statistics.fmean(gaps) / mean_gap_s - 1) <= 0.03
    assert abs(statistics.pstdev(gaps) / statistics.fmean(gaps) - 1) <= 0.05


def test_poisson_by_rate_and_window_gives_about_rate_times_window_jobs():
    # rate 0.5/s over 10,000 s: 5,000 expected gaps (SD √5000 = 71), plus the job at 0.
    times = arrival_times_us(Arrivals(rate_per_s=0.5, window_s=10_000.0), _rng())
    assert abs(len(times) - 5001) <= 300
    assert times == tuple(sorted(times)) and times[-1] < 10_000 * S


def test_poisson_by_count_and_window_spreads_the_jobs_over_the_window():
    times = arrival_times_us(Arrivals(num_jobs=1000, window_s=3600.0), _rng())
    assert len(times) == 1000 and times[0] == 0
    assert times == tuple(sorted(times)) and times[-1] < 3600 * S
    # Uniform over the hour: the mean is 1,800 s (SE 1039/√1000 = 33 s).
    assert abs(statistics.fmean(times) / S - 1800) <= 150


def test_dally_batch_and_poisson_workloads():
    batch = dally_jobs(DallyParams(), _rng())
    assert len(batch) == 500 and {j.submit_us for j in batch} == {0}
    poisson = dally_jobs(DallyParams(arrivals=DALLY_POISSON), _rng())
    assert len(poisson) == 400 and len({j.submit_us for j in poisson}) == 400
    assert {j.model for j in batch} == set(DALLY_MODELS)
    for j in batch:
        # iterations = duration / iteration time, the latter in [0.05, 1] s.
        duration_s = j.duration_us / S
        assert duration_s / 1.0 - 1 <= j.iterations <= duration_s / 0.05 + 1
        assert 300 * S <= j.duration_us <= 14_400 * S


# ---- determinism ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("generate", "params"),
    [(philly_jobs, PhillyParams()), (gavel_jobs, GavelParams()), (dally_jobs, DallyParams())],
    ids=["philly", "gavel", "dally"],
)
def test_same_seed_same_jobs_other_seed_other_jobs(generate, params):
    a = msgspec.json.encode(generate(params, _rng(11)))
    b = msgspec.json.encode(generate(params, _rng(11)))
    c = msgspec.json.encode(generate(params, _rng(12)))
    assert a == b
    assert a != c


def test_ids_are_unique_zero_padded_and_in_submit_order():
    jobs = philly_jobs(PhillyParams(), _rng())
    assert [j.job_id for j in jobs[:2]] == ["philly-0000", "philly-0001"]
    assert len({j.job_id for j in jobs}) == len(jobs)
    assert [j.submit_us for j in jobs] == sorted(j.submit_us for j in jobs)


# ---- validation -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Arrivals(rate_per_s=0.1), "exactly two of"),
        (lambda: Arrivals(rate_per_s=0.1, num_jobs=5, window_s=10.0), "exactly two of"),
        (lambda: Arrivals(rate_per_s=-1.0, num_jobs=5), "arrivals.rate_per_s"),
        (lambda: Arrivals(rate_per_s=math.inf, num_jobs=5), "arrivals.rate_per_s"),
        (lambda: Arrivals(num_jobs=0, rate_per_s=1.0), "arrivals.num_jobs"),
        (lambda: Arrivals(pattern="batch"), "arrivals.num_jobs is required"),
        (lambda: Arrivals(pattern="batch", num_jobs=3, rate_per_s=1.0), "num_jobs only"),
        (lambda: Arrivals(rate_per_s=1e6, window_s=1e6), "more than 1000000"),
        (lambda: PhillyParams(gpu_counts=(1, 2), gpu_weights=(1.0,)), "pair up"),
        (lambda: PhillyParams(gpu_counts=(0,), gpu_weights=(1.0,)), "philly.gpu_counts[0]"),
        (lambda: PhillyParams(gpu_counts=(1, 1), gpu_weights=(1.0, 1.0)), "repeat"),
        (lambda: PhillyParams(gpu_weights=(240, 40, 80, 90, 25, -5)), "weights[5]"),
        (lambda: PhillyParams(bin_weights=(0, 0, 1, 1)), "philly.bin_weights"),
        (lambda: PhillyParams(short_s_max=9000.0), "philly.short_s_max"),
        (lambda: PhillyParams(duration_scale=0.0), "philly.duration_scale"),
        (lambda: PhillyParams(duration_tail_alpha=-0.5), "philly.duration_tail_alpha"),
        (lambda: GavelParams(class_gpu_hours=(0.2, 8, 8, 72, 144)), "class_gpu_hours[2]"),
        # A subnormal edge made the log-uniform draw infinite (found by the input fuzz).
        (lambda: GavelParams(class_gpu_hours=(2.2e-308, 8, 16, 72, 144)), "class_gpu_hours[0]"),
        (lambda: GavelParams(duration_scale=1e12), "gavel.duration_scale"),
        (lambda: DallyParams(duration_s_max=1e300), "dally.duration_s_max"),
        (lambda: GavelParams(mode_weights=(0, 0, 0)), "must not all be zero"),
        (lambda: GavelParams(models=("resnet50", " ")), "gavel.models[1]"),
        (lambda: DallyParams(models=()), "dally.models"),
        (lambda: DallyParams(iteration_s_min=2.0), "dally.iteration_s_min"),
    ],
)
def test_invalid_params_are_rejected_naming_the_field(make, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        make()


def test_params_decode_from_config_and_reject_unknown_keys():
    got = msgspec.convert(
        {"arrivals": {"rate_per_s": 0.2, "num_jobs": 9}, "mode_weights": [1, 0, 0]}, GavelParams
    )
    assert got.arrivals.num_jobs == 9 and got.mode_weights == (1, 0, 0)
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        msgspec.convert({"lambda": 0.2}, GavelParams)
    with pytest.raises(msgspec.ValidationError, match="exactly two of"):
        msgspec.convert({"arrivals": {"rate_per_s": 0.2}}, GavelParams)
