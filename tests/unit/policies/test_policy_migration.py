"""Migration policy: service order, deadline rates, the daily byte cap, per-link limits.

Units: GB = 1e9 bytes, MB/s = 1e6 bytes/s. With the default weight base 2,
a copy of priority p weighs 2 ** (7 - p): p0 128, p1 64, p3 16, p7 1.
"""

from __future__ import annotations

import random

import msgspec
import pytest

from actors.policies.mast.migration import (
    ActiveCopy,
    LinkCapacity,
    MigrationParams,
    MigrationSnapshot,
    RateSegment,
    account_progress,
    needed_rate_bytes_s,
    plan_copies,
    service_key,
)
from emulator.units import H, S

GB = 10**9
MB = 10**6
NOW = 10 * H


def copy(
    id: str,
    *,
    prio: int = 3,
    size: int = 100 * GB,
    done: int = 0,
    deadline: int | None = None,
    created: int = 0,
    src: str = "a",
    dst: str = "b",
) -> ActiveCopy:
    return ActiveCopy(
        id=id,
        table=f"t-{id}",
        src=src,
        dst=dst,
        size_bytes=size,
        bytes_done=done,
        priority=prio,
        soft_deadline_us=deadline,
        created_us=created,
    )


def link(src: str = "a", dst: str = "b", bytes_s: float = 100 * MB) -> LinkCapacity:
    return LinkCapacity(src=src, dst=dst, bytes_s=bytes_s)


def plan(copies, links=None, cap=None, moved=0, **params):
    snap = MigrationSnapshot(
        now_us=NOW,
        copies=tuple(copies),
        links=tuple(links or [link()]),
        daily_cap_bytes=cap,
        moved_today_bytes=moved,
    )
    return plan_copies(snap, MigrationParams(**params)).by_id()


def summary(decision):
    return {k: (d.reason, round(d.rate_cap_bytes_s / MB, 6)) for k, d in decision.items()}


# ---- service order ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("copies", "expected"),
    [
        # Strict priority between levels, whatever the deadline or age.
        ([copy("x", prio=3, deadline=NOW + H), copy("y", prio=1, created=9)], ["y", "x"]),
        # Same level: earliest deadline; a copy without a deadline goes last.
        (
            [copy("x"), copy("y", deadline=NOW + 2 * H), copy("z", deadline=NOW + H)],
            ["z", "y", "x"],
        ),
        # Same level, no deadlines: oldest first, then id.
        ([copy("x", created=5), copy("w", created=5), copy("v", created=7)], ["w", "x", "v"]),
    ],
)
def test_service_order(copies, expected):
    assert [c.id for c in sorted(copies, key=service_key)] == expected
    # The decision lists copies in the same order, whatever the input order.
    snap = MigrationSnapshot(now_us=NOW, copies=tuple(reversed(copies)), links=(link(),))
    assert [d.id for d in plan_copies(snap).copies] == expected


def test_per_link_limit_admits_the_most_urgent():
    copies = [copy("low", prio=5), copy("top", prio=0, created=50), copy("mid", prio=1)]
    got = plan(copies, copies_per_link_max=2)
    assert got["low"].reason == "link_busy" and not got["low"].admitted
    assert got["low"].rate_cap_bytes_s == 0.0 and got["low"].budget_bytes == 0
    # top (weight 128) and mid (64) share 100 MB/s: 66.67 and 33.33 MB/s.
    assert summary(got)["top"] == ("admitted", pytest.approx(100 * 128 / 192))
    assert summary(got)["mid"] == ("admitted", pytest.approx(100 * 64 / 192))


def test_per_link_limit_counts_each_direction_separately():
    copies = [
        copy("ab1", created=1),
        copy("ab2", created=2),
        copy("ab3", created=3),
        copy("ac", src="a", dst="c"),
        copy("ba", src="b", dst="a"),
    ]
    links = [link("a", "b"), link("a", "c", 40 * MB), link("b", "a", 10 * MB)]
    got = plan(copies, links, copies_per_link_max=2)
    assert {k: d.reason for k, d in got.items()} == {
        "ab1": "admitted",
        "ab2": "admitted",
        "ab3": "link_busy",
        "ac": "admitted",
        "ba": "admitted",
    }
    # Equal weights: a→b splits 100 MB/s in two; alone on their links the others get all.
    assert [got[k].rate_cap_bytes_s / MB for k in ("ab1", "ab2", "ac", "ba")] == [50, 50, 40, 10]


