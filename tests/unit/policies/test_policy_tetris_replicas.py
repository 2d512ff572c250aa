"""Tetris's extra replicas (MAST §3.5): DR, data-GPU collocation, hot tables, capacity."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.policies.mast.tetris.cost import (
    TetrisJob,
    TetrisParams,
    TetrisRegion,
    TetrisSnapshot,
    TetrisTable,
    storage_used,
    tetris_cost,
)
from actors.policies.mast.tetris.plan import TetrisMove, TetrisPlan, homes_after, plan_tetris
from actors.policies.mast.tetris.replicas import (
    ReplicaDeletion,
    ReplicaPlan,
    dr_preference,
    plan_replicas,
)
from store.mast.records import PRIORITY_LOWEST
from tests.support.examples import examples

PARAMS = TetrisParams(home_threshold=0.0)


def table(name: str, home: str, size: int = 100, dr: str | None = None) -> TetrisTable:
    return TetrisTable(
        name=name, size_bytes=size, home=home, replicas=(dr,) if dr else (), dr_region=dr
    )


def ml(id: str, *tables: str, gpu: str = "H", priority: int = 3) -> TetrisJob:
    return TetrisJob(
        id=id, kind="ml", tables=tables, gpu_type=gpu, gpu_hours=10.0, priority=priority
    )


def region(name: str, storage: int = 10_000, **gpus: float) -> TetrisRegion:
    return TetrisRegion(name=name, storage_bytes=storage, gpu_supply_hours=gpus)


def snap(
    tables: list[TetrisTable], jobs: list[TetrisJob], regions: list[TetrisRegion]
) -> TetrisSnapshot:
    return TetrisSnapshot(tables=tuple(tables), jobs=tuple(jobs), regions=tuple(regions))


def plan_with(s: TetrisSnapshot, *moved: tuple[str, str, str]) -> TetrisPlan:
    """A hill-climbing outcome made of the given (table, src, dst) moves."""
    homes = {t.name: t.home for t in s.tables} | {t: dst for t, _, dst in moved}
    sizes = {t.name: t.size_bytes for t in s.tables}
    return TetrisPlan(
        version=PARAMS.version,
        moves=tuple(
            TetrisMove(table=t, src=src, dst=dst, gain=1.0, size_bytes=sizes[t])
            for t, src, dst in moved
        ),
        cost_before=tetris_cost(s, PARAMS),
        cost_after=tetris_cost(s, PARAMS, homes),
        bytes_planned=sum(sizes[t] for t, _, _ in moved),
    )


def orders(replicas: ReplicaPlan) -> list[tuple[str, str, str, int, bool]]:
    return [(o.table, o.region, o.reason, o.priority, o.keep_old_home) for o in replicas.orders]


# ---- DR ---------------------------------------------------------------------------
def test_every_table_gets_a_dr_replica_outside_its_home() -> None:
    # Held before: A 300 (k, m, n), B 100 (k's DR), C 0; 10,000 bytes each.
    # k keeps its DR at B. Then by name: m -> the most free space outside A:
    # C (10,000) over B (9,900). n: B 9,900 and C 9,900 now: a tie, B by name.
    # Nobody reads them: priority 7 and the low-priority deadline.
    s = snap(
        [table("k", "A", dr="B"), table("n", "A"), table("m", "A")],
        [],
        [region("A"), region("B"), region("C")],
    )
    out = plan_replicas(s, plan_with(s), PARAMS)
    assert orders(out) == [
        ("m", "C", "dr", PRIORITY_LOWEST, False),
        ("n", "B", "dr", PRIORITY_LOWEST, False),
    ]
    assert {o.deadline_hint_s for o in out.orders} == {PARAMS.replica_deadline_low_s}
    assert out.dr_regions == (("m", "C"), ("n", "B"))
    assert out.storage_used == {"A": 300, "B": 200, "C": 100}


def test_a_table_moved_onto_its_dr_region_keeps_its_old_home_as_dr() -> None:
    # d moves A -> B, where its DR replica was: the replica becomes the home, and the
    # old home A becomes the DR replica without a copy (keep_old_home), so no deletion.
    # e moves A -> B with its DR at C intact: its old home A is deleted once B has it.
    s = snap(
        [table("d", "A", dr="B"), table("e", "A", dr="C")],
        [],
        [region("A"), region("B"), region("C")],
    )
    out = plan_replicas(s, plan_with(s, ("d", "A", "B"), ("e", "A", "B")), PARAMS)
    assert orders(out) == [("d", "A", "dr", PRIORITY_LOWEST, True)]
    assert out.dr_regions == (("d", "A"),)
    assert out.deletions == (
        ReplicaDeletion(table="e", region="A", after_copy_to="B", size_bytes=100),
    )
    assert out.storage_used == {"A": 100, "B": 200, "C": 100}


# The DR policy's preference: a table read by 3 jobs on H and 1 on V, homed where V is.
@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ({"H", "A"}, (3, 3)),  # adds H, which the home lacks: its 3 readers
        ({"V"}, (0, 1)),  # adds nothing; could take the V reader if the home fell
        ({"H", "V"}, (3, 4)),  # adds H, and could take all four
        (set(), (0, 0)),  # storage only
    ],
)
def test_dr_preference(gpus: set[str], expected: tuple[int, int]) -> None:
    assert dr_preference({"H": 3, "V": 1}, {"V"}, gpus) == expected


def test_a_new_dr_copy_goes_where_its_readers_gpus_are_not_where_storage_is_freest() -> None:
    # t lives at A (H) with no DR. History: 2 jobs read it on H, 1 on V. B (GPU type X)
    # has the most free storage; C has V, which A lacks: C adds the V reader, B nothing.
    # No recurring job reads t: the order gets the lowest priority.
    s = snap(
        [table("t", "A")],
        [],
        [region("A", H=10.0), region("B", storage=100_000, X=10.0), region("C", V=10.0)],
    )
    out = plan_replicas(s, plan_with(s), PARAMS, {"t": {"H": 2, "V": 1}})
    assert orders(out) == [("t", "C", "dr", PRIORITY_LOWEST, False)]
    # Without a history of readers, the freest storage decides.
    assert orders(plan_replicas(s, plan_with(s), PARAMS)) == [
        ("t", "B", "dr", PRIORITY_LOWEST, False)
    ]


# ---- data-GPU collocation ---------------------------------------------------------
def paper_example(dr: str = "S") -> TetrisSnapshot:
    # The §3.5 example: t is read by job1 (GPU1) and job2 (GPU2); no region has both.
    # G1 has GPU1; G2a (100 h) and G2b (200 h) have GPU2; S only stores (t's DR).
    return snap(
        [table("t", "G1", dr=dr)],
        [ml("job1", "t", gpu="GPU1", priority=0), ml("job2", "t", gpu="GPU2", priority=2)],
        [
            region("G1", GPU1=100.0),
            region("G2a", GPU2=100.0),
            region("G2b", GPU2=200.0),
            region("S", storage=100_000),
        ],
    )


def test_paper_example_home_with_gpu1_replica_where_gpu2_is_most_plentiful() -> None:
    # Hill climbing leaves t at G1 (job1 trains at home with its GPUs, nothing is read
    # remotely). job2's R = G1 lacks GPU2 and its DR copy (S) has no GPUs either:
    # a replica goes to G2b, the GPU2 region with the highest supply, at job2's priority.
    s = paper_example()
    plan = plan_tetris(s, TetrisParams(w2=0.0, w3=0.0))
    assert plan.moves == ()
    out = plan_replicas(s, plan, PARAMS)
    assert orders(out) == [("t", "G2b", "colocation", 2, False)]
    assert out.orders[0].deadline_hint_s == PARAMS.replica_deadline_low_s  # 2 > 1


def test_a_dr_replica_that_already_gives_a_region_is_enough() -> None:
    # t's DR copy sits in G2a, which has GPU2: job2 can run there, nothing to order.
    s = paper_example(dr="G2a")
    out = plan_replicas(s, plan_with(s), PARAMS)
    assert out.orders == () and out.unplaced == ()


def test_a_job_whose_tables_are_split_gets_them_together_where_its_gpus_are() -> None:
    # m (p0, H) reads a (at A) and b (at B): R = NULL. H: A 50 h, B 80 h -> B first;
    # B already holds b, so only a is copied there, with m's priority and the high deadline.
    s = snap(
        [table("a", "A", dr="C"), table("b", "B", dr="C")],
        [ml("m", "a", "b", priority=0)],
        [region("A", H=50.0), region("B", H=80.0), region("C")],
    )
    out = plan_replicas(s, plan_with(s), PARAMS)
    assert orders(out) == [("a", "B", "colocation", 0, False)]
    assert out.orders[0].deadline_hint_s == PARAMS.replica_deadline_high_s


def test_the_best_supplied_region_is_skipped_when_it_cannot_store_the_tables() -> None:
    # As above, but B (80 h of H) stores 150 and holds b (100): a would make 200 >= 150.
    # Next by supply, A (50 h) holds a already; b (100) fits there: 200 < 10,000.
    s = snap(
        [table("a", "A", dr="C"), table("b", "B", dr="C")],
        [ml("m", "a", "b", priority=0)],
        [region("A", H=50.0), region("B", storage=150, H=80.0), region("C")],
    )
    assert orders(plan_replicas(s, plan_with(s), PARAMS)) == [("b", "A", "colocation", 0, False)]


def test_v0_gets_dr_replicas_only() -> None:
    s = snap(
        [table("t", "G1")],
        [ml("job2", "t", gpu="GPU2")],
        [region("G1", GPU1=100.0), region("G2", GPU2=100.0)],
    )
    out = plan_replicas(s, plan_with(s), TetrisParams(version="tetris-v0"))
    assert orders(out) == [("t", "G2", "dr", 3, False)]  # DR, not collocation


# ---- hot tables -------------------------------------------------------------------
def test_hot_tables_are_replicated_up_to_the_gpu_types_storage_quota() -> None:
    # R1: 1,000 bytes, H 300 h of its 400 GPU-hours -> H's quota .2 * 1,000 * .75 = 150.
    # H readers: h1 4 jobs, h2 3, h3 3, h4 1 (below hot_min_jobs = 3: not hot).
    # Hottest first: h1 (60) -> 90 left; h2 (100) does not fit; h3 (50) -> 40 left.
    # Every job trains at R0 (which has H): no collocation replica is needed.
    sizes = {"h1": 60, "h2": 100, "h3": 50, "h4": 10}
    readers = {"h1": 4, "h2": 3, "h3": 3, "h4": 1}
    s = snap(
        [table(t, "R0", size, dr="R2") for t, size in sizes.items()],
        [ml(f"{t}-{k}", t, priority=1 + k) for t, n in readers.items() for k in range(n)],
        [region("R0", H=100.0), region("R1", storage=1_000, H=300.0, A=100.0), region("R2")],
    )
    out = plan_replicas(s, plan_with(s), PARAMS)
    assert orders(out) == [("h1", "R1", "hot", 1, False), ("h3", "R1", "hot", 1, False)]
    assert out.storage_used["R1"] == 110


def test_past_readers_make_a_table_hot_though_no_recurring_job_reads_it() -> None:
    # f (60 bytes, home R0 with H, DR R2) is read by no recurring job, but 3 past
    # first-time jobs read it on H: with hot_min_jobs = 3 it is hot for H. R1's H quota
    # is .2 * 1,000 * 1 = 200 >= 60: copied there, at the lowest priority (first-time
    # readers bring none Tetris could plan for). g, read by 2 past H jobs, is not hot.
    s = snap(
        [table("f", "R0", 60, dr="R2"), table("g", "R0", 10, dr="R2")],
        [],
        [region("R0", H=100.0), region("R1", storage=1_000, H=300.0), region("R2")],
    )
    out = plan_replicas(s, plan_with(s), PARAMS, {"f": {"H": 3}, "g": {"H": 2}})
    assert orders(out) == [("f", "R1", "hot", PRIORITY_LOWEST, False)]
    assert out.orders[0].deadline_hint_s == PARAMS.replica_deadline_low_s


def test_readers_of_an_unknown_table_are_refused() -> None:
    s = snap([table("t", "A", dr="B")], [], [region("A"), region("B")])
    with pytest.raises(ValueError, match="unknown table 'nope'"):
        plan_replicas(s, plan_with(s), PARAMS, {"nope": {"H": 1}})


# ---- capacity ---------------------------------------------------------------------
@st.composite
def warehouses(draw: st.DrawFn) -> TetrisSnapshot:
    names = [f"r{i}" for i in range(draw(st.integers(2, 4)))]
    regions = [
        region(
            n,
            storage=draw(st.integers(0, 600)),
            **{g: float(draw(st.integers(1, 50))) for g in ("H", "A") if draw(st.booleans())},
        )
        for n in names
    ]
    tables = []
    for i in range(draw(st.integers(1, 8))):
        home = draw(st.sampled_from(names))
        dr = draw(st.sampled_from([None, *(r for r in names if r != home)]))
        tables.append(table(f"t{i}", home, draw(st.integers(0, 120)), dr=dr))
    tnames = [t.name for t in tables]
    jobs = [
        ml(
            f"j{i}",
            *draw(st.lists(st.sampled_from(tnames), min_size=1, max_size=3, unique=True)),
            gpu=draw(st.sampled_from(("H", "A"))),
            priority=draw(st.integers(0, 7)),
        )
        for i in range(draw(st.integers(0, 8)))
    ]
    return snap(tables, jobs, regions)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(warehouses(), st.sampled_from((0.2, 1.0)), st.integers(1, 3), st.data())
def test_replicas_never_push_a_region_over_its_capacity(
    s: TetrisSnapshot, share: float, hot_min: int, data: st.DataObject
) -> None:
    params = TetrisParams(home_threshold=0.0, hot_replica_storage_share=share, hot_min_jobs=hot_min)
    # With or without a history of readers beyond the recurring jobs.
    counts = st.dictionaries(st.sampled_from(("H", "A", "V")), st.integers(1, 5), max_size=3)
    history = data.draw(
        st.none() | st.fixed_dictionaries({}, optional={t.name: counts for t in s.tables})
    )
    plan = plan_tetris(s, params)
    out = plan_replicas(s, plan, params, history)
    homes = homes_after(s, plan)
    before = storage_used(s, homes)
    cap = {r.name: r.storage_bytes for r in s.regions}
    for r, used in out.storage_used.items():
        assert used < cap[r] or used == before[r]  # a full region gets nothing new
    held = {t.name: {homes[t.name], *t.replicas} for t in s.tables}
    for o in out.orders:
        assert o.region not in held[o.table]  # only new copies are ordered
        held[o.table].add(o.region)
    assert len({(o.table, o.region) for o in out.orders}) == len(out.orders)
    for t in s.tables:  # a DR replica outside the home, unless none fit
        assert len(held[t.name]) >= 2 or f"dr:{t.name}" in out.unplaced
