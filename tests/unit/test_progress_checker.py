"""The progress checker (invariant 10) on hand-written traces.

Times and progress in minutes. J starts at 0 from 0; its agent saves 20 min
of work at 22 min (2 min of setup). Each rule is shown broken once and the
honest history is shown clean.
"""

from __future__ import annotations

from typing import Any

from actors.checks.progress import ProgressChecker
from emulator.trace import TraceEvent
from emulator.units import MIN

FENCE: dict[str, Any] = {"role": "cm/r/c1", "holder": "cm/r/c1/0", "epoch": 1}


class Story:
    def __init__(self) -> None:
        self.checker = ProgressChecker()
        self.seq = 0
        self.found: list[str] = []

    def _feed(self, t_min: float, kind: str, type_: str, payload: Any) -> Story:
        self.seq += 1
        event = TraceEvent(self.seq, round(t_min * MIN), kind, "x", "", type_, payload)
        self.found += self.checker.observe(event)
        return self

    def submit(self, work_min: float = 120) -> Story:
        spec = {"id": "w", "jobs": [{"name": "j", "work_us": round(work_min * MIN)}]}
        return self._feed(0, "store", "queue.submit", [[spec, 0, 0], True])

    def start(self, t_min: float, attempt: int, from_min: float) -> Story:
        args = [FENCE, 0, "w", "j", "r/c1", 5, [["m", 8]], []]
        return self._feed(t_min, "store", "fleet.start", [args, [attempt, round(from_min * MIN)]])

    def save(self, t_min: float, attempt: int, progress_min: float, ok: bool = True) -> Story:
        args = [round(t_min * MIN), "w", "j", attempt, round(progress_min * MIN)]
        return self._feed(t_min, "store", "fleet.checkpoint", [args, ok])

    def stopped(
        self, t_min: float, attempt: int, progress_min: float, reliable: bool = True
    ) -> Story:
        msg: dict[str, Any] = {
            "type": "AgentStopped",
            "workload_id": "w",
            "job": "j",
            "attempt": attempt,
            "progress_us": round(progress_min * MIN),
        }
        if reliable:
            msg = {"type": "Reliable", "key": "k", "msg": msg}
        return self._feed(t_min, "deliver", "AgentStopped", {"msg": msg})

    def plan(self, t_min: float, slowdown: float, mode: str = "static") -> Story:
        msg = {
            "type": "ExecutePlan",
            "workload_id": "w",
            "job": {"name": "j", "work_us": 120 * MIN},
            "pace": {"slowdown": slowdown, "mode": mode, "restore_us": 0, "checkpoint_us": 0},
        }
        return self._feed(t_min, "deliver", "ExecutePlan", {"msg": msg})


def test_an_honest_history_with_a_restart_is_clean() -> None:
    s = Story().submit().start(0, 1, 0).save(22, 1, 20).save(42, 1, 40)
    # Machine lost at 50 min: 8 min of work lost, the restart resumes from 40.
    s.start(50, 2, 40).save(72, 2, 60).stopped(80, 2, 60).save(81, 1, 45, ok=False)
    s.start(90, 3, 60).save(150, 3, 120)  # finished: the last save holds all the work
    assert s.found == []


def test_an_attempt_that_starts_from_other_than_the_last_checkpoint_is_caught() -> None:
    s = Story().submit().start(0, 1, 0).save(22, 1, 20).start(30, 2, 0)
    assert s.found == [
        "w/j attempt 2 starts from 0.000ms of progress but its last checkpoint saved 20m00.000s"
    ]


def test_an_agent_running_from_before_its_checkpoint_is_caught_once() -> None:
    # Attempt 2 starts from 40 min but its agent counts from 0: its saves are
    # refused by the store, which still shows where it thinks it is.
    s = Story().submit().start(0, 1, 0).save(22, 1, 20).save(42, 1, 40).start(50, 2, 40)
    s.save(72, 2, 20, ok=False).save(92, 2, 40, ok=True)
    assert s.found == [
        "w/j attempt 2 saves 20m00.000s of progress but started from its checkpoint at "
        "40m00.000s: it runs from before its last checkpoint"
    ]


