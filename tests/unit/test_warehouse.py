"""The data warehouse model: namespaces, partitions, replicas, analytics, recurring ML usage."""

from __future__ import annotations

import math
import random
from collections import Counter

import msgspec
import pytest

from actors.mast.warehouse import (
    Warehouse,
    WarehouseParams,
    build_warehouse,
    majority_home,
)
from actors.mast.workload.generator import GeneratorParams, generate, load_for_world
from actors.mast.workload.tenants import make_tenants
from actors.mast.world import RegionHardware, WorldModel, preset
from emulator.units import H as H_US
from store.mast.records import DataTable, JobSpec, WorkloadSpec

DAY_US = 86_400_000_000


@pytest.fixture(scope="module")
def small():
    """Two days of the small world (recurring templates submit twice), and its warehouse."""
    world = preset("small")
    tenants = make_tenants(10, random.Random(1), world)
    params = GeneratorParams(load=load_for_world(world))
    workloads, tables = generate(
        params, random.Random(2), tenants=tenants, world=world, span_us=2 * DAY_US
    )
    priority = {t.name: t.priority for t in tenants}
    wh = build_warehouse(
        tables,
        workloads,
        world,
        WarehouseParams(),
        random.Random(3),
        tenant_priority=priority,
        span_us=2 * DAY_US,
    )
    return world, priority, workloads, tables, wh


def build(world, workloads, tables, seed=3, priority=None, span_us=DAY_US, **params) -> Warehouse:
    return build_warehouse(
        tables,
        workloads,
        world,
        WarehouseParams(**params),
        random.Random(seed),
        tenant_priority=priority or {"t": 1},
        span_us=span_us,
    )


# ---- namespaces, tables, partitions -------------------------------------------------
def test_partitions_sum_to_the_table_size(small):
    *_, wh = small
    p = WarehouseParams()
    for t in wh.tables:
        assert sum(x.size_bytes for x in t.partitions) == t.size_bytes, t.name
        assert p.partitions_per_table_min <= len(t.partitions) <= p.partitions_per_table_max
        assert [x.age_days for x in t.partitions] == list(range(len(t.partitions)))
        assert all(x.size_bytes >= 1 for x in t.partitions)
    # Counts are log-uniform over 1..90, so both short and long histories occur.
    counts = [len(t.partitions) for t in wh.tables]
    assert min(counts) < 5 and max(counts) > 60


def test_namespaces_partition_the_tables(small):
    *_, wh = small
    # ceil(tables / 20) namespaces, none empty, each table in exactly one.
    assert len(wh.namespaces) == math.ceil(len(wh.tables) / 20)
    assert all(ns.tables for ns in wh.namespaces)
    members = [name for ns in wh.namespaces for name in ns.tables]
    assert sorted(members) == sorted(t.name for t in wh.tables)
    home = {name: ns.name for ns in wh.namespaces for name in ns.tables}
    assert all(home[t.name] == t.namespace for t in wh.tables)
    # namespaces_max bounds the count.
    world, _, workloads, tables, _ = small
    capped = build(world, workloads, tables, namespaces_max=3, priority=small[1])
    assert len(capped.namespaces) == 3


def test_input_tables_and_their_sharing_are_kept(small):
    _, _, workloads, tables, wh = small
    by_name = {t.name: t for t in wh.tables}
    readers: Counter[str] = Counter()
    for w in workloads:
        readers.update(w.input_tables)
    for t in tables:
        out = by_name[t.name]
        assert (out.size_bytes, out.home_region) == (t.size_bytes, t.home_region)
        assert out.ml_readers == readers[t.name]
    # 25 % as many analytics-only tables, read by no ML workload.
    only = [t for t in wh.tables if t.name not in {x.name for x in tables}]
    assert len(only) == round(0.25 * len(tables))
    assert all(t.ml_readers == 0 and t.name.startswith("atb") for t in only)


# ---- replicas --------------------------------------------------------------------------
def test_every_table_has_one_dr_replica_outside_its_home(small):
    *_, wh = small
    home = {t.name: t.home_region for t in wh.tables}
    dr = Counter(r.table for r in wh.replicas if r.kind == "dr")
    assert set(dr) == set(home) and set(dr.values()) == {1}
    per_table: dict[str, list[str]] = {}
    for r in wh.replicas:
        assert r.region != home[r.table]
        per_table.setdefault(r.table, []).append(r.region)
    assert all(len(set(v)) == len(v) for v in per_table.values())  # one replica per region


