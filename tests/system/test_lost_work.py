"""no-lost-workload: a workload ends DONE only when every one of its jobs finished its work.

A gang that loses a job (preempted, failed) must stop as a whole and go back
to the queue. An RMS that takes any job's end for a finished job lets the
rest of the gang run on, and once they finish it reports the workload done:
the queue then says DONE for a workload whose lost job's work was never
done. The checker sees it in the store's events (the job released STOPPED
since the workload's last award, then the workload's move to DONE).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.checks.lost_workload import LostWorkloadChecker
from emulator.invariants import check_events
from emulator.liveness import judge_liveness
from emulator.trace import TraceEvent
from tests.support.builtin import raw_builtin, run_raw
from tests.support.dsl import run
from tests.support.stories import preempted_gang
from tests.support.trace import store_call, store_events


def test_the_real_rms_stops_the_whole_gang_and_breaks_no_invariant(tmp_path: Path) -> None:
    # The control for the `no-lost-workload` row of tests/system/test_invariant_families.py,
    # where `LossBlindRMS` (tests/support/broken.py) acts in this story: MAST's RMS
    # stops L's trainer with its preempted preprocess job, and L goes back to the queue.
    result, events = run(preempted_gang("mast"), tmp_path)
    assert result.violations == []
    released = [(e.job_name, e.state) for e in store_events(events, "fleet.release") if e.result]
    assert released[:2] == [("prep", "STOPPED"), ("trainer", "STOPPED")]
    moves = [e.to_state for e in store_events(events, "queue.transition", "L") if e.result]
    assert moves[:2] == ["RUNNING", "PENDING"] and "DONE" not in moves


def _spec(wid: str, *jobs: str) -> dict[str, Any]:
    return {"id": wid, "tenant": "t", "jobs": [{"name": j} for j in jobs]}


FENCE: dict[str, Any] = {}
W = ("W", "trainer", "prep")
AWARD = store_call(1, "queue.award", FENCE, 1, "W", 7, "east")
RUNNING = store_call(3, "queue.transition", "W", ["DISPATCHING"], "RUNNING", 3)
DONE = store_call(9, "queue.transition", "W", ["DISPATCHING", "RUNNING"], "DONE", 9)


def _start(t_us: int, name: str) -> TraceEvent:
    return store_call(t_us, "fleet.start", FENCE, t_us, "W", name, "c0", 5, [], [], result=[1, 0])


def _release(t_us: int, name: str, state: str, *, result: bool = True) -> TraceEvent:
    return store_call(t_us, "fleet.release", FENCE, t_us, "W", name, state, None, result=result)


@pytest.mark.parametrize(
    ("story", "says"),
    [
        # Both jobs finished: DONE is right.
        ([_release(5, "trainer", "DONE"), _release(6, "prep", "DONE")], None),
        # prep was stopped (preempted) and never ran again: its work is lost.
        ([_release(5, "prep", "STOPPED"), _release(6, "trainer", "DONE")], "prep: STOPPED"),
        # prep never ended at all in this attempt.
        ([_release(6, "trainer", "DONE")], "prep: never released"),
        # A release the store refused changes nothing.
        (
            [
                _release(5, "prep", "DONE"),
                _release(6, "prep", "STOPPED", result=False),
                _release(7, "trainer", "DONE"),
            ],
            None,
        ),
        # prep finished in an earlier attempt; a new award means it must finish again.
        ([_release(0, "prep", "DONE"), _release(6, "trainer", "DONE")], "prep: never released"),
    ],
    ids=["all-done", "stopped", "never-ended", "refused-release", "earlier-attempt"],
)
def test_a_done_workload_needs_every_job_released_done_since_its_award(
    story: list[TraceEvent], says: str | None
) -> None:
    checker = LostWorkloadChecker()
    before = [e for e in story if e.t_us < 1]
    after = [e for e in story if e.t_us >= 1]
    events = [
        store_call(0, "queue.submit", _spec(*W), 5, 0),
        *before,
        AWARD,
        _start(2, "trainer"),
        _start(2, "prep"),
        RUNNING,
        *after,
        DONE,
    ]
    out = [message for e in events for message in checker.observe(e)]
    if says is None:
        assert out == []
    else:
        assert out == [f"W went DONE but not all its jobs finished their work ({says})"]


def test_a_job_end_a_crashed_cm_never_got_through_is_reported_by_the_next_leader(
    tmp_path: Path,
) -> None:
    # Found by `mastemu explore region-outage` (shrunk): while us-east is dark,
    # logs-adhoc and logs-train run in us-west and finish while every RMS of
    # us-west is paused; the CM's reports of their ends wait unacknowledged
    # until the CM leader crashes, and die with it. The RMS comes back in the
    # epoch after its own, so it keeps its memory and rebuilds nothing: the two
    # workloads stayed RUNNING for good. The next CM leader reports the ends.
    raw = raw_builtin("region-outage")
    raw["faults"] = [
        {"action": "down", "at": "30m", "node": "region us-east", "duration": "1h"},
        {
            "action": "pause",
            "at": "1h2m43.855073s",
            "target": "all of rms/us-west",
            "duration": "30m2s",
        },
        {
            "action": "crash",
            "at": "1h30m6.659611s",
            "target": "leader of cm/us-west/c0",
            "restart_after": "1m36.716166s",
        },
    ]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    reported = {
        (e.payload["workload"], e.payload["reason"])
        for e in events
        if e.kind == "decision" and e.type == "cm.end-reported"
    }
    assert {("logs-adhoc", "done"), ("logs-train", "done")} <= reported
    done = [e.to_state for e in store_events(events, "queue.transition", "logs-adhoc") if e.result]
    assert done[-1] == "DONE"


END_AT_2_H = TraceEvent(0, 7_200_000_000, "run", "", "", "end", "ok")


def _ended_at_10_s() -> list[TraceEvent]:
    """W awarded and running, its only job released STOPPED at 10 s."""
    return [
        store_call(0, "queue.submit", _spec("W", "trainer"), 5, 0),
        AWARD,
        _start(2, "trainer"),
        RUNNING,
        _release(10_000_000, "trainer", "STOPPED"),
    ]


def test_an_idle_running_workload_is_judged_at_the_history_end_not_its_last_read_event() -> None:
    # W runs, its only job ends at 10 s, and nothing the checker reads happens after:
    # lease renewals and the run's end come later. Judged at the end (2 h), W is lost.
    # (The tracer hands the checker only the types it reads, so the last event it
    # sees can be hours before the end: judged there, W would look in transit.)
    renewal = store_call(7_000_000_000, "lease.acquire", "rms/east", "rms/east/0", 0, 1)
    events = [*_ended_at_10_s(), renewal, END_AT_2_H]
    found = check_events(events, [LostWorkloadChecker()])
    assert [m for *_, m in found] == [
        "W is RUNNING but none of its jobs has held machines since 10000000 µs"
    ]
    assert check_events(events[:-2], [LostWorkloadChecker()]) == []  # the end right after


def test_an_idle_running_workload_gets_the_grace_after_the_last_fault_event_too() -> None:
    # As above, with the control plane paused until (near) the run's end: whoever
    # would hear W's job end is dark, so W's idleness is not judged until a grace
    # after the last fault event (explore's grid: a pause of all of gms for the
    # run's last 70 minutes flagged every workload whose jobs ended meanwhile).
    def judged(fault_at_us: int) -> list[str]:
        pause = TraceEvent(0, fault_at_us, "fault", "", "", "pause.start", {"actor": "gms/0"})
        events = [*_ended_at_10_s(), pause, END_AT_2_H]
        return [m for *_, m in check_events(events, [LostWorkloadChecker()])]

    assert judged(6_900_000_000) == []  # paused 5 minutes before the end
    assert judged(1_000_000_000) == [  # long healed: lost
        "W is RUNNING but none of its jobs has held machines since 10000000 µs"
    ]


def test_a_control_plane_restarting_after_the_run_end_is_not_judged(tmp_path: Path) -> None:
    # power-domain with its own fault replaced by a crash of us-east's RMSs at
    # 1h30m that restarts them 2h30m later: after the run's 3 h end. Nobody was
    # there to hear its workloads' jobs end; the crash's start event carries its
    # scheduled end, so neither no-lost-workload nor liveness judges the region.
    raw = raw_builtin("power-domain")
    at_us, restart_us = 5_400_000_000, 9_000_000_000
    crash = {"action": "crash", "at": "1h30m", "target": "all of rms/us-east"}
    raw["faults"] = [{**crash, "restart_after": "2h30m"}]
    result, events = run_raw(raw, tmp_path / "late.db")
    assert result.status == "ok" and result.violations == []
    starts = [e.payload for e in events if e.kind == "fault" and e.type == "crash.start"]
    assert starts and {s["until_us"] for s in starts} == {at_us + restart_us}
    (report,) = judge_liveness(events)
    assert report.final_heal_us == at_us + restart_us > report.end_us
    assert report.stuck == []
    # The same crash restarting inside the run: judged from its restart, and clean.
    raw["faults"] = [{**crash, "restart_after": "30m"}]
    result, events = run_raw(raw, tmp_path / "early.db")
    assert result.status == "ok" and result.violations == []
    (report,) = judge_liveness(events)
    assert report.final_heal_us == at_us + 1_800_000_000 < report.end_us
