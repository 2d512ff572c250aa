"""What a new cluster-scheduler leader makes of a saved job account (`recovered`).

The last leader saved the account; the job queue and the fleet may have moved
on since. Each row: the saved state (and whether its run had begun), the
queue's state, the fleet row's state, then the rebuilt state and what the new
leader must still do.
"""

from __future__ import annotations

import pytest

from actors.cluster.jobs import JobAccount, recovered
from actors.policies.cluster.api import TraceJob
from store.mast.fleet import JobRow

TRACE = TraceJob(job_id="j", submit_us=10, gpus=4, model="resnet50", duration_us=1_000)
STARTED_US = 500


def row(state: str | None) -> JobRow | None:
    if state is None:
        return None
    return JobRow(
        workload_id="j",
        job="train",
        cluster="dc/c0",
        attempt=1,
        state=state,
        priority=0,
        checkpoint_us=0,
        started_us=STARTED_US,
        cm_epoch=1,
    )


CASES = [
    # saved, begun, queue, fleet → state, step
    ("future", False, None, None, "future", None),
    ("future", False, "PENDING", None, "waiting", None),
    ("offered", False, "PENDING", None, "waiting", None),
    ("dispatching", False, "DISPATCHING", None, "dispatching", "unheard"),
    ("dispatching", False, "DISPATCHING", "STOPPED", "dispatching", "unheard"),
    ("dispatching", False, "DISPATCHING", "RUNNING", "dispatching", "began"),
    # Preempted before its start was heard: stays stopping (explore: tiresias-philly,
    # rebuilt as dispatching its GPUs counted twice, and the next decision crashed).
    ("stopping", True, "DISPATCHING", None, "stopping", "stop-unheard"),
    ("stopping", True, "DISPATCHING", "STARTING", "stopping", "stop"),
    ("running", True, "RUNNING", "RUNNING", "running", None),
    ("stopping", True, "RUNNING", "RUNNING", "stopping", "stop"),
    ("stopping", True, "RUNNING", "CHECKPOINTING", "stopping", "stop"),
    ("running", True, "RUNNING", "DONE", "running", "done"),
    ("running", True, "RUNNING", "STOPPED", "running", "failed"),
    ("running", True, "RUNNING", None, "running", "failed"),
    ("running", True, "DONE", "DONE", "done", None),
    ("waiting", False, "FAILED", None, "failed", None),
]


@pytest.mark.parametrize(("saved", "begun", "entry", "fleet", "state", "step"), CASES)
def test_recovered(
    saved: str, begun: bool, entry: str | None, fleet: str | None, state: str, step: str | None
) -> None:
    a = JobAccount(job_id="j", state=saved, begin_us=STARTED_US if begun else None)
    assert recovered(a, TRACE, entry, row(fleet)) == step
    assert a.state == state


def test_a_future_job_enters_the_queue_at_its_submission() -> None:
    a = JobAccount(job_id="j")
    recovered(a, TRACE, "PENDING", None)
    assert (a.queued_since_us, a.ready_us) == (TRACE.submit_us, TRACE.submit_us)


def test_a_start_recorded_but_not_saved_is_counted_from_the_fleet() -> None:
    # The last leader recorded the start in the queue and died before saving the account.
    a = JobAccount(job_id="j", state="dispatching", ready_us=100)
    assert recovered(a, TRACE, "RUNNING", row("RUNNING")) is None
    assert (a.state, a.begin_us, a.first_start_us, a.queued_us) == (
        "running",
        STARTED_US,
        STARTED_US,
        STARTED_US - 100,
    )
