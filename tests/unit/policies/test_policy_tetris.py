"""Tetris (MAST §3.3-3.4): the cost terms, R(job), the hard constraints and the hill climbing.

Small instances with the expected numbers worked out in comments; then the
incremental move scoring checked against a full recomputation on random
instances; then the benchmark at a small size.
"""

from __future__ import annotations

import math

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.mast.bench.tetris import bench_tetris
from actors.policies.mast.tetris.cost import (
    TetrisJob,
    TetrisParams,
    TetrisRegion,
    TetrisSnapshot,
    TetrisTable,
    cross_region_bytes,
    gpu_balance,
    job_region,
    job_regions,
    move_allowed,
    sigmoid,
    storage_balance,
    storage_used,
    tetris_cost,
)
from actors.policies.mast.tetris.plan import TetrisMove, TetrisPlan, evaluate_move, plan_tetris
from tests.support.examples import examples

SIG_1 = 1.0 / (1.0 + math.exp(-1.0))  # 0.7310585786...
SIG_15 = 1.0 / (1.0 + math.exp(-1.5))  # 0.8175744762...

# Only expression 1 (w1 = 1 per byte), no constraint 6: the move tests read in bytes.
BYTES_ONLY = TetrisParams(w1=1.0, w2=0.0, w3=0.0, home_threshold=0.0, min_gain=0.0)


def table(name: str, home: str, size: int = 1, replicas: tuple[str, ...] = ()) -> TetrisTable:
    dr = replicas[0] if replicas else None
    return TetrisTable(name=name, size_bytes=size, home=home, replicas=replicas, dr_region=dr)


def ml(id: str, *tables: str, gpu: str = "H", hours: float = 10.0, priority: int = 3) -> TetrisJob:
    return TetrisJob(
        id=id, kind="ml", tables=tables, gpu_type=gpu, gpu_hours=hours, priority=priority
    )


def sql(id: str, *tables: str, app: str = "spark", cpu: float = 10.0) -> TetrisJob:
    return TetrisJob(id=id, kind="analytics", tables=tables, cpu_hours=cpu, app=app)


def region(
    name: str, storage: int = 10_000, gpus: dict[str, float] | None = None, **cpu: float
) -> TetrisRegion:
    return TetrisRegion(
        name=name,
        storage_bytes=storage,
        gpu_supply_hours={"H": 100.0} if gpus is None else gpus,
        cpu_capacity_hours=cpu,
    )


def snap(
    tables: list[TetrisTable], jobs: list[TetrisJob], regions: list[TetrisRegion]
) -> TetrisSnapshot:
    return TetrisSnapshot(tables=tuple(tables), jobs=tuple(jobs), regions=tuple(regions))


def moves(plan: TetrisPlan) -> list[tuple[str, str, str, float, int]]:
    return [(m.table, m.src, m.dst, m.gain, m.size_bytes) for m in plan.moves]


# ---- R(job) and the cost terms ------------------------------------------------------
HOMES = {"a": "A", "b": "B", "c": "A", "d": "B", "e": "C", "f": "B", "g": "A"}
SIZES = {"a": 100, "b": 50, "c": 30, "d": 80, "e": 10, "f": 40, "g": 40}


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (ml("m", "a", "c"), "A"),  # both tables at A
        (ml("m", "a", "b"), None),  # A and B: an ML job must read locally -> NULL
        (ml("m", "e"), "C"),
        (sql("s", "a", "b", "c"), "A"),  # 2 tables at A vs 1 at B
        (sql("s", "a", "b"), "A"),  # 1-1: A holds 100 bytes, B 50
        (sql("s", "b", "c"), "B"),  # 1-1: B holds 50, A 30
        (sql("s", "f", "g"), "A"),  # 1-1, 40-40 bytes: the first name
    ],
)
def test_job_region_rules(job: TetrisJob, expected: str | None) -> None:
    assert job_region(job, HOMES, SIZES) == expected


def cost_instance() -> TetrisSnapshot:
    return snap(
        [table(n, HOMES[n], SIZES[n]) for n in "abcde"],
        [
            ml("m1", "a", "c"),
            ml("m2", "a", "b"),
            sql("s1", "a", "b", "c"),
            sql("s2", "b", "d", "e"),
        ],
        [region("A"), region("B"), region("C")],
    )


