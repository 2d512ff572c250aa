"""A job preempted while its dispatch waits for a slow CM still holds its GPUs.

explore found it (`tiresias-philly`, search seed 46, shrunk to two faults): the CM
leader of dc/c0 paused from 23m08s for 13m32s, then the scheduler's leader paused
from 36m42s for 28 s (within its lease). The policy preempted philly-0014 while its
dispatch was unanswered (the CM paused); the scheduler made it `stopping` with no
`begin_us`, so `claims_for` counted its GPUs neither used nor draining while the
policy's view held them. Back, the scheduler's first decision raised `ComponentBug:
... a start counts on 4 GPUs nobody frees` and crashed at every restart (1,001 times);
two jobs stayed RUNNING with nothing running (`no-lost-workload`). Such a job now holds
its GPUs from its preemption until its stop is reported.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.builtin import raw_builtin, run_raw


def test_a_job_preempted_before_its_start_was_heard_keeps_the_claims_consistent(
    tmp_path: Path,
) -> None:
    raw = raw_builtin("tiresias-philly")
    raw["system"]["policy"] = "tiresias-las"
    raw["invariants"]["stop_on_violation"] = True
    raw["duration"] = "1h"  # the crashes began at 37m10s
    raw["faults"] = [
        {
            "action": "pause",
            "at": "23m7.995902s",
            "target": "leader of cm/dc/c0",
            "duration": "13m31.833698s",
        },
        {
            "action": "pause",
            "at": "36m42.373974s",
            "target": "leader of rms/dc",
            "duration": "28.144443s",
        },
    ]
    result, events = run_raw(raw, tmp_path / "run.db")
    assert [e for e in events if e.kind == "actor-error"] == []
    assert result.status == "ok" and result.violations == []
