"""RAS: capacity, fault-domain buffer, least churn, and honest shortfalls."""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import OptimizeResult

from actors.policies.mast import ras
from actors.policies.mast.ras import (
    ClusterSpec,
    RasAssignment,
    RasMachine,
    RasParams,
    assign_machines,
    kind_of,
)
from store.mast.records import Machine
from tests.support.examples import examples

Assignment = dict[str, str | None]
Score = tuple[int, int, int, int]  # capacity gap, buffer gap, churn, assigned


def m(
    host: str, fd: str, kind: str = "H100", cluster: str | None = None, ok: bool = True
) -> RasMachine:
    return RasMachine(host=host, fault_domain=fd, kind=kind, cluster=cluster, healthy=ok)


def spec(cid: str, ml: bool = True, **intended: int) -> ClusterSpec:
    return ClusterSpec(id=cid, ml=ml, intended=intended)


# ---- an independent scorer, shared by the brute force and the checks ------------------
def score(machines: list[RasMachine], specs: list[ClusterSpec], new: Assignment) -> Score:
    """(capacity shortfall, buffer shortfall, churn, machines assigned), summed."""
    fds = {x.fault_domain for x in machines}
    cap = buf = 0
    for s in specs:
        for kind, want in s.intended.items():
            held = [x for x in machines if new[x.host] == s.id and x.kind == kind]
            cap += max(0, want - len(held))
            worst = min(sum(1 for x in held if x.fault_domain != f) for f in fds)
            buf += max(0, want - worst)
    churn = sum(1 for x in machines if x.cluster is not None and new[x.host] != x.cluster)
    return cap, buf, churn, sum(1 for c in new.values() if c is not None)


def brute_force(machines: list[RasMachine], specs: list[ClusterSpec]) -> Score:
    """The lexicographic minimum of `score` over every assignment (unhealthy ones stay out)."""
    options = [None, *(s.id for s in specs)]
    free = [x for x in machines if x.healthy]
    best: Score | None = None
    for combo in itertools.product(options, repeat=len(free)):
        new: Assignment = {x.host: None for x in machines}
        new.update({x.host: c for x, c in zip(free, combo, strict=True)})
        s = score(machines, specs, new)
        best = s if best is None or s < best else best
    assert best is not None
    return best


def moves_of(r: RasAssignment) -> list[tuple[str, str | None, str | None]]:
    return list(r.moves)


