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

import msgspec
import pytest

from actors.checks.protocol import LostWorkloadChecker
from actors.common.messages import JobEnded
from actors.mast.rms import RegionalScheduler
from emulator.trace import TraceEvent
from tests.system.test_mast_scenarios import MIN, H, job, run, scenario, workload


class LossBlindRMS(RegionalScheduler):
    """BROKEN: takes every job's end for a finished job, so a gang never stops as a whole."""

    def job_ended(self, msg: JobEnded) -> None:
        super().job_ended(msgspec.structs.replace(msg, reason="done"))


def preempted_gang(kind: str) -> dict[str, Any]:
    """L's trainer has an hour of work; its preprocess job holds every CPU
    machine of the region until H (priority 1) needs two of them at 10 min
    and preempts it, which must stop L's trainer too."""
    return scenario(
        [
            workload("L", "lo", 0, job(gpus=8), job("prep", cpus=4, work=5 * H)),
            workload("H", "hi", 10 * MIN, job("prep", cpus=2, work=20 * MIN)),
        ],
        regions=("east",),
        kind=kind,
        duration="2h",
    )


def test_the_real_rms_stops_the_whole_gang_and_breaks_no_invariant(tmp_path: Path) -> None:
    # The control for the `no-lost-workload` row of tests/system/test_invariant_families.py,
    # where `LossBlindRMS` acts in this story: MAST's RMS stops L's trainer
    # with its preempted preprocess job, and L goes back to the queue.
    result, events = run(preempted_gang("mast"), tmp_path)
    assert result.violations == []
    released = [e.payload[0][3:5] for e in events if e.type == "fleet.release" and e.payload[1]]
    assert released[:2] == [["prep", "STOPPED"], ["trainer", "STOPPED"]]
    moves = [
        e.payload[0][2]
        for e in events
        if e.type == "queue.transition" and e.payload[1] and e.payload[0][0] == "L"
    ]
    assert moves[:2] == ["RUNNING", "PENDING"] and "DONE" not in moves


def _store(t_us: int, type_: str, *args: Any, result: Any = True) -> TraceEvent:
    return TraceEvent(0, t_us, "store", "", "", type_, [list(args), result])


def _spec(wid: str, *jobs: str) -> dict[str, Any]:
    return {"id": wid, "tenant": "t", "jobs": [{"name": j} for j in jobs]}


FENCE: dict[str, Any] = {}
W = ("W", "trainer", "prep")
AWARD = _store(1, "queue.award", FENCE, 1, "W", 7, "east")
RUNNING = _store(3, "queue.transition", "W", ["DISPATCHING"], "RUNNING", 3)
DONE = _store(9, "queue.transition", "W", ["DISPATCHING", "RUNNING"], "DONE", 9)


def _start(t_us: int, name: str) -> TraceEvent:
    return _store(t_us, "fleet.start", FENCE, t_us, "W", name, "c0", 5, [], [], result=[1, 0])


def _release(t_us: int, name: str, state: str, *, result: bool = True) -> TraceEvent:
    return _store(t_us, "fleet.release", FENCE, t_us, "W", name, state, None, result=result)


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
        _store(0, "queue.submit", _spec(*W), 5, 0),
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
