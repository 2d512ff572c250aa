"""A plan that reaches a CM again after the job started, its first answer lost.

explore found it (`explore dally-cm-failover --seed 48`, shrunk to four faults: the
scheduler's leader down for 13m41s, then 30% loss, a pause of the scheduler's leader
and a crash of the CM's leader). The CM started dally-0111; its ok was lost, the plan
was resent to the CM's new leader, which refused it as "job already running here".
The scheduler took the refusal for a plan that never started and sent the running job
back to the queue (`gang`). Two layers now: a CM answers a resent plan it runs under
the same auction with ok, and a scheduler refused asks the store whether the job
started under that dispatch before requeueing it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.support.broken import SMALL_CLUSTER, LostOkCM, TwicePlanningScheduler, broken_cluster
from tests.support.builtin import raw_builtin, run_raw
from tests.support.trace import decisions, events_of


def test_the_found_schedule_keeps_the_gang(tmp_path: Path) -> None:
    raw = raw_builtin("dally-cm-failover")
    raw["seed"] = 606400866
    raw["invariants"]["stop_on_violation"] = True
    raw["faults"] = [
        {
            "action": "crash",
            "at": "2h34m16.077253s",
            "target": "leader of rms/dc",
            "restart_after": "13m41.81734s",
        },
        {
            "action": "loss",
            "at": "2h47m58.238161s",
            "duration": "15m29.179848s",
            "probability": 0.3,
        },
        {
            "action": "pause",
            "at": "2h48m0.714558s",
            "target": "leader of rms/dc",
            "duration": "1m4.831471s",
        },
        {
            "action": "crash",
            "at": "2h49m10.142892s",
            "target": "leader of cm/dc/c0",
            "restart_after": "0.761129s",
        },
    ]
    result, events = run_raw(raw, tmp_path / "run.db")
    assert [e for e in events if e.kind == "actor-error"] == []
    assert result.status == "ok" and result.violations == []


def test_a_cm_answers_a_resent_plan_it_runs_with_ok(tmp_path: Path) -> None:
    kind = broken_cluster("test-twice-planning", scheduler=TwicePlanningScheduler)
    result, events = run_raw(tomllib.loads(SMALL_CLUSTER.format(kind=kind)), tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    answers = [e.msg["msg"] for e in events_of(events, "deliver", "PlanResult")]
    assert len(answers) >= 20 and all(a["ok"] for a in answers)  # two per plan


def test_a_refused_scheduler_asks_the_store_before_requeueing(tmp_path: Path) -> None:
    kind = broken_cluster("test-lost-ok", cm=LostOkCM)
    result, events = run_raw(tomllib.loads(SMALL_CLUSTER.format(kind=kind)), tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    assert decisions(events, "cluster.plan-refused") == []
    assert len(decisions(events, "cluster.started-unheard")) == 10  # every job, once