# ---- small instances vs brute force ------------------------------------------------------
BRUTE_CASES: dict[str, tuple[list[RasMachine], list[ClusterSpec], Score]] = {
    # 3 fds x 3 H100. a and b want 2 each; with the buffer each needs one machine per fd
    # (losing any fd leaves 2): 3 + 3 = 6 of 9. a holds h0, h1 (f0, f1), b holds h2 (f2),
    # so a gains one in f2, b gains two: churn 0, 6 assigned.
    "two clusters fit, growth only": (
        [m(f"h{i}", f"f{i % 3}", cluster={0: "a", 1: "a", 2: "b"}.get(i)) for i in range(9)],
        [spec("a", H100=2), spec("b", H100=2)],
        (0, 0, 0, 6),
    ),
    # a holds all of f0 (h0, h3, h6) and wants 2; b wants 2; f1 and f2 have 3 free each.
    # Churn 0 is possible: b takes 2 in f1 and 2 in f2 (no f0 machine, so losing f1 or f2
    # leaves 2), a keeps its 3 and takes 1 in f1 and 1 in f2 (losing f0 leaves 2):
    # 5 + 4 = 9 assigned. Moving one f0 machine from a to b would need only 7 machines,
    # but a move outweighs any surplus.
    "crowded fault domain: spread instead of move": (
        [m(f"h{i}", f"f{i % 3}", cluster="a" if i % 3 == 0 else None) for i in range(9)],
        [spec("a", H100=2), spec("b", H100=2)],
        (0, 0, 0, 9),
    ),
    # Mixed kinds over 2 fds, one failed machine: cpu 4 (2 per fd), a wants cpu 1, web wants
    # cpu 1 -> each needs one cpu per fd (2 each = 4 of 4). H100: 3 healthy, a wants 1 ->
    # one per fd; g8 (f0, in a) is down, so a takes the f0 spare g5. cpu: a keeps c0, c3,
    # web keeps c1 and takes c2. Churn 1 (g8 leaves a), 4 cpu + 2 H100 = 6 assigned.
    "mixed kinds with a failure": (
        [
            m("c0", "f0", "cpu", "a"),
            m("c1", "f1", "cpu", "web"),
            m("c2", "f0", "cpu"),
            m("c3", "f1", "cpu", "a"),
            m("g5", "f0"),
            m("g6", "f1", cluster="a"),
            m("g7", "f1"),
            m("g8", "f0", cluster="a", ok=False),
        ],
        [spec("a", H100=1, cpu=1), spec("web", ml=False, cpu=1)],
        (0, 0, 1, 6),
    ),
    # Infeasible: 2 fds, 4 H100 (h0, h2 in f0; h1, h3 in f1; a holds h0, h1); a wants 3,
    # b wants 2: 5 > 4, so 1 short at best. a 3 + b 1 leaves the buffer short 2 + 2 = 4;
    # a 2 + b 2 (one per fd each) leaves it short (3 - 1) + (2 - 1) = 3, with a keeping
    # both its machines: (1, 3, 0, 4).
    "too few machines": (
        [m(f"h{i}", f"f{i % 2}", cluster="a" if i < 2 else None) for i in range(4)],
        [spec("a", H100=3), spec("b", H100=2)],
        (1, 3, 0, 4),
    ),
}


@pytest.mark.parametrize("case", list(BRUTE_CASES))
def test_small_instances_are_lexicographically_optimal(case: str) -> None:
    machines, specs, expected = BRUTE_CASES[case]
    best = brute_force(machines, specs)
    assert best == expected
    r = assign_machines(machines, specs)
    assert r.status == "optimal"
    assert score(machines, specs, r.cluster_of) == best
    assert sum(sum(d.values()) for d in r.shortfall.values()) == best[0]
    assert r.churn == best[2]
    assert r.buffer_met == (best[1] == 0)


@st.composite
def tiny_instances(draw: st.DrawFn) -> tuple[list[RasMachine], list[ClusterSpec]]:
    """3-7 machines over 1-3 fds, two kinds, a few down, currents including a gone cluster."""
    n_fd = draw(st.integers(1, 3))
    kinds = st.sampled_from(["H100", "cpu"])
    currents = st.sampled_from([None, "a", "b", "gone"])
    machines = [
        m(f"h{i}", f"f{draw(st.integers(0, n_fd - 1))}", draw(kinds), draw(currents), ok)
        for i in range(draw(st.integers(3, 7)))
        for ok in [draw(st.integers(0, 5)) > 0]
    ]
    a = spec("a", H100=draw(st.integers(0, 3)), cpu=draw(st.integers(0, 2)))
    return machines, [a, spec("b", ml=False, cpu=draw(st.integers(0, 3)))]


@settings(max_examples=examples(30), deadline=None)
@given(tiny_instances())
def test_random_tiny_instances_match_brute_force(
    inst: tuple[list[RasMachine], list[ClusterSpec]],
) -> None:
    machines, specs = inst
    r = assign_machines(machines, specs)
    assert score(machines, specs, r.cluster_of) == brute_force(machines, specs)


