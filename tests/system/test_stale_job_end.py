"""A job's end reported so late that the job runs again: the RMS must not end the gang for it.

explore found it (`rms-failover`, search seed 9, shrunk to three faults on us-east's RMS
leaders: a crash at 46m15s, a pause from 46m40s, a crash at 51m16s). w000040 was preempted
while no RMS led; its evaluator's `JobEnded` (from us-east/c1) was resent until some RMS
led. Meanwhile w000040 was queued again, won a new auction and started whole (its evaluator
now in us-east/c0). The old reports then arrived (the preprocess job's too): the RMS took
the first for the new evaluator's end, stopped the rest of the gang and gave the workload
back while the evaluator still ran (`gang`). An RMS now asks the store whether a job
reported ended (other than done) runs again, and if so drops the report (`rms.stale-end`).

The store cannot tell while the new attempt has not started yet (search seed 12, shrunk to
two crashes of us-east's RMS leader and a 7m40s pause of us-east/c0's CM leader from
48m09s): w000040 was dispatched again at 48m10s (auction 60, its evaluator planned on the
paused c0) when its evaluator's old end (auction 43, from c1) came at 48m25s. The RMS
counted the planned evaluator ended; once c0's new leader started the gang, the RMS stopped
all but the evaluator and gave the workload back while it ran (`gang`). A `JobEnded` now
names the auction its attempt served, and an RMS drops one of another dispatch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from emulator.run.coverage import reached
from tests.support.builtin import Run, raw_builtin, run_raw
from tests.support.trace import decision_events, decisions, store_events

LEADER = "leader of rms/us-east"


def run_failover(tmp_path: Path, *faults: dict[str, Any]) -> Run:
    """rms-failover with its leader crashed at 46m15s for 5 min, then `faults` (both stories)."""
    raw = raw_builtin("rms-failover")
    first = {"action": "crash", "at": "46m15s", "target": LEADER, "restart_after": "5m"}
    raw["faults"] = [first, *faults]
    return run_raw(raw, tmp_path / "run.db")


def test_a_late_end_report_of_an_earlier_attempt_leaves_the_running_gang_alone(
    tmp_path: Path,
) -> None:
    result, events = run_failover(
        tmp_path,
        {"action": "pause", "at": "46m40.33979s", "target": LEADER, "duration": "9m59.346178s"},
        {"action": "crash", "at": "51m16.272566s", "target": LEADER, "restart_after": "51.835186s"},
    )
    assert result.status == "ok" and result.violations == []
    # The story still happens: w000040 dispatched again and running whole...
    running = [
        e.t_us
        for e in store_events(events, "queue.transition", "w000040")
        if e.result and e.to_state == "RUNNING"
    ]
    assert len(running) >= 2
    # ...when its evaluator's old end report comes, and is dropped.
    stale = [(d["workload"], d["job"]) for d in decisions(events, "rms.stale-end")]
    assert ("w000040", "evaluator") in stale and {w for w, _ in stale} == {"w000040"}
    stale_at = next(e.t_us for e in events if e.kind == "decision" and e.type == "rms.stale-end")
    assert stale_at > running[-1]
    # Nothing of the running gang was stopped for it.
    requeued = [
        e.t_us
        for e in store_events(events, "queue.transition", "w000040")
        if e.result and e.to_state == "PENDING" and e.t_us >= stale_at
    ]
    ends = [
        e.t_us
        for e in store_events(events, "fleet.release", "w000040")
        if e.result and e.t_us >= stale_at
    ]
    assert requeued == [] or min(requeued) > max(ends, default=0)


def test_a_late_end_report_during_a_new_dispatch_leaves_the_planned_job_alone(
    tmp_path: Path,
) -> None:
    result, events = run_failover(
        tmp_path,
        {"action": "crash", "at": "46m40.915492s", "target": LEADER, "restart_after": "85.9s"},
        {
            "action": "pause",
            "at": "48m9.443158s",
            "target": "leader of cm/us-east/c0",
            "duration": "7m40.487241s",
        },
    )
    assert result.status == "ok" and result.violations == []
    awarded = [e for e in store_events(events, "queue.award", "w000040") if e.result]
    awards = [e.t_us for e in awarded]
    stale = decision_events(events, "rms.stale-end")
    # The end report of the attempt before the new dispatch (auction 43 when found).
    earlier = awarded[-2].auction_id
    assert [(e.workload, e.job, e.auction) for e in stale] == [("w000040", "evaluator", earlier)]
    # It came while the new dispatch waited for the paused CM to start the evaluator...
    starts = [
        e.t_us
        for e in store_events(events, "fleet.start", "w000040")
        if e.t_us > awards[-1] and e.job_name == "evaluator"
    ]
    assert awards[-1] < stale[0].t_us < min(starts)
    # ...and the gang then ran whole: nothing of it stopped until the run's end.
    assert {e.job_name for e in store_events(events, "fleet.start", "w000040")} >= {
        "trainer",
        "preprocess",
        "evaluator",
    }
    released = [
        e for e in store_events(events, "fleet.release", "w000040") if e.t_us > stale[0].t_us
    ]
    assert all(e.state == "DONE" for e in released)
    assert asyncio.run(reached(result.out))["stale-end-dropped"] == 1