def test_expression_1_counts_bytes_read_away_from_the_job_region() -> None:
    # m1 (a, c) -> A: 0 | m2 (a, b) -> NULL: all of it, 100 + 50 = 150
    # s1 (a, b, c) -> A: b is remote, 50 | s2 (b, d, e) -> B (2 of 3): e is remote, 10
    # total 210 bytes; w1 = 0.5 -> 105
    s = cost_instance()
    homes = {t.name: t.home for t in s.tables}
    assert cross_region_bytes(s, homes, job_regions(s, homes)) == 210
    cost = tetris_cost(s, TetrisParams(w1=0.5, w2=0.0, w3=0.0))
    assert (cost.cross_region_bytes, cost.cross_region, cost.total) == (210, 105.0, 105.0)


def gpu_instance() -> TetrisSnapshot:
    # A and B have 100 H-hours each (supply shares 0.5 / 0.5). Demand:
    #   a0 (p0, 150 h) at A; b0 (p0, 50 h) at B; b3 (p3, 100 h) at B;
    #   n (p0, 1000 h) reads tables at A and B: R = NULL, it adds to no region;
    #   v (V GPUs, 70 h): no region has V, so V is skipped.
    return snap(
        [table("ta", "A"), table("tb", "B"), table("tb3", "B"), table("tv", "A")],
        [
            ml("a0", "ta", hours=150, priority=0),
            ml("b0", "tb", hours=50, priority=0),
            ml("b3", "tb3", hours=100, priority=3),
            ml("n", "ta", "tb", hours=1000, priority=0),
            ml("v", "tv", gpu="V", hours=70, priority=0),
        ],
        [region("A"), region("B")],
    )


def test_expressions_2_7_8_gpu_balance_by_hand() -> None:
    # Both regions hold 150 h against 100: overload 50, scale 50 -> sigmoid(1) each.
    # p0: demand shares .75 / .25 vs supply .5 / .5 -> .25^2 + .25^2 = .125, weight 1
    # p3: demand shares 0 / 1                        -> .5^2 + .5^2   = .5,   weight .125
    # v2: sigmoid(1) * (.125 + .0625) = .1875 * 0.73106 = 0.137073...
    # v1: the factor is sigmoid(0) = .5 everywhere: .1875 * .5 = .09375
    s = gpu_instance()
    job_r = job_regions(s, {t.name: t.home for t in s.tables})
    v2 = TetrisParams(overload_scale_gpu_hours=50.0)
    v1 = TetrisParams(version="tetris-v1", overload_scale_gpu_hours=50.0)
    assert gpu_balance(s, job_r, v2) == pytest.approx(0.1875 * SIG_1)
    assert gpu_balance(s, job_r, v1) == pytest.approx(0.09375)
    assert tetris_cost(s, TetrisParams(w1=0.0, w2=2.0, w3=0.0)).gpu_balance == pytest.approx(
        2 * 0.1875 * sigmoid(50 / 10_000)  # the default scale: barely above .5
    )


def test_expressions_3_9_storage_balance_counts_homes_and_replicas() -> None:
    # Capacities 1,000 / 3,000 -> shares .25 / .75. x (300) lives at A; y (100) at B
    # with a replica at A. Held: A 300 + 100 = 400, B 100 -> shares .8 / .2.
    # (.8 - .25)^2 + (.2 - .75)^2 = 2 * .3025 = .605; w3 = 10 -> 6.05; v1 has no such term.
    s = snap(
        [table("x", "A", 300), table("y", "B", 100, replicas=("A",))],
        [],
        [region("A", storage=1_000), region("B", storage=3_000)],
    )
    used = storage_used(s, {"x": "A", "y": "B"})
    assert used == {"A": 400, "B": 100}
    assert storage_balance(s, used) == pytest.approx(0.605)
    assert tetris_cost(s, TetrisParams(w3=10.0)).storage_balance == pytest.approx(6.05)
    assert tetris_cost(s, TetrisParams(version="tetris-v1", w3=10.0)).storage_balance == 0.0
    # y's home moves onto its replica at A: the replica is promoted, A holds y once.
    assert storage_used(s, {"x": "A", "y": "A"}) == {"A": 400, "B": 0}