def test_an_agent_ahead_of_time_is_caught() -> None:
    # From 20 min of work at 30 min, 70 min of work cannot be done by 72 min.
    s = Story().submit().start(0, 1, 0).save(22, 1, 20).start(30, 2, 20).save(72, 2, 70)
    assert s.found == [
        "w/j attempt 2 saves 1h10m00.000s of progress 42m00.000s after it started from "
        "20m00.000s: that much work takes at least 50m00.000s"
    ]


def test_an_agent_that_counts_its_running_time_twice_is_caught() -> None:
    # 20 min at 22 min, then 20 + 40 = 60 min at 42 min (the time since it
    # started running counted again on top of the first save).
    s = Story().submit().start(0, 1, 0).save(22, 1, 20).save(42, 1, 60)
    assert len(s.found) == 1 and "takes at least 1h00m00.000s" in s.found[0]


def test_a_committed_checkpoint_may_not_go_back_nor_come_from_an_old_attempt() -> None:
    s = Story().submit().start(0, 1, 0).save(22, 1, 20).save(30, 1, 10)
    # (The store refuses this write; a broken one that accepts it is caught.)
    assert s.found == ["w/j: committed checkpoint went back from 20m00.000s to 10m00.000s"]
    s = Story().submit().start(0, 1, 0).save(22, 1, 20).start(30, 2, 20).save(31, 1, 21)
    assert s.found == ["w/j: attempt 1 saved a checkpoint while attempt 2 is the current one"]


def test_a_stopped_agent_reports_what_it_saved_once() -> None:
    s = Story().submit().start(0, 1, 0).save(22, 1, 20).start(30, 2, 20)
    s.stopped(40, 2, 10).stopped(41, 2, 10)  # resent: judged once
    assert s.found == [
        "w/j attempt 2 stopped reporting 10m00.000s of progress, less than the 20m00.000s "
        "it started from"
    ]
    s = Story().submit().start(0, 1, 0).save(22, 1, 20).start(30, 2, 20)
    s.stopped(40, 2, 35, reliable=False)
    assert s.found == [
        "w/j attempt 2 stopped reporting 35m00.000s of progress, but only 20m00.000s was "
        "ever saved: it started beyond its checkpoint"
    ]


def test_a_slowed_down_placement_bounds_progress_by_its_pace() -> None:
    # Twice as slow (a cross-rack placement): 20 min of running do 10 min of work.
    ok = Story().plan(0, 2.0).start(0, 1, 0).save(22, 1, 10)
    assert ok.found == []
    fast = Story().plan(0, 2.0).start(0, 1, 0).save(22, 1, 15)
    assert len(fast.found) == 1 and "takes at least 30m00.000s" in fast.found[0]
    # A later plan with a better placement: the fastest pace seen is the bound.
    assert Story().plan(0, 2.0).plan(0, 1.0).start(0, 1, 0).save(22, 1, 15).found == []


def _end(s: Story, t_min: float, state: str) -> Story:
    return s._feed(t_min, "store", "queue.transition", [["w", ["RUNNING"], state, 0], True])


def test_an_ended_workload_is_forgotten_and_late_reports_of_it_are_not_misjudged() -> None:
    for state in ("DONE", "FAILED", "WITHDRAWN"):
        s = _end(Story().submit().start(0, 1, 0).save(22, 1, 20), 30, state)
        assert s.checker.jobs == {} and s.checker.names == {}
        # A checkpoint written as the last attempt ended, and its stop report, come later.
        s.save(31, 1, 21).stopped(32, 1, 21)
        assert s.found == [] and s.checker.jobs == {}


def test_a_workload_moved_between_live_states_is_still_judged() -> None:
    s = _end(Story().submit().start(0, 1, 0).save(22, 1, 20), 25, "PENDING")
    s.start(30, 2, 0)  # not from its checkpoint: caught as before
    assert len(s.found) == 1 and "last checkpoint saved 20m" in s.found[0]
