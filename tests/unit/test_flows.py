"""Tests of the WAN fluid model (`emulator.net.flows`).

Tables carry the expected numbers worked out in comments; property tests
check the model's invariants (capacity, max-min, conservation, determinism)
over random topologies and flow mixes.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.net.flows import DEFAULT_QOS_WEIGHTS, FluidNetwork, Link, flow_path
from emulator.units import S
from tests.support.examples import examples

MB = 1_000_000  # bytes
FAST = 1e12  # bytes/s: a capacity that is never the bottleneck


def net(
    egress: dict[str, float] | None = None,
    ingress: dict[str, float] | None = None,
    pairs: dict[tuple[str, str], float] | None = None,
    regions: tuple[str, ...] = ("a", "b", "c"),
) -> FluidNetwork:
    """Regions a, b, c, every link FAST unless overridden."""
    eg = {r: FAST for r in regions} | (egress or {})
    ing = {r: FAST for r in regions} | (ingress or {})
    pr: dict[tuple[str, str], float] = {}
    for i, x in enumerate(regions):
        for y in regions[i + 1 :]:
            pr[(x, y)] = FAST
    pr |= pairs or {}
    return FluidNetwork(eg, ing, pr)


def run_to_end(n: FluidNetwork) -> list[tuple[int, list[int]]]:
    """Drive the model like the kernel: advance to each completion until none is left."""
    events: list[tuple[int, list[int]]] = []
    while (t := n.next_completion_us()) is not None:
        events.append((t, n.advance(t)))
    return events


# --------------------------------------------------------------- single flow


@pytest.mark.parametrize(
    ("egress_a", "ingress_b", "pair_ab", "nbytes", "rate", "done_us"),
    [
        # pair is the bottleneck: 250 MB / 100 MB/s = 2.5 s
        (FAST, FAST, 100 * MB, 250 * MB, 100 * MB, 2_500_000),
        # egress of a: 250 MB / 40 MB/s = 6.25 s
        (40 * MB, FAST, 100 * MB, 250 * MB, 40 * MB, 6_250_000),
        # ingress of b: 1000 B / 3 B/s = 333.333333333... s -> rounded UP
        (FAST, 3.0, FAST, 1000, 3.0, 333_333_334),
        # 1 byte at 1 GB/s = 1 ns -> 1 us (never done early)
        (FAST, 1e9, FAST, 1, 1e9, 1),
    ],
)
def test_single_flow_gets_bottleneck_and_finishes_at_ceil(
    egress_a: float, ingress_b: float, pair_ab: float, nbytes: int, rate: float, done_us: int
) -> None:
    n = net(egress={"a": egress_a}, ingress={"b": ingress_b}, pairs={("a", "b"): pair_ab})
    n.start(1, "a", "b", nbytes, now_us=0)
    assert n.rate(1) == rate
    assert n.next_completion_us() == done_us
    assert n.advance(done_us - 1) == []
    assert n.progress(1, done_us - 1)[0] < nbytes
    assert n.advance(done_us) == [1]
    assert n.active() == []
    assert n.next_completion_us() is None


# --------------------------------------------------- sharing and speeding up


@dataclass(frozen=True)
class Share:
    """Two flows a->b on a 100 MB/s pair; flow 2 starts at `start2_us`."""

    name: str
    bytes1: int
    bytes2: int
    start2_us: int
    expect: list[tuple[int, list[int]]]


SHARE_CASES = [
    # Both start at 0 at 50 MB/s each. Flow 1 (100 MB) ends at 2 s; flow 2 has
    # 100 of 300 MB, the rest 200 MB at 100 MB/s takes 2 s more: ends at 4 s.
    Share("survivor speeds up", 100 * MB, 300 * MB, 0, [(2 * S, [1]), (4 * S, [2])]),
    # Flow 1 (300 MB) alone for 1 s: 100 MB. Then 50/50: flow 2 (100 MB) ends
    # at 1 + 2 = 3 s, flow 1 has 100 + 100 = 200 MB; 100 MB at 100 MB/s: 4 s.
    Share("late joiner", 300 * MB, 100 * MB, 1 * S, [(3 * S, [2]), (4 * S, [1])]),
    # Equal sizes end together: 100 MB each at 50 MB/s = 2 s.
    Share("tie", 100 * MB, 100 * MB, 0, [(2 * S, [1, 2])]),
]


@pytest.mark.parametrize("case", SHARE_CASES, ids=lambda c: c.name)
def test_two_flows_share_one_link(case: Share) -> None:
    n = net(pairs={("a", "b"): 100 * MB})
    n.start(1, "a", "b", case.bytes1, now_us=0)
    n.start(2, "a", "b", case.bytes2, now_us=case.start2_us)
    assert n.rate(1) == n.rate(2) == 50 * MB
    assert run_to_end(n) == case.expect


def test_survivor_rate_doubles_when_other_ends() -> None:
    n = net(pairs={("a", "b"): 100 * MB})
    n.start(1, "a", "b", 100 * MB, now_us=0)
    n.start(2, "a", "b", 300 * MB, now_us=0)
    assert n.advance(2 * S) == [1]
    assert n.rate(2) == 100 * MB
    assert n.progress(2, 2 * S) == (100 * MB, 300 * MB)


# -------------------------------------------------------------- partitions


def test_partition_pauses_and_heal_shifts_completion_by_its_length() -> None:
    # Unpartitioned, the survivor case ends at 2 s and 4 s. Cut the pair from
    # 1 s to 4 s (3 s): at 1 s both have 50 MB; paused, nothing moves; from
    # 4 s flow 1 needs 50 MB at 50 MB/s -> 5 s, flow 2 then has 100 MB and
    # 200 MB at 100 MB/s -> 7 s. Both shift by exactly 3 s.
    n = net(pairs={("a", "b"): 100 * MB})
    n.start(1, "a", "b", 100 * MB, now_us=0)
    n.start(2, "a", "b", 300 * MB, now_us=0)
    n.set_pair_down("b", "a", True, now_us=1 * S)
    assert n.rate(1) == n.rate(2) == 0.0
    assert n.next_completion_us() is None
    assert n.advance(3 * S) == []
    assert n.progress(1, 3 * S) == (50 * MB, 100 * MB)
    assert n.progress(2, 3 * S) == (50 * MB, 300 * MB)
    n.set_pair_down("a", "b", False, now_us=4 * S)
    assert n.rate(1) == n.rate(2) == 50 * MB
    assert run_to_end(n) == [(5 * S, [1]), (7 * S, [2])]


def test_paused_flow_leaves_capacity_to_others() -> None:
    # a->b and c->b share b's 60 MB/s ingress: 30 each. Cutting pair (a, b)
    # pauses flow 1, which then takes nothing: flow 2 gets all 60.
    n = net(ingress={"b": 60 * MB})
    n.start(1, "a", "b", 600 * MB, now_us=0)
    n.start(2, "c", "b", 600 * MB, now_us=0)
    assert (n.rate(1), n.rate(2)) == (30 * MB, 30 * MB)
    n.set_pair_down("a", "b", True, now_us=0)
    assert (n.rate(1), n.rate(2)) == (0.0, 60 * MB)
    # 600 MB at 60 MB/s = 10 s
    assert n.next_completion_us() == 10 * S


def test_region_down_pauses_every_flow_touching_it() -> None:
    # b's egress and ingress and the pair (a, c) are 10 MB/s; flows of
    # 100 MB a->b, b->c, a->c all run at 10 MB/s. Region b is down from 1 s
    # to 2 s: flows 1 and 2 pause with 10 MB done, then need 90 MB more at
    # 10 MB/s -> 2 + 9 = 11 s. Flow 3 never pauses: 100 MB / 10 MB/s = 10 s.
    # Healing pair (a, b) meanwhile does not undo the region being down.
    n = net(egress={"b": 10 * MB}, ingress={"b": 10 * MB}, pairs={("a", "c"): 10 * MB})
    n.start(1, "a", "b", 100 * MB, now_us=0)
    n.start(2, "b", "c", 100 * MB, now_us=0)
    n.start(3, "a", "c", 100 * MB, now_us=0)
    n.set_region_down("b", True, now_us=1 * S)
    n.set_pair_down("a", "b", False, now_us=1 * S)
    assert (n.rate(1), n.rate(2), n.rate(3)) == (0.0, 0.0, 10 * MB)
    assert n.link_down(("out", "b")) and n.link_down(("pair", "a", "b"))
    assert n.progress(1, 2 * S) == (10 * MB, 100 * MB)
    n.set_region_down("b", False, now_us=2 * S)
    assert (n.rate(1), n.rate(2)) == (10 * MB, 10 * MB)
    assert run_to_end(n) == [(10 * S, [3]), (11 * S, [1, 2])]


# ---------------------------------------------------------------------- QoS


@pytest.mark.parametrize(
    ("qos1", "qos2", "rate1", "rate2"),
    [
        # weights 4 : 1 on 100 MB/s -> 80 : 20
        ("high", "default", 80 * MB, 20 * MB),
        # weights 1 : 0.25 -> 80 : 20
        ("default", "background", 80 * MB, 20 * MB),
        # weights 4 : 0.25 -> 100 * 4 / 4.25 and 100 * 0.25 / 4.25
        ("high", "background", 100 * MB * 4 / 4.25, 100 * MB * 0.25 / 4.25),
        # same class -> 50 : 50
        ("background", "background", 50 * MB, 50 * MB),
    ],
)
def test_qos_weights_split_a_link(qos1: str, qos2: str, rate1: float, rate2: float) -> None:
    n = net(pairs={("a", "b"): 100 * MB})
    n.start(1, "a", "b", 10**9, now_us=0, qos=qos1)
    n.start(2, "a", "b", 10**9, now_us=0, qos=qos2)
    assert n.rate(1) == pytest.approx(rate1, rel=1e-12)
    assert n.rate(2) == pytest.approx(rate2, rel=1e-12)


# ------------------------------------------------------------ true max-min


@pytest.mark.parametrize(
    ("flows", "expected"),
    [
        # out(a)=10 limits flow 1; b's ingress (60) leaves 50 for flow 2,
        # not the naive 60 / 2 = 30.
        ([(1, "a", "b"), (2, "c", "b")], {1: 10, 2: 50}),
        # Add a->c: flows 1 and 3 split out(a) 5 + 5; flow 2 gets 60 - 5 = 55.
        ([(1, "a", "b"), (2, "c", "b"), (3, "a", "c")], {1: 5, 2: 55, 3: 5}),
        # c->a and c->b share nothing tight but b's ingress with 2 only:
        # flow 4 (c->a) runs at the pair (a, c) = 1000, flow 2 at 60.
        ([(2, "c", "b"), (4, "c", "a")], {2: 60, 4: 1000}),
    ],
)
def test_bottleneck_elsewhere_leaves_its_share_to_others(
    flows: list[tuple[int, str, str]], expected: dict[int, float]
) -> None:
    n = net(
        egress={"a": 10 * MB, "c": 2000 * MB},
        ingress={"b": 60 * MB},
        pairs={("a", "c"): 1000 * MB},
    )
    for fid, src, dst in flows:
        n.start(fid, src, dst, 10**12, now_us=0)
    assert {fid: n.rate(fid) for fid, _, _ in flows} == {fid: r * MB for fid, r in expected.items()}


# ---------------------------------------------------------------- rate caps


def test_rate_cap_honoured_and_leftover_redistributed() -> None:
    # Three flows on a 90 MB/s pair: 30 each. Cap flow 1 at 10: the other
    # two split the remaining 80 -> 40 each. Lift the cap: back to 30.
    n = net(pairs={("a", "b"): 90 * MB})
    for fid in (1, 2, 3):
        n.start(fid, "a", "b", 10**12, now_us=0)
    assert [n.rate(f) for f in (1, 2, 3)] == [30 * MB] * 3
    v = n.version
    n.set_rate_cap(1, 10 * MB, now_us=1 * S)
    assert n.version > v
    assert [n.rate(f) for f in (1, 2, 3)] == [10 * MB, 40 * MB, 40 * MB]
    n.set_rate_cap(1, None, now_us=2 * S)
    assert [n.rate(f) for f in (1, 2, 3)] == [30 * MB] * 3
    # Bytes of flow 1: 30 MB (0-1 s) + 10 MB (1-2 s) + 30 MB (2-3 s).
    assert n.progress(1, 3 * S)[0] == 70 * MB


@pytest.mark.parametrize(
    ("qos", "cap", "rate1", "rate2"),
    [
        # high would take 80 of 100; capped at 20, default takes the other 80.
        ("high", 20 * MB, 20 * MB, 80 * MB),
        # cap above the fair share changes nothing: 80 / 20.
        ("high", 90 * MB, 80 * MB, 20 * MB),
        # cap 0 holds the flow still; the other takes the whole link.
        ("default", 0.0, 0.0, 100 * MB),
    ],
)
def test_rate_cap_with_weights(qos: str, cap: float, rate1: float, rate2: float) -> None:
    n = net(pairs={("a", "b"): 100 * MB})
    n.start(1, "a", "b", 10**9, now_us=0, qos=qos, rate_cap_bps=cap)
    n.start(2, "a", "b", 10**9, now_us=0)
    assert (n.rate(1), n.rate(2)) == (rate1, rate2)


def test_capped_flow_finishes_at_cap_pace() -> None:
    # 100 MB capped at 25 MB/s on an idle link: 4 s.
    n = net()
    n.start(1, "a", "b", 100 * MB, now_us=0, rate_cap_bps=25 * MB)
    assert run_to_end(n) == [(4 * S, [1])]


# ------------------------------------------------------------------- cancel


def test_cancel_returns_bytes_done_and_frees_share() -> None:
    # Flows of 1000 MB and 300 MB at 50 MB/s each. Cancel flow 1 at 2 s:
    # it moved 100 MB. Flow 2 has 100 MB, the other 200 MB at 100 MB/s -> 4 s.
    n = net(pairs={("a", "b"): 100 * MB})
    n.start(1, "a", "b", 1000 * MB, now_us=0)
    n.start(2, "a", "b", 300 * MB, now_us=0)
    assert n.cancel(1, now_us=2 * S) == 100 * MB
    assert n.active() == [2]
    assert run_to_end(n) == [(4 * S, [2])]


def test_cancel_after_unreported_completion_returns_full_size() -> None:
    # Flow 1 ends at 1 s but the caller cancels at 3 s without advancing:
    # it is done (all 100 MB) and no longer reported by advance.
    n = net(pairs={("a", "b"): 100 * MB})
    n.start(1, "a", "b", 100 * MB, now_us=0)
    n.start(2, "a", "c", 10**15, now_us=0)
    assert n.cancel(1, now_us=3 * S) == 100 * MB
    assert n.advance(3 * S) == []


# ---------------------------------------------------------------- edge cases


def test_zero_byte_flow_completes_at_next_advance_even_if_paused() -> None:
    n = net()
    n.start(7, "a", "b", 10**9, now_us=5)
    n.set_pair_down("a", "b", True, now_us=5)
    n.start(8, "a", "b", 0, now_us=5)
    assert n.rate(8) == 0.0
    assert n.next_completion_us() == 5
    assert n.progress(8, 5) == (0, 0)
    assert n.advance(5) == [8]
    assert n.active() == [7]


def test_mutating_call_never_swallows_a_completion() -> None:
    # Flow 1 ends at 1 s; a start at 3 s sees it finished but holds it, and
    # the next advance still reports it (with next_completion_us == now).
    n = net(pairs={("a", "b"): 100 * MB})
    n.start(1, "a", "b", 100 * MB, now_us=0)
    n.start(2, "a", "c", 10 * MB, now_us=3 * S)
    assert n.progress(1, 3 * S) == (100 * MB, 100 * MB)
    assert n.rate(1) == 0.0
    assert n.next_completion_us() == 3 * S
    assert n.advance(3 * S) == [1]


def test_progress_accounts_for_completions_in_between_without_mutating() -> None:
    # Survivor case: at 3 s flow 2 has 100 MB (0-2 s) + 100 MB (2-3 s).
    n = net(pairs={("a", "b"): 100 * MB})
    n.start(1, "a", "b", 100 * MB, now_us=0)
    n.start(2, "a", "b", 300 * MB, now_us=0)
    v = n.version
    assert n.progress(2, 3 * S) == (200 * MB, 300 * MB)
    assert n.progress(1, 3 * S) == (100 * MB, 100 * MB)
    assert (n.version, n.now_us, n.active()) == (v, 0, [1, 2])


def test_version_counts_changes_only() -> None:
    n = net(pairs={("a", "b"): 100 * MB})
    v0 = n.version
    n.start(1, "a", "b", 1000 * MB, now_us=0)
    v1 = n.version
    assert v1 > v0
    assert n.advance(S) == []
    n.set_pair_down("a", "c", True, now_us=S)  # no flow on it: rates unchanged
    assert n.version == v1
    n.set_pair_down("a", "b", True, now_us=S)
    assert n.version > v1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda n: n.start(1, "a", "a", 1, 100), "both 'a'"),
        (lambda n: n.start(1, "a", "zz", 1, 100), "unknown region 'zz'"),
        (lambda n: n.start(1, "a", "c", 1, 100), "unknown region pair"),
        (lambda n: n.start(1, "a", "b", 1, 100, qos="gold"), "unknown qos 'gold'"),
        (lambda n: n.start(1, "a", "b", -1, 100), "nbytes"),
        (lambda n: n.start(1, "a", "b", 1, 100, rate_cap_bps=-1.0), "rate_cap_bps"),
        (lambda n: n.start(9, "a", "b", 1, 100), "already active"),
        (lambda n: n.start(1, "a", "b", 1, 99), "time went backwards"),
        (lambda n: n.advance(99), "time went backwards"),
        (lambda n: n.set_pair_down("a", "c", True, 200), "unknown region pair"),
        (lambda n: n.set_region_down("zz", True, 200), "unknown region 'zz'"),
    ],
)
def test_rejections_name_the_culprit_and_change_nothing(
    call: Callable[[FluidNetwork], object], message: str
) -> None:
    n = FluidNetwork(
        {"a": 1.0, "b": 1.0, "c": 1.0},
        {"a": 1.0, "b": 1.0, "c": 1.0},
        {("b", "a"): 1.0, ("b", "c"): 1.0},
    )
    n.start(9, "a", "b", 10, now_us=100)
    v = n.version
    with pytest.raises(ValueError, match=message):
        call(n)
    assert (n.version, n.now_us, n.active()) == (v, 100, [9])


@pytest.mark.parametrize(
    ("egress", "ingress", "pairs", "message"),
    [
        ({"a": 1.0}, {"a": 1.0, "b": 1.0}, {}, "region 'b' has no egress"),
        ({"a": 1.0}, {"a": 1.0}, {("a", "x"): 1.0}, "unknown region 'x'"),
        (
            {"a": 1.0, "b": 1.0},
            {"a": 1.0, "b": 1.0},
            {("a", "b"): 1.0, ("b", "a"): 2.0},
            "given twice",
        ),
        ({"a": 0.0}, {"a": 1.0}, {}, r"capacity of \('out', 'a'\)"),
    ],
)
def test_construction_rejections(
    egress: dict[str, float],
    ingress: dict[str, float],
    pairs: dict[tuple[str, str], float],
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        FluidNetwork(egress, ingress, pairs)


def test_unknown_flow_is_a_key_error() -> None:
    n = net()
    with pytest.raises(KeyError):
        n.cancel(3, 0)
    with pytest.raises(KeyError):
        n.rate(3)


# ------------------------------------------------------- property-based tests

REGIONS = ("a", "b", "c", "d")
QOS = sorted(DEFAULT_QOS_WEIGHTS)


@dataclass(frozen=True)
class FlowSpec:
    flow_id: int
    src: str
    dst: str
    nbytes: int
    qos: str
    cap: float | None


@st.composite
def worlds(draw: st.DrawFn) -> tuple[FluidNetwork, list[FlowSpec], list[tuple[str, str]]]:
    """A random 2-4 region network, some flows, and some pairs to cut."""
    k = draw(st.integers(2, 4))
    regions = REGIONS[:k]
    cap = st.integers(1_000, 10_000_000_000).map(float)
    egress = {r: draw(cap) for r in regions}
    ingress = {r: draw(cap) for r in regions}
    pairs = {(x, y): draw(cap) for i, x in enumerate(regions) for y in regions[i + 1 :]}
    ends = st.tuples(st.sampled_from(regions), st.sampled_from(regions)).filter(
        lambda e: e[0] != e[1]
    )
    specs = []
    for fid in range(draw(st.integers(1, 8))):
        src, dst = draw(ends)
        specs.append(
            FlowSpec(
                flow_id=fid,
                src=src,
                dst=dst,
                nbytes=draw(st.integers(0, 10**10)),
                qos=draw(st.sampled_from(QOS)),
                cap=draw(st.none() | cap),
            )
        )
    cuts = draw(st.lists(st.sampled_from(sorted(pairs)), max_size=2, unique=True))
    return FluidNetwork(egress, ingress, pairs), specs, cuts


def start_all(n: FluidNetwork, specs: list[FlowSpec], now_us: int = 0) -> None:
    for s in specs:
        n.start(s.flow_id, s.src, s.dst, s.nbytes, now_us, qos=s.qos, rate_cap_bps=s.cap)


def check_rates(n: FluidNetwork, specs: dict[int, FlowSpec]) -> None:
    """No link over capacity; every running flow is capped or bottlenecked fairly."""
    load = n.link_load_bps()
    for link, used in load.items():
        assert used <= n.capacity_bps(link) * (1 + 1e-6), link

    def saturated(link: Link) -> bool:
        return load.get(link, 0.0) >= n.capacity_bps(link) * (1 - 1e-6)

    share = {fid: n.rate(fid) / DEFAULT_QOS_WEIGHTS[specs[fid].qos] for fid in n.active()}
    on_link: dict[Link, list[int]] = {}
    for fid in n.active():
        for link in flow_path(specs[fid].src, specs[fid].dst):
            on_link.setdefault(link, []).append(fid)
    for fid in n.active():
        s = specs[fid]
        path = flow_path(s.src, s.dst)
        done, total = n.progress(fid, n.now_us)
        if any(n.link_down(link) for link in path) or done == total:
            assert n.rate(fid) == 0.0
            continue
        if s.cap is not None and n.rate(fid) >= s.cap * (1 - 1e-9):
            assert n.rate(fid) <= s.cap * (1 + 1e-9)
            continue
        assert any(
            saturated(link) and share[fid] >= max(share[g] for g in on_link[link]) * (1 - 1e-9)
            for link in path
        ), f"flow {fid} neither capped nor max-min bottlenecked"


@settings(max_examples=examples(40), deadline=None)
@given(worlds())
def test_prop_capacity_and_max_min(
    world: tuple[FluidNetwork, list[FlowSpec], list[tuple[str, str]]],
) -> None:
    n, specs, cuts = world
    by_id = {s.flow_id: s for s in specs}
    start_all(n, specs)
    check_rates(n, by_id)
    for a, b in cuts:
        n.set_pair_down(a, b, True, now_us=0)
        check_rates(n, by_id)
    # ... and after every completion, as the survivors re-share.
    for a, b in cuts:
        n.set_pair_down(a, b, False, now_us=0)
    while (t := n.next_completion_us()) is not None:
        n.advance(t)
        check_rates(n, by_id)


@settings(max_examples=examples(30), deadline=None)
@given(worlds(), st.data())
def test_prop_bytes_conserved(
    world: tuple[FluidNetwork, list[FlowSpec], list[tuple[str, str]]], data: st.DataObject
) -> None:
    """Integrating the reported rates over time gives exactly each flow's bytes."""
    n, specs, cuts = world
    start_all(n, specs)
    # Faults and cancels at random instants, interleaved with completions.
    horizon = 10**7
    # (time, kind, flow id for "cancel", pair for "cut"/"heal")
    ops: list[tuple[int, str, int, tuple[str, str]]] = []
    for pair in cuts:
        t0 = data.draw(st.integers(0, horizon))
        t1 = data.draw(st.integers(t0, horizon))
        ops += [(t0, "cut", -1, pair), (t1, "heal", -1, pair)]
    for s in data.draw(st.lists(st.sampled_from(specs), max_size=2, unique=True)):
        ops.append((data.draw(st.integers(0, horizon)), "cancel", s.flow_id, ("", "")))
    ops.sort()

    moved = {s.flow_id: 0.0 for s in specs}
    size = {s.flow_id: s.nbytes for s in specs}
    now = 0

    def move_to(t: int) -> None:
        nonlocal now
        for fid in n.active():
            moved[fid] += n.rate(fid) * (t - now) / S
        now = t

    def check_done(fid: int, rate: float) -> None:
        # Done at the first whole microsecond after the bytes are through.
        slack = rate / S + 1e-9 * size[fid] + 1e-6
        assert size[fid] - 1e-9 * size[fid] - 1e-6 <= moved[fid] <= size[fid] + slack

    while True:
        t_done = n.next_completion_us()
        t_op = ops[0][0] if ops else None
        if t_done is None and t_op is None:
            break
        if t_op is None or (t_done is not None and t_done <= t_op):
            assert t_done is not None
            rates = {fid: n.rate(fid) for fid in n.active()}
            move_to(t_done)
            for fid in n.advance(t_done):
                check_done(fid, rates[fid])
            continue
        t, kind, fid, (a, b) = ops.pop(0)
        move_to(t)
        if kind == "cancel":
            if fid in n.active():
                got = n.cancel(fid, t)
                assert abs(got - moved[fid]) <= 1 + 1e-9 * size[fid]
                del moved[fid]
        else:
            n.set_pair_down(a, b, kind == "cut", t)
        for fid in n.active():
            assert n.progress(fid, t)[0] == pytest.approx(moved[fid], abs=1 + 1e-9 * size[fid])
    assert n.active() == []


