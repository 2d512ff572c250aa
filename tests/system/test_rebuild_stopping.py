"""A job preempted before its start was heard, across a failover of its scheduler.

explore found it (`tiresias-philly`, tiresias-las, search seed 46 after d613338): with the CM
of dc/c0 down, the policy preempted philly-0005 while its dispatch waited, and
other dispatches counted on its GPUs. The scheduler's leader then crashed; its
successor rebuilt philly-0005 as *dispatching* again, so the policy saw its GPUs
held by it and by the starts that counted on them, preempted it once more, and
the next decision raised `ComponentBug: ... a start counts on 4 GPUs nobody
frees` at every restart (rms/dc/0 crashed 1,001 times). A new leader now keeps
such a job stopping, orders its stop again (the order died with the last
leader's resends), and ends it at its dispatch timeout if it never started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.builtin import raw_builtin, run_raw
from tests.support.trace import decisions


def philly(duration: str, faults: list[dict[str, Any]]) -> dict[str, Any]:
    raw = raw_builtin("tiresias-philly")
    raw["system"]["policy"] = "tiresias-las"
    raw["invariants"]["stop_on_violation"] = True
    raw["duration"] = duration
    raw["faults"] = faults
    return raw


def test_the_found_schedule_runs_without_a_crash(tmp_path: Path) -> None:
    raw = philly(
        "30m",  # the crashes began at 24m41s
        [
            {
                "action": "pause",
                "at": "4m47.719889s",
                "target": "leader of rms/dc",
                "duration": "6m26.520024s",
            },
            {
                "action": "crash",
                "at": "11m14.592269s",
                "target": "leader of rms/dc",
                "restart_after": "7m33.142281s",
            },
            {
                "action": "crash",
                "at": "13m20.211358s",
                "target": "leader of cm/dc/c0",
                "restart_after": "20m11.853159s",
            },
            {
                "action": "crash",
                "at": "24m39.514947s",
                "target": "leader of rms/dc",
                "restart_after": "2.045659s",
            },
        ],
    )
    result, events = run_raw(raw, tmp_path / "run.db")
    assert [e for e in events if e.kind == "actor-error"] == []
    assert result.status == "ok" and result.violations == []


def test_a_stop_whose_start_never_came_ends_at_the_dispatch_timeout(tmp_path: Path) -> None:
    # The CM is down from 23m08s; philly-0014 is preempted while its dispatch
    # waits for it, then the scheduler's leader crashes, its resends (the plan
    # and the stop) with it: no CM will ever report on that dispatch.
    raw = philly(
        "1h",
        [
            {
                "action": "crash",
                "at": "23m7.995902s",
                "target": "leader of cm/dc/c0",
                "restart_after": "50m",
            },
            {
                "action": "crash",
                "at": "36m42s",
                "target": "leader of rms/dc",
                "restart_after": "2s",
            },
        ],
    )
    result, events = run_raw(raw, tmp_path / "run.db")
    assert decisions(events, "cluster.stop-unstarted") == [{"job": "philly-0014"}]
    assert [e for e in events if e.kind == "actor-error"] == []
    assert result.status == "ok" and result.violations == []