# ---- scripted stories -----------------------------------------------------------------
def test_an_assignment_that_already_fits_is_left_alone() -> None:
    # 3 fds; a wants 2 H100 and holds 4 (f0 x2, f1, f2): losing f0 leaves 2, f1 or f2 leaves
    # 3. The surplus machine stays (releasing it would be churn). web wants 2 cpu, holds 3.
    machines = [
        m("g0", "f0", cluster="a"),
        m("g1", "f0", cluster="a"),
        m("g2", "f1", cluster="a"),
        m("g3", "f2", cluster="a"),
        m("g4", "f2"),
        m("c0", "f0", "cpu", "web"),
        m("c1", "f1", "cpu", "web"),
        m("c2", "f2", "cpu", "web"),
        m("c3", "f2", "cpu"),
    ]
    r = assign_machines(machines, [spec("a", H100=2), spec("web", ml=False, cpu=2)])
    assert r.moves == ()
    assert r.churn == 0
    assert r.buffer_met
    assert r.assigned == {"a": {"H100": 4}, "web": {"cpu": 3}}


def test_a_failed_machine_is_replaced_by_a_healthy_one_of_its_kind_and_fault_domain() -> None:
    # a wants 2 H100 over 3 fds -> one per fd. g1 (f1) fails. Spares: g4 in f0, g5 in f1, and
    # a cpu machine in f1. g4 would leave a with f0 x2 + f2: losing f0 leaves 1 < 2, so g5.
    machines = [
        m("g0", "f0", cluster="a"),
        m("g1", "f1", cluster="a", ok=False),
        m("g2", "f2", cluster="a"),
        m("g4", "f0"),
        m("g5", "f1"),
        m("c9", "f1", "cpu"),
    ]
    r = assign_machines(machines, [spec("a", H100=2)])
    assert moves_of(r) == [("g1", "a", None), ("g5", None, "a")]
    assert r.buffer_met
    assert r.churn == 1  # only the failed machine left a cluster


def test_a_machine_of_a_cluster_without_a_spec_leaves_it() -> None:
    r = assign_machines([m("g0", "f0", cluster="gone"), m("g1", "f1")], [spec("a", H100=1)])
    # a wants 1 with the buffer -> both machines (one per fd); g0 moves from gone to a.
    assert moves_of(r) == [("g0", "gone", "a"), ("g1", None, "a")]
    assert r.churn == 1


ML_TO_NON_ML = {
    # (buffer, fds, train holds, web holds, free, new train, new web) -> machines train -> web
    # No buffer, 1 fd, 12 cpu all held (train 8, web 4); train 8 -> 3, web 4 -> 9: web needs
    # 5 more and nothing is free -> exactly 5 move from train; train keeps 3.
    "no buffer, nothing free": (False, 1, 8, 4, 0, 3, 9, 5),
    # Buffer, 4 fds x 4 cpu: train 8 (2 per fd), web 4 (1 per fd), 4 free (1 per fd).
    # web 9 needs 3 outside any fd -> 3 per fd = 12, i.e. 8 more: the 4 free ones (no churn)
    # and 4 from train (1 per fd). train 3 needs 1 per fd = 4, so it can give 8 - 4 = 4.
    "buffer, free ones first": (True, 4, 8, 4, 4, 3, 9, 4),
}


@pytest.mark.parametrize("case", list(ML_TO_NON_ML))
def test_spec_change_moves_only_the_needed_machines_from_ml_to_non_ml(case: str) -> None:
    buffer, n_fd, train, web, free, new_train, new_web, moved = ML_TO_NON_ML[case]
    owners = ["train"] * train + ["web"] * web + [None] * free
    # deal owners round-robin over fds so each cluster is striped evenly
    machines = [m(f"c{i:02d}", f"f{i % n_fd}", "cpu", owner) for i, owner in enumerate(owners)]
    specs = [spec("train", cpu=new_train), spec("web", ml=False, cpu=new_web)]
    r = assign_machines(machines, specs, RasParams(buffer=buffer))
    train_to_web = [mv for mv in r.moves if mv[1:] == ("train", "web")]
    assert len(train_to_web) == moved
    assert r.churn == moved
    assert all(v == 0 for d in r.shortfall.values() for v in d.values())
    assert r.buffer_met or not buffer