def test_violations_name_the_broken_constraints() -> None:
    # A holds 400 of 400 (strict: used < capacity fails); spark uses 30 of 20 CPU-hours
    # at A; the only high-priority job (p0) sits at B, which has no H: 0% at home.
    s = snap(
        [table("x", "A", 400), table("y", "B", 1)],
        [sql("s", "x", cpu=30.0), ml("m", "y", priority=0)],
        [region("A", storage=400, spark=20.0), region("B", gpus={})],
    )
    cost = tetris_cost(s, TetrisParams())
    assert cost.violations == ("cpu:spark@A", "home-share", "storage:A")
    assert cost.home_share == 0.0


# ---- hill climbing: moves and the hard constraints ---------------------------------
def two_tables(b_storage: int = 10_000) -> TetrisSnapshot:
    # m reads t1 (100 at A) and t2 (50 at B): R(m) = NULL, 150 bytes read remotely.
    return snap(
        [table("t1", "A", 100), table("t2", "B", 50)],
        [ml("m", "t1", "t2")],
        [region("A"), region("B", storage=b_storage)],
    )


def test_a_move_that_lowers_the_cost_is_taken_and_the_second_goes_stale() -> None:
    # t1 -> B and t2 -> A both put m in one region: gain 150 each; the tie goes to t1
    # (first by name). When t2's turn comes its best region is worked out again:
    # moving it to A would split m again, so it stays (stale).
    plan = plan_tetris(two_tables(), BYTES_ONLY)
    assert moves(plan) == [("t1", "A", "B", 150.0, 100)]
    assert (plan.queued, plan.skipped_stale, plan.bytes_planned) == (2, 1, 100)
    assert (plan.cost_before.total, plan.cost_after.total) == (150.0, 0.0)


def test_a_move_that_would_fill_a_region_is_not_taken() -> None:
    # B holds 50 of 150: t1 (100) would make it 150, not < 150 (constraint 4).
    # t2 -> A instead: A holds 100 + 50 = 150 < 10,000.
    plan = plan_tetris(two_tables(b_storage=150), BYTES_ONLY)
    assert moves(plan) == [("t2", "B", "A", 150.0, 50)]


def test_a_move_that_breaks_an_application_cpu_cap_is_not_taken() -> None:
    # m reads t1 (at B) and t2 (at A): NULL, 150 remote. s (spark, 20 CPU-hours) reads t1.
    # No cap: t1 -> A (m and s follow to A) and t2 -> B both gain 150; t1 goes first.
    # spark capped at 10 CPU-hours in A: s would bring 20 >= 10 there, so t2 -> B.
    def instance(**cap: float) -> TetrisSnapshot:
        return snap(
            [table("t1", "B", 100), table("t2", "A", 50)],
            [ml("m", "t1", "t2"), sql("s", "t1", cpu=20.0)],
            [region("A", **cap), region("B")],
        )

    assert moves(plan_tetris(instance(), BYTES_ONLY)) == [("t1", "B", "A", 150.0, 100)]
    assert moves(plan_tetris(instance(spark=10.0), BYTES_ONLY)) == [("t2", "A", "B", 150.0, 50)]


def test_a_move_that_breaks_training_at_home_is_not_taken() -> None:
    # A has H GPUs, B only V. m (p0, H, 100 h) reads t1 at A: at home with its GPUs.
    # n (p5, V) reads t1 and t2 (at B): NULL, 150 bytes remote.
    # t1 -> B or t2 -> A both fix n (gain 150). t1 -> B drags m to B (no H):
    # high-priority GPU-hours at home drop from 100/100 to 0/100.
    s = snap(
        [table("t1", "A", 100), table("t2", "B", 50)],
        [ml("m", "t1", hours=100, priority=0), ml("n", "t1", "t2", gpu="V", priority=5)],
        [region("A", gpus={"H": 100.0}), region("B", gpus={"V": 100.0})],
    )
    free = plan_tetris(s, BYTES_ONLY)
    assert moves(free) == [("t1", "A", "B", 150.0, 100)]
    assert free.cost_after.home_share == 0.0
    half = plan_tetris(s, TetrisParams(w1=1.0, w2=0.0, w3=0.0, home_threshold=0.5))
    assert moves(half) == [("t2", "B", "A", 150.0, 50)]
    assert half.cost_after.home_share == 1.0