# ---- soft deadlines ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("copies", "expected"),
    [
        # A needs 180 GB / 3600 s = 50 MB/s. Both p3; A goes first (it has a
        # deadline): its share 100·1/2 = 50 is just what it needs; B gets the 50 left.
        (
            [copy("A", size=180 * GB, deadline=NOW + H), copy("B")],
            {"A": ("admitted", 50.0), "B": ("admitted", 50.0)},
        ),
        # A needs 288 GB / 3600 s = 80 MB/s, more than its share of 50: it gets 80.
        (
            [copy("A", size=288 * GB, deadline=NOW + H), copy("B")],
            {"A": ("admitted", 80.0), "B": ("admitted", 20.0)},
        ),
        # Remaining bytes count, not the size: 400 GB with 112 GB done is 288 GB left.
        (
            [copy("A", size=400 * GB, done=112 * GB, deadline=NOW + H), copy("B")],
            {"A": ("admitted", 80.0), "B": ("admitted", 20.0)},
        ),
        # A deadline copy needing little: 36 GB / 3600 s = 10 MB/s < its share.
        # B (p1, weight 64) first: 100·64/(64+16) = 80; A gets the 20 left (≥ 10).
        (
            [copy("A", size=36 * GB, deadline=NOW + H), copy("B", prio=1)],
            {"A": ("admitted", 20.0), "B": ("admitted", 80.0)},
        ),
        # Higher-priority data first: B (p1) still takes its 80, so A (p3, needs
        # 50) gets only the 20 left and is at risk.
        (
            [copy("A", size=180 * GB, deadline=NOW + H), copy("B", prio=1)],
            {"A": ("deadline_at_risk", 20.0), "B": ("admitted", 80.0)},
        ),
        # Both need 80 MB/s: the first in order gets 80, the second the 20 left.
        (
            [
                copy("A", prio=2, size=288 * GB, deadline=NOW + H),
                copy("B", prio=2, size=288 * GB, deadline=NOW + H, created=1),
            ],
            {"A": ("admitted", 80.0), "B": ("deadline_at_risk", 20.0)},
        ),
        # Past its deadline, A counts the 60 s minimum window: 6 GB / 60 s =
        # 100 MB/s, all of the link, as B (same level, no deadline) comes after it.
        (
            [copy("A", size=6 * GB, deadline=NOW - H), copy("B")],
            {"A": ("admitted", 100.0), "B": ("admitted", 0.0)},
        ),
        # ... but a late p5 copy (weight 4) cannot push aside a p0 copy (128):
        # B takes 100·128/132 = 96.97, A the 3.03 left.
        (
            [copy("A", prio=5, size=6 * GB, deadline=NOW - H), copy("B", prio=0)],
            {"A": ("deadline_at_risk", 100 * 4 / 132), "B": ("admitted", 100 * 128 / 132)},
        ),
    ],
)
def test_deadline_rates(copies, expected):
    got = summary(plan(copies))
    assert got == {k: (reason, pytest.approx(rate)) for k, (reason, rate) in expected.items()}


def test_needed_rate():
    c = copy("A", size=100 * GB, done=10 * GB, deadline=NOW + 2 * H)
    assert needed_rate_bytes_s(c, NOW) == 90 * GB / 7_200  # 12.5 MB/s
    assert needed_rate_bytes_s(copy("B"), NOW) == 0.0
    assert needed_rate_bytes_s(c, NOW + 2 * H) == 90 * GB / 60  # at the deadline: 60 s window