def test_churn_weight_zero_releases_the_surplus() -> None:
    # a holds 5, wants 2, no buffer. Default: keep all 5 (a release is churn). With
    # churn_weight 0 only the surplus counts: keep 2 (first by host), release 3.
    machines = [m(f"g{i}", "f0", cluster="a") for i in range(5)]
    assert assign_machines(machines, [spec("a", H100=2)], RasParams(buffer=False)).moves == ()
    r = assign_machines(machines, [spec("a", H100=2)], RasParams(buffer=False, churn_weight=0))
    assert moves_of(r) == [("g2", "a", None), ("g3", "a", None), ("g4", "a", None)]


def test_infeasible_specs_report_shortfalls_instead_of_failing() -> None:
    # 4 H100 over 2 fds, a wants 10: all 4 go to a, short 10 - 4 = 6; losing a fd leaves 2,
    # so the buffer is short 10 - 2 = 8. cpu exists in one fd only: web gets its 1 cpu but
    # losing that fd leaves 0 -> buffer short 1, capacity met.
    machines = [m(f"g{i}", f"f{i % 2}") for i in range(4)] + [m("c0", "f0", "cpu")]
    r = assign_machines(machines, [spec("a", H100=10), spec("web", ml=False, cpu=1)])
    assert r.status == "optimal"
    assert r.shortfall == {"a": {"H100": 6}, "web": {"cpu": 0}}
    assert r.buffer_shortfall == {"a": {"H100": 8}, "web": {"cpu": 1}}
    assert not r.buffer_met


