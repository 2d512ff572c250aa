"""A known bug, kept here as its reproducer until it is fixed (found 2026-11-27, not yet fixed).

explore found it (`tiresias-philly`, search seed 46, shrunk to two faults): the CM
leader of dc/c0 paused from 23m08s for 13m32s, then the scheduler's leader paused
from 36m42s for 28 s (within its lease: no new epoch). Back, the scheduler's
first decision raised `ComponentBug: dc/dc0/fd0/r0/m1: a start counts on 4 GPUs
nobody frees` (`actors/cluster/jobs.py`, `claims_for`): the policy's view and
the scheduler's claims disagree about that machine's GPUs. It crashed at every
restart from then on (1,001 times), and philly-0037 and philly-0039 stayed
RUNNING with nothing running (`no-lost-workload`). It happens on the scheduler
as it was before this session's fixes too.

Strict: once the bug is fixed this test fails, and should become a plain one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.builtin import raw_builtin, run_raw


@pytest.mark.xfail(strict=True, reason="known bug: the scheduler's claims after a CM pause")
def test_the_scheduler_survives_a_long_cm_pause_then_a_short_pause_of_its_own(
    tmp_path: Path,
) -> None:
    raw = raw_builtin("tiresias-philly")
    raw["system"]["policy"] = "tiresias-las"
    raw["invariants"]["stop_on_violation"] = True
    raw["duration"] = "1h"  # the crashes begin at 37m10s
    raw["faults"] = [
        {
            "action": "pause",
            "at": "23m7.995902s",
            "target": "leader of cm/dc/c0",
            "duration": "13m31.833698s",
        },
        {
            "action": "pause",
            "at": "36m42.373974s",
            "target": "leader of rms/dc",
            "duration": "28.144443s",
        },
    ]
    result, events = run_raw(raw, tmp_path / "run.db")
    assert [e for e in events if e.kind == "actor-error"] == []
    assert result.status == "ok"