def test_hot_tables_get_extra_replicas(small):
    world, *_, wh = small
    extras = Counter(r.table for r in wh.replicas if r.kind == "extra")
    for t in wh.tables:
        # One per 15 readers, at most 4, and the small world has 3 regions: home + DR + 1.
        assert extras[t.name] == min(t.ml_readers // 15, 4, len(world.regions) - 2)


def test_the_dr_replica_goes_where_the_readers_gpus_are():
    # ap-south has only V100; 20 tables there are read by recurring H100 jobs, which
    # only us-east has: the DR copy goes to us-east, where they could train. Unread
    # tables have no hardware to ask for: their DR is drawn by storage (us-east 4 PB,
    # eu-west 6 PB), so both regions show up.
    world = preset("small")
    read = [
        DataTable(name=f"r{i:02d}", size_bytes=10**9, home_region="ap-south") for i in range(20)
    ]
    unread = [
        DataTable(name=f"u{i:02d}", size_bytes=10**9, home_region="ap-south") for i in range(40)
    ]
    job = JobSpec(name="trainer", gpu_type="H100", gpus=8, work_us=H_US)
    workloads = [
        WorkloadSpec(
            id=f"w{i:02d}",
            tenant="t",
            submit_at_us=i,
            recurring=True,
            jobs=(msgspec.structs.replace(job, input_tables=(t.name,)),),
        )
        for i, t in enumerate(read)
    ]
    wh = build(world, workloads, read + unread, analytics_only_share=0.0)
    dr = {r.table: r.region for r in wh.replicas if r.kind == "dr"}
    assert {dr[t.name] for t in read} == {"us-east"}
    assert {dr[t.name] for t in unread} == {"us-east", "eu-west"}


def test_replica_state_and_lag_rule():
    world = preset("small")
    tables = [DataTable(name=f"t{i}", size_bytes=10**12, home_region="us-east") for i in range(60)]
    wh = build(world, [], tables, copying_share=0.5, analytics_only_share=0.0)
    newest = {t.name: t.partitions[0].size_bytes for t in wh.tables}
    states = Counter(r.state for r in wh.replicas)
    assert states["copying"] > 10 and states["ready"] > 10
    for r in wh.replicas:
        if r.state == "ready":
            # 2 h + newest partition / 750 MB/s, and fully copied.
            assert r.lag_s == pytest.approx(7_200 + newest[r.table] / 750e6)
            assert r.bytes_done == 10**12
        else:
            assert r.lag_s is None and 0 <= r.bytes_done < 10**12
    catalog = {d.name: d for d in wh.catalog()}
    ready = {(r.table, r.region) for r in wh.replicas if r.state == "ready"}
    assert {(n, reg) for n, d in catalog.items() for reg in d.replicas} == ready


def test_one_region_means_no_replicas():
    world = WorldModel(regions=(RegionHardware(name="solo", gpu_machines={"A100": 2}),))
    tables = [DataTable(name="t0", size_bytes=10**9, home_region="solo")]
    assert build(world, [], tables).replicas == ()


# ---- access history --------------------------------------------------------------------
def history_world():
    """x is read daily by a recurring H100 job; y and z by first-time V100 and A100 ones."""
    world = preset("small")
    tables = [DataTable(name=n, size_bytes=10**9, home_region="us-east") for n in "xyz"]

    def w(id: str, gpu: str, reads: tuple[str, ...], recurring: bool, at_h: int) -> WorkloadSpec:
        job = JobSpec(name="trainer", gpu_type=gpu, gpus=8, work_us=H_US, input_tables=reads)
        return WorkloadSpec(
            id=id, tenant="t", submit_at_us=at_h * H_US, recurring=recurring, jobs=(job,)
        )

    workloads = [
        w("r0", "H100", ("x",), True, 0),
        w("r1", "H100", ("x",), True, 24),
        w("o0", "V100", ("y",), False, 3),
        w("o1", "A100", ("y", "z"), False, 30),
    ]
    return world, workloads, tables


def test_history_counts_a_recurring_template_once_and_adds_past_first_time_jobs():
    world, workloads, tables = history_world()

    def readers(wh: Warehouse) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for r in wh.readers:
            out.setdefault(r.table, {})[r.gpu_type] = r.jobs
        return out

    # Without past first-time workloads the history is the recurring template: one job.
    alone = build(world, workloads, tables, span_us=2 * DAY_US, history_days=0.0)
    assert readers(alone) == {"x": {"H100": 1}}
    # Two first-time workloads in two days: one a day; 10 days of history: 10 past
    # jobs. Each runs on V100 or A100 (the first-time mix) and reads 1 or 2 tables
    # (the first-time counts), drawn by popularity among x, y, z: 10 to 20 reads.
    wh = build(world, workloads, tables, span_us=2 * DAY_US, history_days=10.0)
    got = readers(wh)
    assert got["x"]["H100"] == 1  # nobody used H100 for the first time
    past = [(t, g, n) for t, per in got.items() for g, n in per.items() if g != "H100"]
    assert {g for _, g, _ in past} <= {"V100", "A100"}
    assert 10 <= sum(n for *_, n in past) <= 20
    assert [(r.table, r.gpu_type) for r in wh.readers] == sorted(
        (r.table, r.gpu_type) for r in wh.readers
    )


def test_history_does_not_know_which_first_time_workload_reads_what(small):
    # Swap the tables of two first-time workloads on different GPU types: every table
    # keeps its popularity, the GPU and table-count mixes stay, only who reads what on
    # which GPU changes. The history (and so the whole warehouse) must not.
    world, priority, workloads, tables, wh = small
    once = [w for w in workloads if not w.recurring and w.input_tables]
    a = once[0]
    b = next(w for w in once if w.jobs[0].gpu_type != a.jobs[0].gpu_type)

    def reading(w: WorkloadSpec, names: tuple[str, ...]) -> WorkloadSpec:
        jobs = tuple(
            msgspec.structs.replace(j, input_tables=names if j.input_tables else ()) for j in w.jobs
        )
        return msgspec.structs.replace(w, jobs=jobs)

    swapped = [
        reading(w, b.input_tables) if w is a else reading(w, a.input_tables) if w is b else w
        for w in workloads
    ]
    assert [w.input_tables for w in swapped] != [w.input_tables for w in workloads]
    again = build(world, swapped, tables, priority=priority, span_us=2 * DAY_US)
    assert msgspec.json.encode(again) == msgspec.json.encode(wh)


def test_history_size_is_bounded():
    world, workloads, tables = history_world()
    with pytest.raises(ValueError, match="history_workloads_max"):
        build(world, workloads, tables, span_us=2 * DAY_US, history_workloads_max=5)


# ---- analytics -------------------------------------------------------------------------
def test_analytics_jobs_read_existing_tables_and_fit_their_cpu_capacity(small):
    world, *_, wh = small
    names = {t.name for t in wh.tables}
    homes = {t.name: t.home_region for t in wh.tables}
    sizes = {t.name: t.size_bytes for t in wh.tables}
    jobs = {j.id: j for j in wh.analytics_jobs}
    assert len(wh.apps) == math.ceil(len(wh.tables) / 10)
    reads = Counter()
    for app in wh.apps:
        assert 2 <= len(app.jobs) <= 8
        assert list(app.cpu_capacity) == [r.name for r in world.regions]
        demand = Counter()
        for jid in app.jobs:
            job = jobs[jid]
            assert job.app == app.name and 1 <= len(job.tables) <= 4
            assert set(job.tables) <= names
            assert 0 < job.cpu_hours <= 100_000
            demand[majority_home(job.tables, homes, sizes)] += job.cpu_hours
            reads.update(t.startswith("tbl") for t in job.tables)
        # Expression 5 holds for today's placement (capacity ≥ 1.25 × demand).
        for region, cpu in demand.items():
            assert cpu < app.cpu_capacity[region]
    # Mostly the tables ML reads: 80 % of draws (fewer after de-duplication).
    assert reads[True] / (reads[True] + reads[False]) > 0.7


@pytest.mark.parametrize(
    ("tables", "expected"),
    [
        (["a1", "a2", "b1"], "A"),  # two tables in A, one in B
        (["a1", "b1"], "B"),  # one each: B holds more bytes (50 > 10)
        (["a2", "c1"], "A"),  # one each, 20 bytes each: by name
    ],
)
def test_majority_home(tables, expected):
    homes = {"a1": "A", "a2": "A", "b1": "B", "c1": "C"}
    sizes = {"a1": 10, "a2": 20, "b1": 50, "c1": 20}
    assert majority_home(tables, homes, sizes) == expected


# ---- recurring ML usage ----------------------------------------------------------------
def test_recurring_ml_jobs_worked_example():
    world = preset("small")
    tables = [DataTable(name=n, size_bytes=10**9, home_region="us-east") for n in ("x", "y")]
    trainer = JobSpec(name="trainer", gpu_type="H100", gpus=16, work_us=3 * H_US)
    evaluator = JobSpec(
        name="evaluator", role="evaluator", gpu_type="H100", gpus=8, work_us=3 * H_US
    )
    prep = JobSpec(
        name="prep", role="preprocess", cpu_machines=4, work_us=H_US, input_tables=("x",)
    )
    mixed = JobSpec(name="a100", gpu_type="A100", gpus=8, work_us=H_US, input_tables=("y",))

    def w(id: str, tenant: str, at_h: int, jobs, recurring: bool = True) -> WorkloadSpec:
        return WorkloadSpec(
            id=id, tenant=tenant, submit_at_us=at_h * H_US, recurring=recurring, jobs=jobs
        )

    workloads = [
        # Every 12 h: 2 a day. (16 + 8) H100 × 3 h × 2 = 144 GPU-hours a day.
        *(w(f"g{i}", "hi", 12 * i, (trainer, evaluator, prep)) for i in range(3)),
        # Seen once: the default daily period. 4 CPU machines, no GPU.
        w("c0", "lo", 5, (prep,)),
        # Two GPU types: one entry each. H100: 16 × 3 h = 48; A100: 8 × 1 h = 8.
        w("m0", "lo", 7, (trainer, mixed, prep)),
        # First-time workloads are not Tetris's recurring usage.
        w("once", "hi", 1, (trainer, prep), recurring=False),
    ]
    wh = build(world, workloads, tables, priority={"hi": 0, "lo": 3})
    got = {
        j.id: (j.tables, j.gpu_type, j.gpu_hours, j.submissions_per_day, j.priority)
        for j in wh.ml_jobs
    }
    assert got == {
        "g0": (("x",), "H100", 144.0, 2.0, 0),
        "c0": (("x",), None, 0.0, 1.0, 3),
        "m0/A100": (("x", "y"), "A100", 8.0, 1.0, 3),
        "m0/H100": (("x", "y"), "H100", 48.0, 1.0, 3),
    }


def test_recurring_ml_jobs_of_generated_workloads(small):
    _, priority, workloads, _, wh = small
    templates = {(w.tenant, w.jobs) for w in workloads if w.recurring}
    assert len({j.id.split("/")[0] for j in wh.ml_jobs}) == len(templates)
    # Two days, daily recurrence: once a day (or once seen: the default period).
    assert {j.submissions_per_day for j in wh.ml_jobs} == {1.0}
    first = {w.id: w for w in workloads}
    for j in wh.ml_jobs:
        w = first[j.id.split("/")[0]]
        assert j.priority == priority[w.tenant] and j.tables == w.input_tables
        gpus = sum(x.gpus * x.work_us for x in w.jobs if x.gpu_type == j.gpu_type) / H_US
        assert j.gpu_hours == pytest.approx(gpus)


# ---- determinism and validation ------------------------------------------------------
def test_same_seed_same_warehouse_and_different_seed_different(small):
    world, priority, workloads, tables, wh = small
    again = build(world, workloads, tables, seed=3, priority=priority, span_us=2 * DAY_US)
    other = build(world, workloads, tables, seed=4, priority=priority, span_us=2 * DAY_US)
    assert msgspec.json.encode(again) == msgspec.json.encode(wh)
    assert msgspec.json.encode(other) != msgspec.json.encode(wh)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"partitions_per_table_max": 0}, "partitions_per_table_max"),
        ({"copying_share": 1.5}, "copying_share"),
        ({"refresh_bytes_s": 0.0}, "refresh_bytes_s"),
        ({"bogus": 1}, "bogus"),
        (
            {"partitions_per_table_min": 10, "partitions_per_table_max": 5},
            "partitions_per_table_min",
        ),
        ({"jobs_per_app_min": 9}, "jobs_per_app_min"),
        ({"history_days": -1.0}, "history_days"),
    ],
)
def test_params_errors_name_the_field(raw, field):
    with pytest.raises(msgspec.ValidationError, match=field):
        msgspec.convert(raw, WarehouseParams)


