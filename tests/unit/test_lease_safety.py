"""The lease-safety checker over short histories of store events, one per row.

Each history is what the store committed (grants and renewals with their
expiry, releases, fenced effects); the checker must flag exactly the rows
marked, whatever the actors believed.
"""

from __future__ import annotations

from typing import Any

import pytest

from emulator.invariants import LeaseSafety
from emulator.trace import TraceEvent

R = "cm/east/c0"
TTL = 30


def acquire(t: int, holder: str, epoch: int) -> tuple[str, list[Any], Any]:
    lease = {"role": R, "holder": holder, "epoch": epoch, "expires_at_us": t + TTL}
    return "lease.acquire", [R, holder, t, TTL], lease


def release(t: int, holder: str, epoch: int) -> tuple[str, list[Any], Any]:
    return "lease.release", [R, holder, epoch, t], True


def effect(t: int, holder: str, epoch: int) -> tuple[str, list[Any], Any]:
    return "lease.effect", [R, holder, epoch, t, b""], True


def judge(history: list[tuple[str, list[Any], Any]]) -> list[str]:
    checker, out = LeaseSafety(), []
    for seq, (type_, args, result) in enumerate(history):
        t = args[2] if type_ == "lease.acquire" else args[3]
        event = TraceEvent(seq, t, "store", args[1], "", type_, [args, result])
        out += checker.observe(event)
    return out


CASES = [
    ("renewed before it expires", [acquire(0, "a", 1), acquire(29, "a", 1)], None),
    ("a new epoch at the expiry", [acquire(0, "a", 1), acquire(30, "a", 2)], None),
    ("another holder's at the expiry", [acquire(0, "a", 1), acquire(30, "b", 2)], None),
    ("renewed at the instant it expires", [acquire(0, "a", 1), acquire(30, "a", 1)], "renewed"),
    ("renewed after it expired", [acquire(0, "a", 1), acquire(45, "a", 1)], "renewed"),
    (
        "renewed after its release",
        [acquire(0, "a", 1), release(5, "a", 1), acquire(6, "a", 1)],
        "renewed",
    ),
    ("two holders of one epoch", [acquire(0, "a", 1), acquire(30, "b", 1)], "two leaders"),
    ("an effect inside the lease", [acquire(0, "a", 1), effect(29, "a", 1)], None),
    ("an effect at its expiry", [acquire(0, "a", 1), effect(30, "a", 1)], "after its lease"),
    (
        "a stale epoch's effect",
        [acquire(0, "a", 1), acquire(30, "b", 2), effect(31, "a", 1)],
        "stale effect",
    ),
]


@pytest.mark.parametrize(("history", "flagged"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_lease_safety_flags_exactly_the_broken_histories(
    history: list[tuple[str, list[Any], Any]], flagged: str | None
) -> None:
    found = judge(history)
    if flagged is None:
        assert found == []
    else:
        assert len(found) == 1 and flagged in found[0], found
