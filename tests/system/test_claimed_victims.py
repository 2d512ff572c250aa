"""A victim one dispatch is preempting is offered to no other bid.

An RMS reserves an awarded plan's machines in its view at once, while the
plan's victims keep theirs until their checkpoints land; a bid's hold does
the same. The victims stayed candidates all the while: a later bid could
name one again and count on the machines it frees, which the first plan had
taken. Its CM accepted the plan (the victim still ran there) and made it
wait for the victim; once the victim stopped, the first plan took the
machines, the second could not start, and the RMS rolled the rest of its
gang back: a workload ended "aborted" in a run with no fault.
Quickstart did this once (w000128 at 3h46m: auction 6546 named w000041
and w000051, whom auction 6545's dispatch was already preempting), and
twice in its first 3h50m without faults (w000019 and w000078). The
reservation and the hold now claim their victims (`ClusterLedger`), and the
test of the ledger's snapshots checks claims against a rebuild
(`tests/unit/policies/test_cluster_view.py`).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.trace import decisions
from tests.system.test_fault_free_runs import assert_no_refusals


def test_quickstart_without_faults_never_names_a_victim_already_being_preempted(
    tmp_path: Path,
) -> None:
    # No workload ends "aborted" (among the fault-free run's other checks).
    events = assert_no_refusals("quickstart", tmp_path, duration="3h50m")
    # The story happens: dispatches preempt (30 of them name victims in this span).
    assert sum(bool(d["victims"]) for d in decisions(events, "rms.dispatch")) >= 20