def test_a_solver_that_finds_nothing_keeps_the_current_members(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As if the time limit hit before any point was found: g0 stays in a, g1 (down) leaves,
    # nobody joins; a wants 2 -> short 1, and losing f0 leaves 0 -> buffer short 2.
    monkeypatch.setattr(ras, "milp", lambda *a, **k: OptimizeResult(x=None, status=1))
    machines = [m("g0", "f0", cluster="a"), m("g1", "f1", cluster="a", ok=False), m("g2", "f1")]
    r = assign_machines(machines, [spec("a", H100=2)])
    assert r.status == "failed"
    assert moves_of(r) == [("g1", "a", None)]
    assert (r.shortfall, r.buffer_shortfall) == ({"a": {"H100": 1}}, {"a": {"H100": 2}})


def test_the_answer_does_not_depend_on_input_order() -> None:
    machines, specs, _ = BRUTE_CASES["crowded fault domain: spread instead of move"]
    a = assign_machines(machines, specs)
    b = assign_machines(list(reversed(machines)), list(reversed(specs)))
    assert a == b


def test_bad_input_is_rejected_with_its_path() -> None:
    with pytest.raises(ValueError, match=r"ras.clusters\[a\].intended\['H100'\]"):
        spec("a", H100=-1)
    with pytest.raises(ValueError, match="duplicate"):
        assign_machines([m("g0", "f0"), m("g0", "f1")], [])
    with pytest.raises(ValueError, match="time_limit_s"):
        RasParams(time_limit_s=0)


def test_kind_of_store_machines() -> None:
    gpu = Machine(host="h", region="r", rack="k", fault_domain="f", gpu_type="A100", gpus=8)
    cpu = Machine(host="c", region="r", rack="k", fault_domain="f")
    assert (kind_of(gpu), kind_of(cpu)) == ("A100", "cpu")


# ---- randomized: a feasible buffer is always met -------------------------------------
@st.composite
def feasible_instances(draw: st.DrawFn) -> tuple[list[RasMachine], list[ClusterSpec], Assignment]:
    """Random machines and currents; the intents are read off a random target assignment
    that meets its own buffer, so a buffer-feasible answer exists by construction."""
    n_fd = draw(st.integers(2, 4))
    ids = ["a", "b", "c"]
    machines: list[RasMachine] = []
    target: Assignment = {}
    for i in range(draw(st.integers(4, 30))):
        ok = draw(st.integers(0, 9)) > 0
        cur = draw(st.sampled_from([None, *ids, "gone"]))
        machines.append(
            m(
                f"h{i:02d}",
                f"f{draw(st.integers(0, n_fd - 1))}",
                draw(st.sampled_from(["H100", "cpu"])),
                cur,
                ok,
            )
        )
        target[f"h{i:02d}"] = draw(st.sampled_from([None, *ids])) if ok else None
    fds = {x.fault_domain for x in machines}
    specs: list[ClusterSpec] = []
    for cid in ids:
        intended: dict[str, int] = {}
        for kind in ("H100", "cpu"):
            held = [x for x in machines if target[x.host] == cid and x.kind == kind]
            intended[kind] = min(sum(1 for x in held if x.fault_domain != f) for f in fds)
        specs.append(ClusterSpec(id=cid, ml=cid != "c", intended=intended))
    return machines, specs, target


@settings(max_examples=examples(30), deadline=None)
@given(feasible_instances())
def test_losing_any_fault_domain_leaves_every_cluster_its_intent(
    inst: tuple[list[RasMachine], list[ClusterSpec], Assignment],
) -> None:
    machines, specs, target = inst
    r = assign_machines(machines, specs)
    assert r.status == "optimal" and r.buffer_met
    assert all(r.cluster_of[x.host] is None for x in machines if not x.healthy)
    for lost in {x.fault_domain for x in machines}:  # the largest among them
        left = Counter((r.cluster_of[x.host], x.kind) for x in machines if x.fault_domain != lost)
        for s in specs:
            for kind, want in s.intended.items():
                assert left[(s.id, kind)] >= want, (lost, s.id, kind)
    # and it is no worse than the target we built the intents from: (churn, assigned)
    assert score(machines, specs, r.cluster_of)[2:] <= score(machines, specs, target)[2:]


# ---- scale --------------------------------------------------------------------------------
def solve_time_probe(seed: int = 7) -> tuple[float, RasAssignment]:
    """A region of 6,000 machines in 8 fault domains and 20 clusters; wall seconds and result.

    Per fd: 150 H100, 100 A100, 50 V100, 450 cpu. ML: 4 x H100 200, 2 x A100 250, 2 x V100
    120, each with cpu 60; non-ML: 12 x cpu 180. With the buffer a want of n needs about
    n * 8/7: H100 4 * 229 = 916 <= 1,200, A100 572 <= 800, V100 276 <= 400, cpu 8 * 69 +
    12 * 206 = 3,024 <= 3,600. Currents are random (a third free) and 1% of machines are down.
    """
    rng = random.Random(seed)
    gpu = {"H100": (4, 200), "A100": (2, 250), "V100": (2, 120)}
    specs: list[ClusterSpec] = []
    for kind, (n, want) in gpu.items():
        specs += [spec(f"ml-{kind}-{i}", **{kind: want, "cpu": 60}) for i in range(n)]
    specs += [spec(f"web-{i:02d}", ml=False, cpu=180) for i in range(12)]
    per_fd = {"H100": 150, "A100": 100, "V100": 50, "cpu": 450}
    machines: list[RasMachine] = []
    for f in range(8):
        for kind, n in per_fd.items():
            for i in range(n):
                asks = [s.id for s in specs if kind in s.intended]
                cur = rng.choice(asks) if rng.random() < 2 / 3 else None
                machines.append(m(f"f{f}-{kind}-{i:03d}", f"f{f}", kind, cur, rng.random() > 0.01))
    t0 = time.perf_counter()
    r = assign_machines(machines, specs)
    return time.perf_counter() - t0, r


def test_a_full_region_solves() -> None:
    seconds, r = solve_time_probe()
    print(f"ras: 6,000 machines, 20 clusters, 8 fds solved in {seconds:.2f} s")
    assert len(r.cluster_of) == 6_000
    assert r.status == "optimal" and r.buffer_met