def test_a_multi_table_job_moves_whole_when_one_table_alone_breaks_training_at_home() -> None:
    # A has 10 H GPU-hours, B 90: supply shares (0.1, 0.9). m (p0, H, 50 h) reads t1 and
    # t2, both at A. v1 (sigmoid factor 0.5 everywhere), only expression 2 (w2 = 1):
    #   before: demand shares (1, 0): 0.5 * ((1 - 0.1)^2 + (0 - 0.9)^2) = 0.81
    #   t1 alone to B leaves m NULL: 0 of 1 high-priority jobs at home < 0.9 -> refused.
    #   t1 and t2 to B: demand shares (0, 1): 0.5 * (0.1^2 + 0.1^2) = 0.01, gain 0.80,
    #   split evenly over the two tables' moves.
    s = snap(
        [table("t1", "A", 10), table("t2", "A", 20)],
        [ml("m", "t1", "t2", hours=50, priority=0)],
        [region("A", gpus={"H": 10.0}), region("B", gpus={"H": 90.0})],
    )
    params = TetrisParams(version="tetris-v1", w1=0.0, w2=1.0, w3=0.0, home_threshold=0.9)
    singles_only = plan_tetris(s, msgspec.structs.replace(params, group_jobs_max=0))
    assert singles_only.moves == ()
    plan = plan_tetris(s, params)
    assert [(m.table, m.src, m.dst, m.size_bytes) for m in plan.moves] == [
        ("t1", "A", "B", 10),
        ("t2", "A", "B", 20),
    ]
    assert [m.gain for m in plan.moves] == pytest.approx([0.40, 0.40])
    assert plan.cost_before.total - plan.cost_after.total == pytest.approx(0.80)
    assert plan.bytes_planned == 30
    # A quota too small for the whole group moves nothing (no half-moved job).
    tight = msgspec.structs.replace(params, move_quota_bytes=25)
    assert plan_tetris(s, tight).moves == ()


def interacting() -> TetrisSnapshot:
    # t1, t2 (10 each) at A; s1 (50), s2 (40) at B; s3 (30) at C.
    # m1 = (t1, s1), m2 = (t2, s2), m3 = (t2, s3): all NULL, 60 + 50 + 40 = 150 remote.
    # A is full (20 of 21): nothing can move in. B holds 90 of 101: room for one 10.
    return snap(
        [
            table("t1", "A", 10),
            table("t2", "A", 10),
            table("s1", "B", 50),
            table("s2", "B", 40),
            table("s3", "C", 30),
        ],
        [ml("m1", "t1", "s1"), ml("m2", "t2", "s2"), ml("m3", "t2", "s3")],
        [region("A", storage=21), region("B", storage=101), region("C")],
    )


def test_the_queue_recomputes_the_best_region_before_each_move() -> None:
    # Queued: t1 -> B (fixes m1: 60); t2 -> B (fixes m2: 50; -> C would fix m3: 40).
    # t1 moves first and fills B (100 of 101). t2's best is recomputed: B no longer
    # fits (110 >= 101), so it goes to C for 40. Left: m2 reads 10 + 40 = 50 remotely.
    plan = plan_tetris(interacting(), BYTES_ONLY)
    assert moves(plan) == [("t1", "A", "B", 60.0, 10), ("t2", "A", "C", 40.0, 10)]
    assert (plan.cost_before.total, plan.cost_after.total) == (150.0, 50.0)


def test_the_move_quota_stops_moves() -> None:
    # Quota 15: t1 (10) moves, 5 left; t2 (10) does not fit.
    params = TetrisParams(w1=1.0, w2=0.0, w3=0.0, home_threshold=0.0, move_quota_bytes=15)
    plan = plan_tetris(interacting(), params)
    assert moves(plan) == [("t1", "A", "B", 60.0, 10)]
    assert (plan.skipped_quota, plan.bytes_planned) == (1, 10)


def test_a_table_too_big_for_the_quota_is_skipped_and_smaller_ones_still_move() -> None:
    # m reads a_big (100 at A) and b_small (10 at B): either move gains 110, a_big first
    # by name; with 50 bytes of quota a_big is skipped and b_small moves to A.
    s = snap(
        [table("a_big", "A", 100), table("b_small", "B", 10)],
        [ml("m", "a_big", "b_small")],
        [region("A"), region("B")],
    )
    params = TetrisParams(w1=1.0, w2=0.0, w3=0.0, home_threshold=0.0, move_quota_bytes=50)
    plan = plan_tetris(s, params)
    assert moves(plan) == [("b_small", "B", "A", 110.0, 10)]
    assert plan.skipped_quota == 1


