"""Percentile distributions, tenants, the MAST workload generator and CSV traces.

Statistical checks ask whether the paper's value is an approximate quantile of
the sample at the paper's level: whether `level` lies between the sample CDF
just below `anchor` and at `anchor`, give or take `tol` (`is_quantile`). We
test in CDF space, not by comparing sample quantiles with the anchors, because
above p99 our distributions are steep (GPUs 128 → 4,096 over the last 1 %): a
sample p99 swings by tens of GPUs while F(128) stays within a few tenths of a
percent. The standard error of an empirical CDF is √(F(1−F)/n); each `tol` is
about four of them for the sample at hand (numbers in the comments).
Discrete values (GPUs, readers per table) put mass on the anchors themselves,
which the "between F(below) and F(anchor)" form absorbs.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import msgspec
import pytest

from actors.common.cm.setup import SETUP_S, setup_time_us
from actors.common.percentiles import PercentileDistribution
from actors.mast import distributions as dist
from actors.mast.distributions import floor_gpus, round_gpus
from actors.mast.workload.csv_trace import read_csv_trace, write_csv_trace
from actors.mast.workload.generator import GeneratorParams, generate, load_for_world
from actors.mast.workload.tenants import PRIORITY_SHARES, TenantMix, make_tenants
from actors.mast.world import RegionHardware, WorldModel, preset
from emulator.units import US_PER_S, H
from store.mast.records import GPUS_PER_MACHINE, JobSpec, WorkloadSpec

DAY_US = 86_400_000_000
HOUR_S = H / US_PER_S  # the duration distributions are in seconds


# ---- distributions ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("d", "anchors"),
    [
        (dist.MACHINES_PER_WORKLOAD, (1, 72, 180, 205, 1_024)),
        (dist.GPUS_PER_GPU_WORKLOAD, (1, 16, 64, 128, 4_096)),
        (dist.GPU_DURATION_S, (60, 20 * 60, 6.7 * HOUR_S, 66 * HOUR_S, 14 * 24 * HOUR_S)),
        (dist.CPU_DURATION_S, (60, 38 * 60, 7.9 * HOUR_S, 38 * HOUR_S, 7 * 24 * HOUR_S)),
        (SETUP_S, (60, 150, 278, 449, 900)),
        (dist.WORKLOADS_PER_TABLE, (1, 3, 17, 45, 150)),
        (dist.TABLE_SIZE_BYTES, (1e6, 565e6, 103e9, 7.5e12, 50e12)),
    ],
)
def test_distributions_hit_their_anchors_exactly(d, anchors):
    levels = (0.0, 0.5, 0.9, 0.99, 1.0)
    assert tuple(d.quantile(q) for q in levels) == anchors
    # Log-linear in between: halfway (in q) between p50 and p90 is the geometric mean.
    assert d.quantile(0.7) == pytest.approx((anchors[1] * anchors[2]) ** 0.5)


def test_distribution_sample_is_the_quantile_of_one_uniform_draw():
    d = dist.GPU_DURATION_S
    a, b = random.Random(7), random.Random(7)
    assert [d.sample(a) for _ in range(5)] == [d.quantile(b.random()) for _ in range(5)]


@pytest.mark.parametrize(
    "points",
    [
        ((0.0, 1.0),),  # one point
        ((0.1, 1.0), (1.0, 2.0)),  # no p0
        ((0.0, 1.0), (0.9, 2.0)),  # no p100
        ((0.0, 1.0), (0.5, 3.0), (0.5, 4.0), (1.0, 5.0)),  # repeated quantile
        ((0.0, 2.0), (1.0, 1.0)),  # decreasing value
        ((0.0, 0.0), (1.0, 1.0)),  # zero: no logarithm
    ],
)
def test_distribution_rejects_bad_points(points):
    with pytest.raises(ValueError):
        PercentileDistribution(points)


@pytest.mark.parametrize(
    ("x", "rounded", "floored"),
    [
        (0.5, 1, 1),
        (1.4, 1, 1),  # log2(1.4) = 0.49 → 1
        (1.5, 2, 1),  # log2(1.5) = 0.58 → 2
        (3.0, 4, 2),  # log2(3) = 1.58 → 4
        (5.0, 4, 4),
        (7.9, 8, 4),
        (11.9, 8, 8),
        (12.0, 16, 8),  # half-way to the next multiple of 8 rounds to even: 12/8 = 1.5 → 2
        (130.0, 128, 128),
        (133.0, 136, 128),
    ],
)
def test_gpu_counts_round_to_valid_values(x, rounded, floored):
    assert (round_gpus(x), floor_gpus(x)) == (rounded, floored)


def test_setup_time_percentiles():
    rng = random.Random(3)
    samples = [setup_time_us(rng) / 1e6 for _ in range(20_000)]
    # n = 20,000: standard errors 0.0035 / 0.0021 / 0.0007 at the three levels.
    assert is_quantile(samples, 150, 0.5, 0.014)
    assert is_quantile(samples, 278, 0.9, 0.009)
    assert is_quantile(samples, 449, 0.99, 0.003)


# ---- tenants -----------------------------------------------------------------------
def test_tenants_cover_levels_and_split_quota():
    world = preset("meta-day")
    tenants = make_tenants(40, random.Random(1), world)
    levels = Counter(t.priority for t in tenants)
    assert set(levels) == set(range(8))
    assert levels[3] == max(levels.values())  # 54 % of workloads: most tenants
    within = [t for t in tenants if t.priority < 7]
    assert sum(t.gpu_quota for t in within) == int(0.8 * world.gpus)
    assert sum(t.cpu_quota for t in within) == int(0.8 * world.cpu_machines)
    assert all(t.gpu_quota == t.cpu_quota == 0 for t in tenants if t.priority == 7)
    assert len({t.name for t in tenants}) == 40

    half = make_tenants(8, random.Random(1), world, TenantMix(gpu_quota_fraction=0.5))
    assert sorted(t.priority for t in half) == list(range(8))
    assert sum(t.gpu_quota for t in half) == world.gpus // 2
    # Fewer tenants than levels: the most common levels only.
    assert sorted(t.priority for t in make_tenants(3, random.Random(1), world)) == [1, 2, 3]


# ---- generator ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big():
    """About 20,000 workloads over one day of the meta-day world (twice the default rate).

    A one-day span with daily recurrence submits each recurring template once,
    so distinct workload ids are distinct workloads for the per-table counts.
    """
    world = preset("meta-day")
    tenants = make_tenants(40, random.Random(1), world)
    params = GeneratorParams(load=2.0)
    workloads, tables = generate(
        params, random.Random(2), tenants=tenants, world=world, span_us=DAY_US
    )
    return world, tenants, workloads, tables


def cdf(values, x) -> float:
    """Share of `values` at most `x`."""
    return sum(v <= x for v in values) / len(values)


def is_quantile(values, anchor: float, level: float, tol: float) -> bool:
    """Is `anchor` a `level`-quantile of `values`, give or take `tol` in CDF?"""
    below = sum(v < anchor for v in values) / len(values)
    return below - tol <= level <= cdf(values, anchor) + tol


def machines_of(w: WorkloadSpec) -> int:
    return sum(-(-j.gpus // GPUS_PER_MACHINE) + j.cpu_machines for j in w.jobs)


def test_generator_is_deterministic_per_seed():
    world = preset("small")
    tenants = make_tenants(10, random.Random(1), world)
    params = GeneratorParams(load=load_for_world(world))

    def run(seed: int):
        return generate(params, random.Random(seed), tenants=tenants, world=world, span_us=DAY_US)

    assert msgspec.json.encode(run(5)) == msgspec.json.encode(run(5))
    assert msgspec.json.encode(run(5)) != msgspec.json.encode(run(6))


def test_shares_match_mast(big):
    _, tenants, workloads, _ = big
    n = len(workloads)
    assert 19_000 < n < 21_000  # Poisson(≈ 20,000)
    assert abs(sum(w.gpus > 0 for w in workloads) / n - 0.7) < 0.015
    assert abs(sum(w.recurring for w in workloads) / n - 0.3) < 0.015
    level = {t.name: t.priority for t in tenants}
    mix = Counter(level[w.tenant] for w in workloads)
    total = sum(PRIORITY_SHARES)  # the paper's shares add up to 99.72 %
    for lvl, share in enumerate(PRIORITY_SHARES):
        assert abs(mix[lvl] / n - share / total) < 0.01, lvl


def test_gpus_per_gpu_workload(big):
    world, _, workloads, _ = big
    gpus = [w.gpus for w in workloads if w.gpus]
    # n ≈ 14,000: standard errors 0.0042 / 0.0025 / 0.0008. Every draw in [12, 20)
    # rounds to 16, so 16 holds the CDF from 0.448 to 0.564; 64 from 0.881 to 0.908.
    assert is_quantile(gpus, 16, 0.5, 0.017)
    assert is_quantile(gpus, 64, 0.9, 0.01)
    assert is_quantile(gpus, 128, 0.99, 0.0033)
    types = set(world.gpus_by_type())
    for w in workloads:
        for j in w.jobs:
            if j.gpus:
                assert j.gpu_type in types and j.gpus == round_gpus(j.gpus)


def test_durations(big):
    _, _, workloads, _ = big
    gpu = [w.jobs[0].work_us / 1e6 for w in workloads if w.gpus]
    cpu = [w.jobs[0].work_us / 1e6 for w in workloads if not w.gpus]
    # n ≈ 14,000 (GPU), ≈ 6,000 (CPU); tolerances ≈ 4 standard errors at n = 6,000.
    for samples, anchors in (
        (gpu, (20 * 60, 6.7 * HOUR_S, 66 * HOUR_S)),
        (cpu, (38 * 60, 7.9 * HOUR_S, 38 * HOUR_S)),
    ):
        for value, level, tol in zip(anchors, (0.5, 0.9, 0.99), (0.026, 0.016, 0.005), strict=True):
            assert is_quantile(samples, value, level, tol), value
    assert all(len({j.work_us for j in w.jobs}) == 1 for w in workloads)


def test_machines_per_workload(big):
    _, _, workloads, _ = big
    counts = [machines_of(w) for w in workloads]
    # n ≈ 20,000: standard errors 0.0035 / 0.0021 / 0.0007. GPU workloads whose GPU
    # machines alone exceed their machine draw (≈ 0.15 %, mostly > 1,600 GPUs) pull
    # F(205) down a little, hence the wider tolerance at p99.
    assert is_quantile(counts, 72, 0.5, 0.014)
    assert is_quantile(counts, 180, 0.9, 0.0085)
    assert is_quantile(counts, 205, 0.99, 0.0045)
    # Most workloads have a preprocess job; some GPU workloads an evaluator.
    roles = Counter(j.role for w in workloads for j in w.jobs)
    assert roles["preprocess"] > 0.85 * len(workloads)
    assert 0.05 * len(workloads) < roles["evaluator"] < 0.2 * len(workloads)


def test_workloads_per_table(big):
    world, _, workloads, tables = big
    readers = Counter(t for w in workloads for t in w.input_tables)
    assert set(readers) == {t.name for t in tables}  # every table is read
    counts = list(readers.values())
    # n ≈ 5,000 tables: standard errors 0.007 / 0.0042 / 0.0014. 3 readers hold the
    # CDF from 0.43 to 0.54. Duplicates dropped in the deal cost a few reads.
    assert is_quantile(counts, 3, 0.5, 0.028)
    assert is_quantile(counts, 17, 0.9, 0.017)
    assert is_quantile(counts, 45, 0.99, 0.0056)
    assert max(counts) > 100  # the hot tables
    assert all(1 <= len(w.input_tables) <= 4 for w in workloads)
    regions = {r.name: r.storage_pb for r in world.regions}
    homes = Counter(t.home_region for t in tables)
    assert set(homes) <= set(regions)
    # The most storage-heavy region is the most common home.
    assert homes.most_common(1)[0][0] == max(regions, key=regions.__getitem__)
    sizes = [t.size_bytes for t in tables]
    assert is_quantile(sizes, 565e6, 0.5, 0.028)
    assert is_quantile(sizes, 103e9, 0.9, 0.017)


def test_recurring_templates_resubmit_the_same_jobs():
    world = preset("small")
    tenants = make_tenants(10, random.Random(1), world)
    params = GeneratorParams(load=load_for_world(world), recurring_period_s=6 * HOUR_S)
    start = 1_000 * 1_000_000
    workloads, _ = generate(
        params, random.Random(4), tenants=tenants, world=world, span_us=DAY_US, start_us=start
    )
    assert all(start <= w.submit_at_us < start + DAY_US for w in workloads)
    assert [w.id for w in workloads] == [f"w{i:06d}" for i in range(len(workloads))]
    assert [w.submit_at_us for w in workloads] == sorted(w.submit_at_us for w in workloads)
    groups: dict[tuple[str, tuple[JobSpec, ...]], list[int]] = {}
    for w in workloads:
        if w.recurring:
            groups.setdefault((w.tenant, w.jobs), []).append(w.submit_at_us)
    # A 6-hour period in one day: each template submits four times, 6 h apart.
    assert groups and all(len(times) == 4 for times in groups.values())
    for times in groups.values():
        assert {b - a for a, b in itertools.pairwise(times)} == {6 * 3600 * 1_000_000}


def test_requests_fit_the_best_supplied_region():
    world = preset("small")
    tenants = make_tenants(10, random.Random(1), world)
    params = GeneratorParams(load=load_for_world(world) * 10)
    workloads, _ = generate(params, random.Random(9), tenants=tenants, world=world, span_us=DAY_US)
    # region_share_max = 0.5: H100 ≤ 0.5·28·8 = 112 GPUs, A100 ≤ 0.5·24·8 = 96 (eu-west),
    # V100 ≤ 32; CPU ≤ 0.5·152 = 76 machines.
    cap = {"H100": 112, "A100": 96, "V100": 32}
    assert max(w.cpu_machines for w in workloads) <= 76
    for w in workloads:
        if w.gpus:
            assert w.gpus <= cap[w.jobs[0].gpu_type]
    assert max(w.gpus for w in workloads) == 112


def test_params_are_validated():
    with pytest.raises(msgspec.ValidationError, match="gpu_share"):
        msgspec.convert({"gpu_share": 1.5}, GeneratorParams)
    with pytest.raises(msgspec.ValidationError, match="hot_tables"):
        msgspec.convert({"hot_tables": -1}, GeneratorParams)
    with pytest.raises(msgspec.ValidationError, match="bogus"):
        msgspec.convert({"bogus": 1}, GeneratorParams)
    with pytest.raises(msgspec.ValidationError, match="all zero"):
        msgspec.convert({"priority_shares": [0.0] * 8}, GeneratorParams)


def test_generator_limits():
    world = preset("small")
    tenants = make_tenants(10, random.Random(1), world)
    params = GeneratorParams(workloads_max=10)
    with pytest.raises(ValueError, match="workloads_max"):
        generate(params, random.Random(1), tenants=tenants, world=world, span_us=DAY_US)
    with pytest.raises(ValueError, match="tenant"):
        generate(params, random.Random(1), tenants=[], world=world, span_us=DAY_US)
    assert generate(params, random.Random(1), tenants=tenants, world=world, span_us=0) == ([], [])


# ---- CSV traces -------------------------------------------------------------------------
def test_csv_round_trip(tmp_path: Path):
    world = preset("small")
    tenants = make_tenants(10, random.Random(1), world)
    params = GeneratorParams(load=load_for_world(world))
    workloads, _ = generate(params, random.Random(8), tenants=tenants, world=world, span_us=DAY_US)
    path = tmp_path / "trace.csv"
    write_csv_trace(path, workloads)
    assert read_csv_trace(path) == workloads
    assert path.read_text().splitlines()[0] == (
        "workload_id,tenant,submit_s,recurring,job,role,gpu_type,gpus,cpu_machines,"
        "work_s,checkpoint_s,input_tables"
    )


HEADER = "workload_id,tenant,submit_s,recurring,job,role,gpu_type,gpus,cpu_machines,work_s,checkpoint_s,input_tables\n"  # noqa: E501
GOOD = "w1,team0,0.5,false,trainer,trainer,H100,16,0,3600,1800,a;b\n"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("w1,team0,0.5,false,trainer,trainer,H100,12x,0,3600,1800,\n", "line 3: column 'gpus'"),
        ("w1,team0,0.5,maybe,eval,evaluator,H100,8,0,3600,1800,\n", "line 3: column 'recurring'"),
        ("w1,team0,0.5,false,eval,judge,H100,8,0,3600,1800,\n", "line 3: column 'role'"),
        ("w1,team0,0.5,false,prep,preprocess,,0,0,3600,1800,\n", "line 3: column 'cpu_machines'"),
        ("w1,team0,0.5,false,prep,preprocess,,0,4,-1,1800,\n", "line 3: column 'work_s'"),
        ("w1,team0,0.5,false,prep,preprocess,,0,4,10,0,\n", "line 3: column 'checkpoint_s'"),
        ("w1,team1,0.5,false,prep,preprocess,,0,4,10,60,\n", "line 3: column 'tenant'"),
        ("w1,team0,0.5,false,trainer,preprocess,,0,4,10,60,\n", "line 3: column 'job'"),
        ("w1,team0,0.5,false,prep,preprocess,,0,4,10,60\n", "line 3: expected 12 columns"),
        (
            "w2,team0,1,false,t,trainer,,0,4,10,60,\nw1,team0,0.5,false,p,trainer,,0,4,10,60,\n",
            "line 4: column 'workload_id'",
        ),
    ],
)
def test_malformed_csv_names_file_line_and_column(tmp_path: Path, row, message):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + GOOD + row)
    with pytest.raises(ValueError, match=f"bad.csv: {message}"):
        read_csv_trace(path)


def test_csv_header_must_name_every_column(tmp_path: Path):
    path = tmp_path / "bad.csv"
    path.write_text(HEADER.replace("gpus,", "") + GOOD)
    with pytest.raises(ValueError, match=r"bad.csv: line 1: .*missing \['gpus'\]"):
        read_csv_trace(path)


def test_worlds_without_gpus_or_without_cpus():
    cpu_only = WorldModel(regions=(RegionHardware(name="a", cpu_machines=100),))
    gpu_only = WorldModel(regions=(RegionHardware(name="a", gpu_machines={"H100": 20}),))
    for world, gpu in ((cpu_only, False), (gpu_only, True)):
        tenants = make_tenants(8, random.Random(1), world)
        workloads, _ = generate(
            GeneratorParams(workloads_per_day=200),
            random.Random(1),
            tenants=tenants,
            world=world,
            span_us=DAY_US,
        )
        assert workloads and all((w.gpus > 0) == gpu for w in workloads)
        assert all(w.cpu_machines <= 50 for w in workloads)  # region_share_max of 100
        assert all(w.gpus <= 80 for w in workloads)  # region_share_max of 160


def test_preprocessing_cap_per_gpu_machine():
    world = preset("small")
    tenants = make_tenants(10, random.Random(1), world)
    base = GeneratorParams(load=20 * load_for_world(world))
    capped = msgspec.structs.replace(base, preprocess_per_gpu_machine_max=1.0)
    free, _ = generate(base, random.Random(3), tenants=tenants, world=world, span_us=DAY_US)
    held, _ = generate(capped, random.Random(3), tenants=tenants, world=world, span_us=DAY_US)
    assert [w.id for w in free] == [w.id for w in held]  # same arrivals, only sizes change

    def ratio(w: WorkloadSpec) -> float:
        gpu_machines = sum(-(-j.gpus // GPUS_PER_MACHINE) for j in w.jobs)
        prep = sum(j.cpu_machines for j in w.jobs if j.role == "preprocess")
        return prep / gpu_machines

    gpu_workloads = [i for i, w in enumerate(held) if w.gpus]
    # With the cap, preprocessing never exceeds one CPU machine per GPU machine
    # (an 8-GPU trainer plus an 8-GPU evaluator count as two GPU machines)...
    assert all(ratio(held[i]) <= 1.0 for i in gpu_workloads)
    # ...while the paper's statistics alone ask for many more.
    assert max(ratio(free[i]) for i in gpu_workloads) > 4
