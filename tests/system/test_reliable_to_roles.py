"""A report to a role is resent for as long as its sender lives: a role comes back.

explore found it (`region-outage`, search seed 14, shrunk to two faults):
us-east is down from 30 min for two hours, and the GMS leader (gms/0, in
us-west) crashes at 1h01m45s for 1h40m; its follower gms/1 lives in us-east.
No GMS leads from 62 to 150 min. logs-adhoc finishes at 81.75 min in us-west,
whose RMS reports `WorkloadEnded` to `gms` and resends it while nobody leads —
and gave up after its 200 resends (~66 min) at 148 min, two minutes before
gms/1 took the lead: the queue held logs-adhoc RUNNING with nothing running to
the end (`no-lost-workload`). Resends to an actor's address still stop at the
limit (an agent that died does not come back).
"""

from __future__ import annotations

from pathlib import Path

from emulator.units import MIN
from tests.support.builtin import raw_builtin, run_raw
from tests.support.dsl import workload_states
from tests.support.trace import decisions, store_events


def test_a_workloads_end_reported_while_no_gms_leads_reaches_the_gms_that_comes_back(
    tmp_path: Path,
) -> None:
    raw = raw_builtin("region-outage")
    raw["faults"] = [
        {"action": "down", "at": "30m", "node": "region us-east", "duration": "2h"},
        {
            "action": "crash",
            "at": "1h1m45.425417s",
            "target": "leader of gms",
            "restart_after": "1h40m14.574583s",
        },
    ]
    result, events = run_raw(raw, tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    # The story still happens: the end comes while no GMS leads, for over 66 minutes.
    drops = [
        e.t_us
        for e in events
        if e.kind == "drop" and e.type == "WorkloadEnded" and "logs-adhoc" in str(e.payload)
    ]
    assert drops and drops[-1] - drops[0] > 66 * MIN
    assert not [d for d in decisions(events, "reliable.gave-up") if d["to"] == "gms"]
    (done,) = [
        e.t_us
        for e in store_events(events, "queue.transition", "logs-adhoc")
        if e.result and e.to_state == "DONE"
    ]
    assert 150 * MIN <= done < 151 * MIN  # as soon as gms/1 leads
    assert workload_states(result)["logs-adhoc"] == "DONE"
