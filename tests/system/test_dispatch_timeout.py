"""An RMS's dispatch timeout with results that never came: the jobs may have started all the same.

explore found it (`ras-fault-domain`, seed 7 of the search, shrunk to two
faults): eu-west's RMS dispatched w000047 (preempting a job of w000031) and,
nine seconds later, every RMS of eu-west was paused for 33m40s. Its CMs
started the trainer and the preprocess job meanwhile; their `PlanResult`s
found no RMS leader and waited. Back, the RMS handled its dispatch timeout
first: it took the two silent jobs for refused, stopped the one it had heard
of, and gave the workload back to the GMS — which queued it again while two
of its jobs held machines (`gang`), and the preempted w000031 stayed RUNNING
with nothing running (`no-lost-workload`). The RMS now asks the store which
silent jobs hold machines: they count as started (here the whole gang had,
so the dispatch succeeded); a gang that did not start whole has those stopped
with the others before the workload goes back to the queue.

The cluster systems' scheduler had the same flaw (found by pausing it for 20 min
between its CM's start of dally-0097 and that CM's answer, in `dally-cm-failover`):
back, it stopped the job and queued it again while it ran (`gang`). Two fixes: it
asks the store too, so a job that started under the timed-out dispatch runs on
(`cluster.started-unheard`; shown with the answer lost, every link dropping all
for 16 min); and it asks whether it leads before it reads the job's account,
which a new epoch rebuilds from the store (after the pause, the rebuild finds the
job running). Either alone would have kept the paused story from breaking the gang.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from emulator.run.coverage import reached
from emulator.trace import TraceEvent
from emulator.units import S
from tests.support.builtin import raw_builtin, run_raw
from tests.support.trace import decision_events, store_events

PAUSE = {"action": "pause", "at": "2h8m19.19882s", "target": "all of rms/eu-west"}


def story() -> dict[str, Any]:
    raw = raw_builtin("ras-fault-domain")
    raw["faults"] = [
        {"action": "down", "at": "1h40m", "node": "us-east/dc0/fd0"},
        {**PAUSE, "duration": "33m40.80118s"},
    ]
    return raw


def window(events: list[TraceEvent]) -> tuple[int, int]:
    starts = [e.t_us for e in events if e.kind == "fault" and e.type == "pause.start"]
    ends = [e.t_us for e in events if e.kind == "fault" and e.type == "pause.end"]
    return min(starts), max(ends)


def test_a_gang_that_started_while_its_rms_was_paused_runs_instead_of_being_requeued(
    tmp_path: Path,
) -> None:
    result, events = run_raw(story(), tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    paused, back = window(events)
    # The story still happens: the award just before the pause, two starts during it.
    (award,) = [e for e in decision_events(events, "rms.dispatch") if e.workload == "w000047"]
    assert paused - 60 * S < award.t_us < paused
    starts = [e for e in store_events(events, "fleet.start", "w000047") if e.result]
    during = sorted(e.job_name for e in starts if paused < e.t_us < back)
    assert during == ["preprocess", "trainer"]
    # The store shows the whole gang holding machines: the dispatch succeeded.
    moves = [
        (e.to_state, e.t_us)
        for e in store_events(events, "queue.transition", "w000047")
        if e.result
    ]
    assert [state for state, _ in moves] == ["RUNNING"] and moves[0][1] >= back
    assert not [e for e in store_events(events, "fleet.release", "w000047") if e.result]
    # The victim it preempted meanwhile went back to the queue once its end was heard.
    victim = [
        (e.to_state, e.t_us)
        for e in store_events(events, "queue.transition", "w000031")
        if e.result
    ]
    assert [state for state, t_us in victim if t_us >= back][:1] == ["PENDING"]


def dally_0097(tmp_path: Path, fault: dict[str, Any]) -> tuple[Any, list[TraceEvent]]:
    """dally-cm-failover with `fault` as dally-0097's CM starts it (1h50m02.133263s)."""
    raw = raw_builtin("dally-cm-failover")
    raw["duration"] = "2h30m"
    raw["faults"] = [fault]
    raw["invariants"]["stop_on_violation"] = True
    result, events = run_raw(raw, tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    # Started once, and never queued again.
    moves = [e.to_state for e in store_events(events, "queue.transition", "dally-0097") if e.result]
    assert moves and "PENDING" not in moves
    assert len([e for e in store_events(events, "fleet.start", "dally-0097") if e.result]) == 1
    return result, events


def test_a_cluster_job_whose_start_was_never_heard_runs_on_past_its_dispatch_timeout(
    tmp_path: Path,
) -> None:
    # Every message lost for 16 min, from just after the CM got the plan.
    loss = {"action": "loss", "at": "1h50m02.133262s", "duration": "16m", "probability": 1.0}
    result, events = dally_0097(tmp_path, loss)
    (heard,) = decision_events(events, "cluster.started-unheard")
    assert heard.job == "dally-0097"
    moves = [e for e in store_events(events, "queue.transition", "dally-0097") if e.result]
    assert (moves[0].to_state, moves[0].t_us) == ("RUNNING", heard.t_us)  # from its timeout on
    assert asyncio.run(reached(result.out))["cluster-started-unheard"] == 1


def test_a_cluster_job_that_started_while_its_scheduler_was_paused_runs_on(
    tmp_path: Path,
) -> None:
    pause = {"action": "pause", "at": "1h50m02.133265s", "target": "rms/dc/0", "duration": "20m"}
    _, events = dally_0097(tmp_path, pause)
    assert decision_events(events, "cluster.rebuilt")[-1].t_us > 2 * 60 * 60 * S
