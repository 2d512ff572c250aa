"""The auction checker judges who awarded: only the GMS leader whose lease is valid then.

Hand-written histories of store events: `acquire` grants (or renews) the
GMS lease, `release` ends it, `award` commits an award under a fence (its
epoch and holder) at an instant. The store's SQL fence refuses any other
award; an award that forgot the fence (`gms-award-forgets-epoch`) commits
anyway, and the checker must say so.
"""

from __future__ import annotations

from typing import Any

import pytest

from actors.checks.auction import AuctionChecker
from emulator.trace import TraceEvent
from emulator.units import S

TTL = 5 * S


def _events(history: list[tuple[Any, ...]]) -> list[TraceEvent]:
    out = []
    for seq, (what, t_s, *rest) in enumerate(history, 1):
        t = int(t_s * S)
        if what == "acquire":
            holder, epoch = rest
            args: list[Any] = ["gms", holder, t, TTL]
            result: Any = {
                "role": "gms",
                "holder": holder,
                "epoch": epoch,
                "expires_at_us": t + TTL,
            }
            out.append(TraceEvent(seq, t, "store", holder, "", "lease.acquire", [args, result]))
        elif what == "release":
            holder, epoch = rest
            args = ["gms", holder, epoch, t]
            out.append(TraceEvent(seq, t, "store", holder, "", "lease.release", [args, True]))
        else:
            holder, epoch, workload, committed = rest
            fence = {"role": "gms", "holder": holder, "epoch": epoch}
            submit = [[{"id": workload}, 1, 0], True]
            out.append(TraceEvent(seq, t, "store", "client", "", "queue.submit", submit))
            args = [fence, t, workload, seq, "east"]
            out.append(TraceEvent(seq, t, "store", holder, "", "queue.award", [args, committed]))
    return out


def judge(history: list[tuple[Any, ...]]) -> list[str]:
    checker = AuctionChecker()
    return [v for e in _events(history) for v in checker.observe(e)]


CASES = [
    # (name, history, workloads flagged)
    ("the leader in its lease", [("acquire", 0, "g0", 1), ("award", 3, "g0", 1, "A", True)], []),
    (
        "a renewed lease",
        [("acquire", 0, "g0", 1), ("acquire", 4, "g0", 1), ("award", 8, "g0", 1, "A", True)],
        [],
    ),
    (
        "at the instant it expires",
        [("acquire", 0, "g0", 1), ("award", 5, "g0", 1, "A", True)],
        ["A"],
    ),
    ("after it expired", [("acquire", 0, "g0", 1), ("award", 7, "g0", 1, "A", True)], ["A"]),
    (
        "a deposed leader",
        [("acquire", 0, "g0", 1), ("acquire", 6, "g1", 2), ("award", 7, "g0", 1, "A", True)],
        ["A"],
    ),
    (
        "the new leader",
        [("acquire", 0, "g0", 1), ("acquire", 6, "g1", 2), ("award", 7, "g1", 2, "A", True)],
        [],
    ),
    (
        "after releasing it",
        [("acquire", 0, "g0", 1), ("release", 2, "g0", 1), ("award", 3, "g0", 1, "A", True)],
        ["A"],
    ),
    ("with no lease ever", [("award", 1, "g0", 1, "A", True)], ["A"]),
    ("refused by the store", [("acquire", 0, "g0", 1), ("award", 7, "g0", 1, "A", False)], []),
]


@pytest.mark.parametrize(("history", "flagged"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_award_is_judged_by_the_lease_it_names(
    history: list[tuple[Any, ...]], flagged: list[str]
) -> None:
    found = judge(history)
    assert [v.split()[0] for v in found] == flagged
    for message in found:
        assert "awarded to east by g0 in epoch 1 of gms" in message
