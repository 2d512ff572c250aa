"""explore's `expiry` arm: a pause of a lease's holder that ends as its lease does.

The scenario is the witness of `lease-renews-at-expiry` with its pause
removed: W runs in east, nothing fails. The bug (the store counts a lease
valid at the very instant it expires) shows only when a holder asks for its
lease at exactly that instant, which a pause of random length never ends on.
"""

from __future__ import annotations

import random
from pathlib import Path

from emulator.registry import load_plugins
from emulator.run.explore.arms import GROUPS
from emulator.run.explore.features import RENEWALS_MAX, Renewal, _Renewals
from emulator.trace import TraceEvent
from tests.support.explore import calm_witness, one_run_explorer, search

load_plugins()

BUG = "lease-renews-at-expiry"


def _granted(t: int, role: str, holder: str, ttl: int = 30) -> TraceEvent:
    lease = {"role": role, "holder": holder, "epoch": 1, "expires_at_us": t + ttl}
    return TraceEvent(0, t, "store", holder, "", "lease.acquire", [[role, holder, t, ttl], lease])


def test_runs_keep_each_renewal_with_its_holders_next_one() -> None:
    renewals = _Renewals()
    for event in [
        _granted(0, "a", "a/0"),
        _granted(0, "b", "b/0"),
        _granted(10, "a", "a/0"),
        TraceEvent(0, 15, "store", "a/1", "", "lease.acquire", [["a", "a/1", 15, 30], None]),
        _granted(30, "b", "b/1"),  # another holder: b/0's lease simply ran out
        _granted(40, "a", "a/0"),
    ]:
        renewals.step(event)
    assert sorted(renewals.finish(), key=lambda r: (r.role, r.at_us)) == [
        Renewal("a", "a/0", 0, 30, 10),
        Renewal("a", "a/0", 10, 40, 40),
        Renewal("a", "a/0", 40, 70, 70),
        Renewal("b", "b/0", 0, 30, 30),
        Renewal("b", "b/1", 30, 60, 60),
    ]


def test_a_long_run_keeps_a_bounded_sample_spread_over_it() -> None:
    renewals = _Renewals()
    for t in range(0, 10_000 * 10, 10):
        renewals.step(_granted(t, "a", "a/0"))
    kept = renewals.finish()
    assert RENEWALS_MAX <= len(kept) < 2 * RENEWALS_MAX
    starts = [r.at_us for r in kept]
    assert starts == sorted(starts)
    assert starts[0] < 10_000 and starts[-1] > 90_000  # from early to late, not the first ones


def test_an_expiry_pause_begins_after_the_renewal_and_ends_exactly_at_its_expiry(
    tmp_path: Path,
) -> None:
    space = one_run_explorer(calm_witness(tmp_path, BUG, []), tmp_path).space
    rng = random.Random(5)
    renewal = Renewal("cm/east/c0", "cm/east/c0/0", 50_000_000, 80_000_000, 60_000_000)
    starts = set()
    for _ in range(200):
        pause = space.until_expiry(renewal, rng)
        assert pause.target == "cm/east/c0/0"
        assert renewal.at_us < int(pause.at) < renewal.next_us
        assert int(pause.at) + int(pause.duration) == renewal.expires_us
        starts.add(int(pause.at))
    assert len(starts) > 150  # anywhere before the next renewal, not one instant
    assert "expiry" in GROUPS["aim"]


def test_the_expiry_arm_finds_the_lease_bug(tmp_path: Path) -> None:
    # Search seed 1 finds it at run 11, seeds 2 to 4 at runs 32, 13 and 14: each
    # with the arm's first run (the bug shows whenever a holder wakes at its expiry).
    result = search(calm_witness(tmp_path, BUG, [BUG]), tmp_path / "found", 1, 60, first=True)
    (failure,) = result.failures
    assert failure.signature[0] == "lease-safety"
    assert result.runs[-1].mutation == "expiry"
    assert failure.minimal is not None
    # What it needed, shrunk: that one pause, to the microsecond.
    assert 'action = "pause"' in Path(failure.minimal).read_text()


def test_without_the_bug_the_same_search_stays_clean(tmp_path: Path) -> None:
    # Search seed 8 pauses a holder to its expiry 3 times in 30 runs: each wakes the
    # holder at the boundary (a sometimes property), which takes a new epoch there.
    result = search(calm_witness(tmp_path, BUG, []), tmp_path / "clean", 8, 30)
    assert result.failures == []
    expiry = [i for i, r in enumerate(result.runs) if r.mutation == "expiry"]
    at_boundary = [i for i, t in enumerate(result.tallies) if t.get("leader-back-at-expiry")]
    assert len(expiry) == 3 and at_boundary == expiry