def test_params_built_in_code_are_checked_too():
    world = preset("small")
    tables = [DataTable(name="t0", size_bytes=10**9, home_region="us-east")]
    with pytest.raises(msgspec.ValidationError, match="partitions_per_table_min"):
        build(world, [], tables, partitions_per_table_min=0)


def test_bad_inputs_are_named():
    world = preset("small")
    t0 = DataTable(name="t0", size_bytes=10**9, home_region="us-east")
    job = JobSpec(name="j", gpu_type="H100", gpus=8, work_us=H_US, input_tables=("t0",))
    reader = WorkloadSpec(id="w1", tenant="nobody", submit_at_us=0, recurring=True, jobs=(job,))
    with pytest.raises(ValueError, match="duplicate table names"):
        build(world, [], [t0, t0])
    with pytest.raises(ValueError, match="t9: home region 'mars'"):
        build(world, [], [DataTable(name="t9", size_bytes=1, home_region="mars")])
    with pytest.raises(ValueError, match="w1 reads unknown table 't0'"):
        build(world, [reader], [])
    with pytest.raises(ValueError, match="tenant 'nobody' not in tenant_priority"):
        build(world, [reader], [t0])
    many = [DataTable(name=f"t{i}", size_bytes=10**12, home_region="us-east") for i in range(10)]
    with pytest.raises(ValueError, match="partitions_max"):
        build(world, [], many, partitions_per_table_min=50, partitions_max=100)
