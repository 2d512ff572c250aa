"""A job's end reported so late that the job runs again: the RMS must not end the gang for it.

explore found it (`rms-failover`, search seed 9, shrunk to three faults on us-east's RMS
leaders: a crash at 46m15s, a pause from 46m40s, a crash at 51m16s). w000040 was preempted
while no RMS led; its evaluator's `JobEnded` (from us-east/c1) was resent until some RMS
led. Meanwhile w000040 was queued again, won a new auction and started whole (its evaluator
now in us-east/c0). The old reports then arrived (the preprocess job's too): the RMS took
the first for the new evaluator's end, stopped the rest of the gang and gave the workload
back while the evaluator still ran (`gang`). An RMS now asks the store whether a job
reported ended (other than done) runs again, and if so drops the report (`rms.stale-end`).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.builtin import raw_builtin, run_raw
from tests.support.trace import decisions, store_events


def test_a_late_end_report_of_an_earlier_attempt_leaves_the_running_gang_alone(
    tmp_path: Path,
) -> None:
    raw = raw_builtin("rms-failover")
    leader = "leader of rms/us-east"
    raw["faults"] = [
        {"action": "crash", "at": "46m15s", "target": leader, "restart_after": "5m"},
        {"action": "pause", "at": "46m40.33979s", "target": leader, "duration": "9m59.346178s"},
        {"action": "crash", "at": "51m16.272566s", "target": leader, "restart_after": "51.835186s"},
    ]
    result, events = run_raw(raw, tmp_path / "run.db")
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
