"""Starts that count on a job preempted before its start was heard (dally-cm-failover).

explore found it (`explore dally-cm-failover --seed 48`, run seed 606400866): the
CM leader paused for 13m20s while 30% of messages were lost, and the policy
preempted dally-0049 and dally-0099 while their plans were unanswered. Starts
then counted on their GPUs, naming them as victims, but the CM ran neither: the
GPUs were still their own victims' (checkpointing), or the plan had been refused
(its answer ignored, as the job was stopping). The CM refused every such plan
("machine ... has 0 GPUs free"), and the scheduler re-sent it at once, about a
thousand times per emulated second: the run never ended. Now a start counting
on such a job names that job's own victims too, a refused or lost plan ends the
run of a job stopping before its start, and a refused plan is retried after
`refused_retry`, not at once.

Since Dally ranks jobs whose Nw_sens differ by float noise as equals, that
run (seed 606400866) preempts no job before its start is heard; seed 81
under the same faults does, and stands in for it.
"""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path
from typing import Any

from emulator.liveness import judge_liveness
from emulator.sometimes import tally
from tests.support.broken import (
    SMALL_CLUSTER,
    SMALL_CLUSTER_TEMPLATE,
    AlwaysRefusingCM,
    LongRefusingCM,
    RefusingCM,
    broken_cluster,
)
from tests.support.builtin import raw_builtin, run_raw
from tests.support.trace import decision_events, decisions

CM = "leader of cm/dc/c0"
FAULTS: list[dict[str, Any]] = [
    {"action": "pause", "at": "59m15.260986s", "target": CM, "duration": "4m49.168241s"},
    {"action": "crash", "at": "1h", "target": CM, "restart_after": "10m"},
    {"action": "pause", "at": "1h23.253172s", "target": CM, "duration": "4m17.357106s"},
    {
        "action": "down",
        "at": "1h1m6.00626s",
        "node": "dc/dc0/fd0/r2/m7",
        "duration": "4m10.587632s",
    },
    {"action": "crash", "at": "2h6m16.241709s", "target": CM, "restart_after": "2m23.896754s"},
    {"action": "loss", "at": "2h28m47.219713s", "duration": "7m6.75003s", "probability": 0.3},
    {"action": "pause", "at": "2h34m20.790027s", "target": CM, "duration": "21.719145s"},
    {"action": "pause", "at": "2h34m54.499421s", "target": CM, "duration": "13m20.590158s"},
]


def found(
    tmp_path: Path, duration: str, seed: int = 81, more: list[dict[str, Any]] | None = None
) -> tuple[Any, list[Any]]:
    raw = raw_builtin("dally-cm-failover")
    raw["seed"] = seed
    raw["duration"] = duration
    raw["faults"] = FAULTS + (more or [])
    raw["invariants"]["stop_on_violation"] = True
    return run_raw(raw, tmp_path / "run.db")


def test_starts_on_a_stand_in_wait_for_its_victims(tmp_path: Path) -> None:
    # At seed 606400866, cut a minute into the loop: ~50,000 refusals by then.
    result, events = found(tmp_path, "2h50m")
    assert [e for e in events if e.kind == "actor-error"] == []
    assert result.violations == []
    assert decisions(events, "cluster.plan-refused") == []
    # Its plan refused while it was stopping: it never ran, and no stop report will come.
    assert decisions(events, "cluster.stop-unstarted")


def stopped_first(events: list[Any]) -> list[Any]:
    """The CMs' refusals of plans whose stop orders came first (`cm.stop-before-plan`)."""
    return [e for e in decision_events(events, "cm.reject") if "stopped before" in e.fields["why"]]


def test_the_found_schedule_runs_to_its_end_with_every_job_run(tmp_path: Path) -> None:
    result, events = found(tmp_path, "24h")
    assert [e for e in events if e.kind == "actor-error"] == []
    assert result.status == "ok" and result.violations == []
    assert [r.stuck for r in judge_liveness(events)] == [[]]
    # Each job ended so had been preempted before its start was heard, and never ran then.
    ended = {d["job"] for d in decisions(events, "cluster.stop-unstarted")}
    assert ended
    for job in ended:
        assert any(job in d["preempt"] for d in decisions(events, "cluster.decision"))


