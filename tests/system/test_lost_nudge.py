"""A submission's nudge lost on the LAN: the cluster scheduler must still hear of the job.

explore found it (`tiresias-philly`, search seed 28, shrunk to one fault: 30% loss on
every link for 71 s from 3h32m55s; the first draw of a link fault in a one-region
world). The client stored philly-0407 and philly-0408 in the queue and nudged the
scheduler with `Submitted`, sent once: both nudges were lost, and the scheduler, which
learns of a job from that nudge alone (MAST's GMS scans its queue; a cluster scheduler
reads it only when it rebuilds), never ran them: stuck PENDING for 44 hours with room
to run (liveness). The nudge is now sent reliably; and a client that crashes while
resending one nudges again, once back, about every workload of its still queued.
"""

from __future__ import annotations

from pathlib import Path

from emulator.liveness import judge_liveness
from tests.support.builtin import raw_builtin, run_raw
from tests.support.trace import store_events


def test_a_job_whose_submission_nudge_was_lost_still_runs(tmp_path: Path) -> None:
    raw = raw_builtin("tiresias-philly")
    raw["system"]["policy"] = "tiresias-las"
    raw["invariants"]["stop_on_violation"] = True
    raw["faults"] = [
        {"action": "loss", "at": "3h32m54.719345s", "duration": "71.329774s", "probability": 0.3}
    ]
    result, events = run_raw(raw, tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    lost = [
        e
        for e in events
        if e.kind == "drop" and e.type == "Submitted" and "philly-0407" in str(e.payload)
    ]
    assert lost, "the story needs philly-0407's first nudge lost"
    (report,) = judge_liveness(events)
    assert report.stuck == []
    for job in ("philly-0407", "philly-0408"):
        done = [e for e in store_events(events, "queue.transition", job) if e.to_state == "DONE"]
        assert len(done) == 1 and done[0].result


def test_a_nudge_whose_resends_died_with_the_client_is_sent_again_at_its_restart(
    tmp_path: Path,
) -> None:
    raw = raw_builtin("tiresias-philly")
    raw["system"]["policy"] = "tiresias-las"
    raw["faults"] = [  # philly-0407 is submitted at 3h33m29.953s
        {"action": "loss", "at": "3h33m29s", "duration": "10s", "probability": 1.0},
        {"action": "crash", "at": "3h33m31s", "target": "client", "restart_after": "1s"},
    ]
    result, events = run_raw(raw, tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    nudges = [
        e
        for e in events
        if e.kind in ("deliver", "drop")
        and e.type == "Submitted"
        and "philly-0407" in str(e.payload)
    ]
    # Lost before the crash, delivered after the restart.
    assert nudges[0].kind == "drop" and nudges[-1].kind == "deliver"
    (report,) = judge_liveness(events)
    assert report.stuck == []
