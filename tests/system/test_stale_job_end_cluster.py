"""The cluster systems' scheduler and a job's end report that comes after the job runs again.

A report resent across a failover can arrive once its job was dispatched again (the MAST
RMS met it twice: `tests/system/test_stale_job_end.py`). Here a CM makes it certain: every
end of a preempted attempt is sent once more right after the job's next start. The report
names its auction, so the scheduler drops it (`cluster.stale-end`); taken for the running
attempt's end, it sent the job back to the queue while it ran (`gang`), then dispatched it
again and again against the CM's "job already running here".
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from emulator.sometimes import tally
from tests.support.broken import SMALL_CLUSTER_TEMPLATE, LateEndsCM, broken_cluster
from tests.support.builtin import run_raw
from tests.support.trace import decision_events, store_events

# Forty jobs under tiresias-las, which preempts (format `kind`).
SCENARIO = SMALL_CLUSTER_TEMPLATE.format(kind="{kind}", policy="tiresias-las", jobs=40)


def test_a_late_end_of_a_preempted_attempt_leaves_the_running_attempt_alone(
    tmp_path: Path,
) -> None:
    kind = broken_cluster("test-late-ends", cm=LateEndsCM)
    result, events = run_raw(tomllib.loads(SCENARIO.format(kind=kind)), tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    stale = decision_events(events, "cluster.stale-end")
    assert len(stale) >= 3
    for e in stale:
        # Each came while its job ran under a later auction, and did not end it.
        awards = [a for a in store_events(events, "queue.award", e.job) if a.t_us <= e.t_us]
        assert awards and awards[-1].auction_id > e.auction
        refused = [d for d in decision_events(events, "cluster.plan-refused") if d.job == e.job]
        assert all(d.why != "job already running here" for d in refused)
    # The cluster system's catalogue names it (this kind is a test's, so asked directly).
    assert tally(events, "cluster")["cluster-stale-end"] == len(stale)