@settings(max_examples=examples(30), deadline=None)
@given(worlds(), st.randoms(use_true_random=False))
def test_prop_start_order_does_not_matter(
    world: tuple[FluidNetwork, list[FlowSpec], list[tuple[str, str]]], rnd: random.Random
) -> None:
    n1, specs, _ = world
    n2 = copy.deepcopy(n1)
    shuffled = list(specs)
    rnd.shuffle(shuffled)
    start_all(n1, specs, now_us=3)
    start_all(n2, shuffled, now_us=3)
    assert [n1.rate(f) for f in n1.active()] == [n2.rate(f) for f in n2.active()]
    assert n1.next_completion_us() == n2.next_completion_us()
    assert run_to_end(n1) == run_to_end(n2)


@settings(max_examples=examples(30), deadline=None)
@given(worlds(), st.integers(0, 10**13))
def test_prop_one_big_advance_equals_stepping(
    world: tuple[FluidNetwork, list[FlowSpec], list[tuple[str, str]]], t_end: int
) -> None:
    """Advancing past several completions at once equals advancing at each one."""
    stepped, specs, _ = world
    start_all(stepped, specs)
    jumped = copy.deepcopy(stepped)
    finished: list[int] = []
    while (t := stepped.next_completion_us()) is not None and t <= t_end:
        finished += stepped.advance(t)
    stepped.advance(t_end)
    assert jumped.advance(t_end) == sorted(finished)
    assert jumped.active() == stepped.active()
    for fid in jumped.active():
        assert jumped.progress(fid, t_end) == stepped.progress(fid, t_end)
        assert jumped.rate(fid) == stepped.rate(fid)
    assert jumped.next_completion_us() == stepped.next_completion_us()