# ---- daily byte cap --------------------------------------------------------------------
def test_daily_cap_admits_in_order_and_does_not_backfill():
    # Budget 100 − 40 = 60 GB. c1 takes 20 (40 left), c2 30 (10 left), c3 wants 50
    # and gets the last 10 (paused at the cap), c4 (5 GB) would fit but waits.
    copies = [
        copy("c1", size=20 * GB, created=1),
        copy("c2", size=30 * GB, created=2),
        copy("c3", size=50 * GB, created=3),
        copy("c4", size=5 * GB, created=4),
    ]
    snap = MigrationSnapshot(
        now_us=NOW,
        copies=tuple(copies),
        links=(link(),),
        daily_cap_bytes=100 * GB,
        moved_today_bytes=40 * GB,
    )
    decision = plan_copies(snap, MigrationParams(copies_per_link_max=10))
    got = decision.by_id()
    assert {k: (d.reason, d.budget_bytes // GB) for k, d in got.items()} == {
        "c1": ("admitted", 20),
        "c2": ("admitted", 30),
        "c3": ("daily_cap_partial", 10),
        "c4": ("daily_cap", 0),
    }
    assert got["c3"].admitted and not got["c4"].admitted
    assert decision.budget_left_bytes == 0
    assert sum(d.budget_bytes for d in decision.copies) == 60 * GB


@pytest.mark.parametrize(
    ("cap", "moved", "reasons", "left"),
    [
        (None, 0, ("admitted", "admitted"), None),  # no cap: budgets are the remaining bytes
        (30 * GB, 10 * GB, ("admitted", "daily_cap"), 0),  # exactly fits: 20 = 30 − 10
        (30 * GB, 45 * GB, ("daily_cap", "daily_cap"), 0),  # over the cap already
        (100 * GB, 0, ("admitted", "admitted"), 60 * GB),  # 100 − 20 − 20
    ],
)
def test_daily_cap_edges(cap, moved, reasons, left):
    copies = (copy("x", size=20 * GB, created=1), copy("y", size=20 * GB, created=2))
    snap = MigrationSnapshot(
        now_us=NOW, copies=copies, links=(link(),), daily_cap_bytes=cap, moved_today_bytes=moved
    )
    decision = plan_copies(snap)
    assert tuple(d.reason for d in decision.copies) == reasons
    assert decision.budget_left_bytes == left


def test_waiting_copies_use_no_budget():
    # b1 waits for its link (limit 1) and c is finished or its link is down:
    # none of them takes budget, so "other" (a→c) still fits the 30 GB.
    copies = [
        copy("b0", size=20 * GB, created=0),
        copy("b1", size=20 * GB, created=1),
        copy("done", size=5 * GB, done=5 * GB, created=2),
        copy("down", size=5 * GB, src="a", dst="d", created=3),
        copy("other", size=10 * GB, src="a", dst="c", created=4),
    ]
    links = [link(), link("a", "c"), link("a", "d", 0.0)]
    got = plan(copies, links, cap=30 * GB, copies_per_link_max=1)
    assert {k: (d.reason, d.budget_bytes // GB) for k, d in got.items()} == {
        "b0": ("admitted", 20),
        "b1": ("link_busy", 0),
        "done": ("complete", 0),
        "down": ("link_down", 0),
        "other": ("admitted", 10),
    }


def test_copy_larger_than_the_cap_pauses_and_resumes_next_day():
    big = copy("big", size=50 * GB, done=5 * GB)
    # Day 1: budget 10 GB of its 45 GB left; at 100 MB/s it reaches the cap after 100 s.
    day1 = plan([big], cap=10 * GB)["big"]
    assert (day1.reason, day1.budget_bytes, day1.rate_cap_bytes_s) == (
        "daily_cap_partial",
        10 * GB,
        100 * MB,
    )
    ran = [RateSegment(start_us=NOW, end_us=NOW + 300 * S, rate_bytes_s=100 * MB)]
    big = account_progress(big, ran, budget_bytes=day1.budget_bytes)
    assert big.bytes_done == 15 * GB  # 5 + 10, not 5 + 30
    # Day 2: a fresh budget; it continues from 15 GB: 35 GB left fit in 40.
    day2 = plan([big], cap=40 * GB)["big"]
    assert (day2.reason, day2.budget_bytes) == ("admitted", 35 * GB)


# ---- progress accounting ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("done", "segments", "expected"),
    [
        # 400 MB done, then 2 s at 100 MB/s, paused 3 s, 1 s at 50 MB/s: 400 + 200 + 50.
        (400 * MB, [(0, 2, 100 * MB), (2, 5, 0.0), (5, 6, 50 * MB)], 650 * MB),
        # 950 MB done, 10 s at 100 MB/s could move 1 GB: stops at the size, 1,000 MB.
        (950 * MB, [(0, 10, 100 * MB)], 1_000 * MB),
        # Rates are integrated before flooring: 0.5 B/s for 1 s, twice, is 1 byte.
        (0, [(0, 1, 0.5), (1, 2, 0.5)], 1),
        # No history: nothing moves.
        (123, [], 123),
    ],
)
def test_account_progress(done, segments, expected):
    c = copy("A", size=1_000 * MB, done=done)
    history = [RateSegment(start_us=a * S, end_us=b * S, rate_bytes_s=r) for a, b, r in segments]
    assert account_progress(c, history).bytes_done == expected


@pytest.mark.parametrize(
    "segments",
    [[(0, 2, 1.0), (1, 3, 1.0)], [(2, 1, 1.0)], [(0, 1, -1.0)], [(0, 1, float("nan"))]],
)
def test_account_progress_rejects_bad_history(segments):
    history = [RateSegment(start_us=a * S, end_us=b * S, rate_bytes_s=r) for a, b, r in segments]
    with pytest.raises(ValueError, match=r"history\["):
        account_progress(copy("A"), history)


# ---- validation and determinism ---------------------------------------------------------------
def test_validation_names_what_is_wrong():
    with pytest.raises(ValueError, match=r"copies\.A: need 0 <= bytes_done"):
        copy("A", size=10, done=11)
    with pytest.raises(ValueError, match=r"copies\.A\.priority"):
        copy("A", prio=8)
    with pytest.raises(ValueError, match="no capacity given for link a->z"):
        plan([copy("A", dst="z")])
    with pytest.raises(ValueError, match="duplicate copy ids"):
        plan([copy("A"), copy("A")])
    with pytest.raises(msgspec.ValidationError, match="copies_per_link_max"):
        msgspec.convert({"copies_per_link_max": 0}, MigrationParams)
    with pytest.raises(msgspec.ValidationError, match="bogus"):
        msgspec.convert({"bogus": 1}, MigrationParams)


def _random_snapshot(rng: random.Random) -> MigrationSnapshot:
    regions = ["a", "b", "c"]
    pairs = [(s, d) for s in regions for d in regions if s != d]
    links = tuple(link(s, d, rng.choice([0.0, 10 * MB, 100 * MB])) for s, d in pairs)
    copies = []
    for i in range(rng.randint(0, 12)):
        src, dst = rng.choice(pairs)
        size = rng.randint(1, 100) * GB
        deadline = NOW + rng.randint(-H, 6 * H) if rng.random() < 0.5 else None
        copies.append(
            copy(
                f"c{i}",
                prio=rng.randint(0, 7),
                size=size,
                done=rng.randint(0, size),
                deadline=deadline,
                created=rng.randint(0, NOW),
                src=src,
                dst=dst,
            )
        )
    cap = rng.choice([None, 50 * GB, 300 * GB])
    return MigrationSnapshot(
        now_us=NOW,
        copies=tuple(copies),
        links=links,
        daily_cap_bytes=cap,
        moved_today_bytes=rng.randint(0, 100) * GB,
    )


def test_invariants_and_determinism_over_random_snapshots():
    rng = random.Random(20240501)
    params = MigrationParams(copies_per_link_max=2)
    for _ in range(300):
        snap = _random_snapshot(rng)
        decision = plan_copies(snap, params)
        # Same input in another order: the same decision, bit for bit.
        shuffled = list(snap.copies)
        rng.shuffle(shuffled)
        again = plan_copies(msgspec.structs.replace(snap, copies=tuple(shuffled)), params)
        assert msgspec.json.encode(again) == msgspec.json.encode(decision)
        orders = {c.id: c for c in snap.copies}
        capacity = {(lk.src, lk.dst): lk.bytes_s for lk in snap.links}
        per_link: dict[tuple[str, str], list] = {}
        for d in decision.copies:
            c = orders[d.id]
            assert d.budget_bytes <= c.size_bytes - c.bytes_done
            assert d.admitted == (d.rate_cap_bytes_s > 0 or d.budget_bytes > 0)
            if d.admitted:
                per_link.setdefault((c.src, c.dst), []).append(d)
        for key, ds in per_link.items():
            assert len(ds) <= 2
            assert sum(d.rate_cap_bytes_s for d in ds) == pytest.approx(capacity[key])
        if snap.daily_cap_bytes is not None:
            room = max(0, snap.daily_cap_bytes - snap.moved_today_bytes)
            assert sum(d.budget_bytes for d in decision.copies) <= room
