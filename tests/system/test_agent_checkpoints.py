"""agent: a periodic checkpoint saves the work done so far, once.

The agent measures its progress from where its run started, not from its
last checkpoint: that checkpoint already holds part of the same run, and
adding the whole run time to it counted that part twice (a job 40 min into
its run saved 60 min of progress, and a preempted job resumed from work it
never did).
"""

from __future__ import annotations

from pathlib import Path

from emulator.trace import TraceEvent
from emulator.units import MIN
from tests.support.dsl import job, preemption_story, run, scenario, workload
from tests.support.trace import started, store_events


def saved(events: list[TraceEvent], wid: str) -> list[tuple[int, int]]:
    """(attempt, progress saved) of each committed checkpoint of the workload's trainer."""
    return [
        (e.attempt, e.progress_us)
        for e in store_events(events, "fleet.checkpoint", wid)
        if e.result
    ]


def test_each_periodic_checkpoint_saves_the_work_done_by_then(tmp_path: Path) -> None:
    # 90 min of work, a checkpoint every 20 min of running: 20, 40, 60, 80, then
    # the whole of it when it finishes.
    raw = scenario([workload("J", "lo", 0, job(gpus=8, work=90 * MIN))], regions=("east",))
    raw["duration"] = "3h"
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert saved(events, "J") == [(1, m * MIN) for m in (20, 40, 60, 80, 90)]


def test_a_preempted_job_resumes_from_the_work_it_did(tmp_path: Path) -> None:
    # L runs from about 2 min (setup) and is preempted at 60 min 10 s: its stop
    # checkpoint holds under 60 min of work, and its next attempt starts there.
    result, events = run(preemption_story(duration="4h"), tmp_path)
    assert result.violations == []
    first = [s for a, s in saved(events, "L") if a == 1]
    assert first[:2] == [20 * MIN, 40 * MIN]
    assert 55 * MIN < first[-1] < 60 * MIN
    restart = [e for e in store_events(events, "fleet.start", "L") if e.result][1]
    assert started(restart).from_us == first[-1]