def test_a_refused_plan_is_retried_after_a_while_not_at_once(tmp_path: Path) -> None:
    # A CM refuses every plan for 2 s: re-sent at once, each plan came back
    # refused every network round trip, thousands of times.
    kind = broken_cluster("test-refusing-cm", cm=RefusingCM)
    raw = tomllib.loads(SMALL_CLUSTER.format(kind=kind))
    result, events = run_raw(raw, tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    refused = decision_events(events, "cluster.plan-refused")
    assert refused and len(refused) == len({e.job for e in refused})
    for e in refused:
        again = [d for d in decision_events(events, "cluster.decision") if d.t_us > e.t_us]
        assert again and again[0].t_us >= e.t_us + 5_000_000


def test_refusals_share_one_retry(tmp_path: Path) -> None:
    # Seed 112 of dally-cm-failover under FAULTS: every refusal armed a retry of
    # its own and each retry, refused again, armed another: ~20 decisions per
    # emulated second for 45 minutes, 28,031 refusals. With several jobs waiting a
    # retry yields a refusal per job, and the timers multiply.
    kind = broken_cluster("test-long-refusing-cm", cm=LongRefusingCM)
    scenario = SMALL_CLUSTER_TEMPLATE.format(kind="{kind}", policy="fifo", jobs=30)
    raw = tomllib.loads(scenario.format(kind=kind))
    raw["duration"] = "20m"
    result, events = run_raw(raw, tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    refused = decision_events(events, "cluster.plan-refused")
    assert len({e.job for e in refused}) >= 2
    retries = [e for e in events if e.kind == "timer" and e.type == "_Retry"]
    # One armed at a time, each `refused_retry` (5 s) after the refusal that armed it.
    assert 0 < len(retries) <= LongRefusingCM.REFUSE_US // 5_000_000 + 1
    assert all(b.t_us - a.t_us >= 5_000_000 for a, b in itertools.pairwise(retries))


def test_a_stop_that_overtakes_its_plan_keeps_the_plan_from_starting(tmp_path: Path) -> None:
    # Seed 112 under FAULTS: the CM leader, paused, missed plans that the RMS kept
    # resending; the RMS preempted those jobs (their starts unheard) and its stop
    # orders reached the next leader first, which had nothing to stop. The plans
    # then came and started: dally-0060 ran to its end while its RMS counted its
    # GPU free, and every plan counting on it was refused (28,031 refusals, 792
    # once retries were shared) for 45 minutes.
    result, events = found(tmp_path, "2h50m", seed=112)
    assert [e for e in events if e.kind == "actor-error"] == []
    assert result.status == "ok" and result.violations == []
    assert [r.stuck for r in judge_liveness(events)] == [[]]
    stopped = decision_events(events, "cm.stop-before-plan")
    refused = stopped_first(events)
    assert {e.workload for e in refused} >= {"dally-0060", "dally-0061"}
    for e in refused:
        assert any(s.workload == e.workload and s.t_us < e.t_us for s in stopped)
    assert len(decisions(events, "cluster.plan-refused")) < 20
    assert tally(events, "cluster")["cluster-stop-before-plan"] > 0


def test_plans_refused_without_end_are_a_violation(tmp_path: Path) -> None:
    # The refusals checker on a CM that refuses every plan: the scheduler retries
    # every `refused_retry`, and the hundredth refusal in a row of one job fails
    # the run (before the checker, such a run said ok).
    kind = broken_cluster("test-always-refusing-cm", cm=AlwaysRefusingCM)
    raw = tomllib.loads(SMALL_CLUSTER.format(kind=kind))
    raw["invariants"]["enabled"].append("refusals")
    result, _ = run_raw(raw, tmp_path / "run.db")
    assert result.status == "violated"
    assert [v[2] for v in result.violations] == ["refusals"]
    assert "100 plans refused in a row since" in result.violations[0][3]


def test_a_new_cm_leader_refuses_the_plans_its_predecessor_saw_stopped(tmp_path: Path) -> None:
    # Seed 112 again, its CM leader crashed at 3853 s: cm/dc/c0/0 recorded the stop
    # orders of dally-0060 and dally-0061 at 3851 s; their plans reach cm/dc/c0/2 at
    # 3881 s, which must have read the records when it took the role up.
    crash = {"action": "crash", "at": "3853s", "target": CM, "restart_after": "1m"}
    result, events = found(tmp_path, "3h", seed=112, more=[crash])
    assert result.status == "ok" and result.violations == []
    recorded = {e.workload: e.src for e in decision_events(events, "cm.stop-before-plan")}
    refused = {e.workload: e.src for e in stopped_first(events)}
    for workload in ("dally-0060", "dally-0061"):
        assert (recorded[workload], refused.get(workload)) == ("cm/dc/c0/0", "cm/dc/c0/2")
