"""A grid of dark spells on `region-outage`: every role group, alone or in pairs, out for a
grid of lengths from one instant, so components that fail together come back in every order.

The grid found what seeds and `explore` had not: us-east's RMSs back after
25 min, its CM after 60, and the RMS took the given-up attempt's live job
for its new dispatch's start (`rms-timeout-takes-old-attempt` in the bug
zoo). Lengths straddle the system's clocks: `region_lost_after` (10 min)
and the dispatch timeout (15 min), alone and one after the other.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tests.support.builtin import raw_builtin, run_raw

GROUPS = (
    "all of gms",
    "all of rms/us-east",
    "all of rms/us-west",
    "all of cm/us-east/c0",
    "all of cm/us-west/c0",
)
LENGTHS = ("10m", "25m", "45m", "70m")


def _schedules(action: str) -> list[list[dict[str, Any]]]:
    out = []
    for size in (1, 2):
        for groups in itertools.combinations(GROUPS, size):
            for lengths in itertools.product(LENGTHS, repeat=size):
                out.append([_fault(action, g, n) for g, n in zip(groups, lengths, strict=True)])
    return out


def _fault(action: str, target: str, length: str) -> dict[str, Any]:
    key = "duration" if action == "pause" else "restart_after"
    return {"action": action, "at": "20m", "target": target, key: length}


@pytest.mark.slow
@pytest.mark.parametrize("action", ["pause", "crash"])
def test_every_dark_spell_of_the_grid_ends_clean(tmp_path: Path, action: str) -> None:
    failed = []
    for i, faults in enumerate(_schedules(action)):
        raw = raw_builtin("region-outage")
        raw["faults"] = faults
        result, _ = run_raw(raw, tmp_path / f"{i}.db")
        if result.status != "ok" or result.violations or result.actor_errors:
            failed.append((faults, result.status, result.violations[:1]))
    assert failed == []


@pytest.mark.slow
def test_the_grid_catches_the_bug_it_found(tmp_path: Path) -> None:
    east = {"all of rms/us-east", "all of cm/us-east/c0"}
    pairs = [f for f in _schedules("pause") if {x["target"] for x in f} == east]
    caught = []
    for i, faults in enumerate(pairs):
        raw = raw_builtin("region-outage")
        raw["faults"], raw["bugs"] = faults, ["rms-timeout-takes-old-attempt"]
        result, _ = run_raw(raw, tmp_path / f"{i}.db")
        if result.violations:
            caught.append([x["duration"] for x in faults])
    # The CM out long enough to outlast the RMS's return and a dispatch timeout.
    assert ["25m", "70m"] in caught