def test_v0_plans_nothing_but_reports_the_cost() -> None:
    # Users' static choices stand; the cost is the v2 model's (same numbers as v2 reports).
    v0 = TetrisParams(version="tetris-v0", w1=1.0, w2=0.0, w3=0.0)
    plan = plan_tetris(two_tables(), v0)
    assert plan.moves == () and plan.bytes_planned == 0
    assert plan.cost_before == plan.cost_after
    assert plan.cost_before.total == 150.0


def overload_instance() -> TetrisSnapshot:
    # X and Y have 100 H-hours each (shares .5 / .5).
    # p0: b0 (100 h) at X            -> shares 1 / 0: gaps .5, .5
    # p1: x1 (40 h) + j (20 h) at X, c1 (60 h) at Y -> .5 / .5: no gap
    # X holds 160 h (overloaded by 60), Y 60 h.
    return snap(
        [table("t", "X"), table("x0", "X"), table("x1", "X"), table("y1", "Y")],
        [
            ml("j", "t", hours=20, priority=1),
            ml("b0", "x0", hours=100, priority=0),
            ml("x1", "x1", hours=40, priority=1),
            ml("c1", "y1", hours=60, priority=1),
        ],
        [region("X", storage=100), region("Y", storage=100)],
    )


def test_v2_relieves_the_overloaded_region_where_v1_keeps_the_balance() -> None:
    # Moving t (j, p1, 20 h) from X to Y: p1 shares become 1/3 / 2/3, gaps 1/6 each.
    # v1: Δ = w_p1 * .5 * 2/36 = .5 * .5 / 18 = 1/72 > 0          -> stay
    # v2 (scale 40): X's overload goes 60 -> 40, its factor sigmoid(1.5) -> sigmoid(1)
    #   p0: .25 * (sigmoid(1) - sigmoid(1.5)) * 1  = -0.0216290  (X's old gap, cheaper)
    #   p1: .5 * (sigmoid(1) + .5) / 36             = +0.0170980  (the new gaps)
    #   Δ = -0.0045309 < 0                                        -> move to Y
    s = overload_instance()
    common = {"w1": 0.0, "w2": 1.0, "w3": 0.0, "home_threshold": 0.0}
    v1 = TetrisParams(version="tetris-v1", overload_scale_gpu_hours=40.0, **common)
    v2 = TetrisParams(version="tetris-v2", overload_scale_gpu_hours=40.0, **common)
    assert evaluate_move(s, v1, "t", "Y").delta == pytest.approx(1 / 72)
    v2_delta = 0.25 * (SIG_1 - SIG_15) + 0.5 * (SIG_1 + 0.5) / 36
    assert v2_delta == pytest.approx(-0.0045309, abs=1e-7)
    assert evaluate_move(s, v2, "t", "Y").delta == pytest.approx(v2_delta)
    assert plan_tetris(s, v1).moves == ()
    (move,) = plan_tetris(s, v2).moves
    assert move == TetrisMove(table="t", src="X", dst="Y", gain=move.gain, size_bytes=1)
    assert move.gain == pytest.approx(-v2_delta)


def test_params_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"policy\.tetris\.w_priority\[1\]"):
        TetrisParams(w_priority=(1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match=r"policy\.tetris\.version"):
        TetrisParams(version="tetris-v3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"policy\.tetris\.home_threshold"):
        TetrisParams(home_threshold=1.5)
    with pytest.raises(ValueError, match=r"policy\.tetris\.overload_scale_gpu_hours"):
        TetrisParams(overload_scale_gpu_hours=0.0)
    with pytest.raises(ValueError, match=r"tetris\.jobs\[m\]\.tables: unknown table 'zz'"):
        snap([table("t1", "A")], [ml("m", "t1", "zz")], [region("A")])
    with pytest.raises(ValueError, match=r"tetris\.tables\[t\]\.dr_region"):
        TetrisTable(name="t", size_bytes=1, home="A", dr_region="B")


# ---- the incremental scoring equals a full recomputation ----------------------------
# (snapshot, params, moves made first, the move to score)
Instance = tuple[TetrisSnapshot, TetrisParams, list[tuple[str, str]], tuple[str, str]]


@st.composite
def instances(draw: st.DrawFn) -> Instance:
    """2-4 regions, 1-6 tables, 0-7 jobs; earlier moves, then the move to score."""
    names = [f"r{i}" for i in range(draw(st.integers(2, 4)))]
    regions = [
        TetrisRegion(
            name=n,
            storage_bytes=draw(st.integers(0, 400)),
            gpu_supply_hours={
                g: float(draw(st.integers(0, 60))) for g in ("H", "A") if draw(st.booleans())
            },
            cpu_capacity_hours={"spark": float(draw(st.integers(0, 40)))}
            if draw(st.booleans())
            else {},
        )
        for n in names
    ]
    tables = []
    for i in range(draw(st.integers(1, 6))):
        home = draw(st.sampled_from(names))
        reps = tuple(r for r in names if r != home and draw(st.integers(0, 3)) == 0)
        tables.append(table(f"t{i}", home, draw(st.integers(0, 100)), replicas=reps))
    tnames = [t.name for t in tables]
    jobs = []
    for i in range(draw(st.integers(0, 7))):
        read = tuple(draw(st.lists(st.sampled_from(tnames), min_size=1, max_size=4, unique=True)))
        app = "spark" if draw(st.booleans()) else None
        if draw(st.booleans()):
            jobs.append(
                TetrisJob(
                    id=f"j{i}",
                    kind="ml",
                    tables=read,
                    gpu_type=draw(st.sampled_from(("H", "A", "V"))),
                    gpu_hours=float(draw(st.integers(0, 80))),
                    cpu_hours=float(draw(st.integers(0, 30))),
                    priority=draw(st.integers(0, 7)),
                    app=app,
                )
            )
        else:
            jobs.append(
                TetrisJob(
                    id=f"j{i}",
                    kind="analytics",
                    tables=read,
                    cpu_hours=float(draw(st.integers(0, 30))),
                    app=app,
                )
            )
    params = TetrisParams(
        version=draw(st.sampled_from(("tetris-v1", "tetris-v2"))),
        w1=draw(st.sampled_from((0.0, 0.01, 1.0))),
        w2=draw(st.sampled_from((0.0, 1.0, 100.0))),
        w3=draw(st.sampled_from((0.0, 1.0, 50.0))),
        overload_scale_gpu_hours=draw(st.sampled_from((1.0, 10.0, 100.0))),
        home_threshold=draw(st.sampled_from((0.0, 0.5, 0.9))),
        min_gain=0.0,
    )
    before = draw(st.lists(st.tuples(st.sampled_from(tnames), st.sampled_from(names)), max_size=4))
    move = (draw(st.sampled_from(tnames)), draw(st.sampled_from(names)))
    return snap(tables, jobs, regions), params, before, move


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_incremental_delta_equals_full_recomputation(inst: Instance) -> None:
    s, params, earlier, (name, dst) = inst
    homes = {t.name: t.home for t in s.tables}
    homes.update(earlier)
    moved = {**homes, name: dst}
    ev = evaluate_move(s, params, name, dst, earlier)
    assert ev.feasible == (homes[name] == dst or move_allowed(s, params, homes, moved))
    if ev.feasible:
        c0, c1 = tetris_cost(s, params, homes), tetris_cost(s, params, moved)
        for got, want in (
            (ev.delta, c1.total - c0.total),
            (ev.cross_region, c1.cross_region - c0.cross_region),
            (ev.gpu_balance, c1.gpu_balance - c0.gpu_balance),
            (ev.storage_balance, c1.storage_balance - c0.storage_balance),
        ):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


@settings(max_examples=examples(75), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_the_gains_of_a_pass_add_up_to_its_cost_drop(inst: Instance) -> None:
    s, params, _, _ = inst
    plan = plan_tetris(s, params)
    gained = sum(m.gain for m in plan.moves)
    assert plan.cost_before.total - gained == pytest.approx(plan.cost_after.total, abs=1e-9)
    assert all(m.gain > 0 for m in plan.moves)
    assert len({m.table for m in plan.moves}) == len(plan.moves)  # each table moves once


# ---- the benchmark, small -----------------------------------------------------------
def test_bench_tetris_runs_small() -> None:
    out = bench_tetris({"tables": 2000, "regions": 5, "jobs": 1000})
    assert (out["tables"], out["regions"], out["jobs"]) == (2000, 5, 1000)
    assert out["pass_s"] > 0 and out["target_s"] == 60
    assert out["moves"] > 0 and out["replicas"] > 0
    assert out["cost_after"] < out["cost_before"]
    assert out["bytes_planned"] <= out["move_quota_bytes"]
