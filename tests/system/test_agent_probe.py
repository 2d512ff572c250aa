"""cm: a CM that begins to lead probes its jobs' agents and restarts the jobs of dead ones.

An agent dies with its first machine. A leading CM hears of that (`HostDown`)
and restarts the job; a CM that was down or following did not, and the
hardware replay a new leader gets tells it only of machines still down. The
stories run on the tiny world of `tests/support/dsl.py` (one region of four
8-GPU machines in one rack, three CM instances): a probe must find an agent
that died with a machine that came back, must not take a live agent for a
dead one (even one busy saving a checkpoint), and must cost nothing in a run
without a change of CM leader. A plan left waiting for its victims by a CM
leader that died is taken up by the next one. An agent that crashes alone
(its machines up) and restarts tells its CM its attempt is over; one killed
for good is restarted by its host (`supervised_restart_us`). The last
tests are the preemption checker's excuse for agents that died with the
emulator process (`mastemu resume`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.checks.preemption import PreemptionChecker
from actors.common.job_agent import JobAgent
from emulator.liveness import judge_liveness
from emulator.run.runner import RunResult
from emulator.trace import TraceEvent
from emulator.units import MIN
from tests.support.dsl import job, preemption_story, run, scenario, states, workload
from tests.support.trace import decisions, store_events

RACK = "east/dc0/fd0/r0"  # all four GPU machines of east


def crash_leader(at: str) -> dict[str, Any]:
    """The CM leader of east's cluster crashes for good: a follower takes over."""
    return {"action": "crash", "at": at, "target": "leader of cm/east/c0"}


def probes(events: list[TraceEvent]) -> list[TraceEvent]:
    return [e for e in events if e.type == "AgentProbe"]


def lone_job(duration: str, *faults: dict[str, Any]) -> dict[str, Any]:
    """J (50 min of work, a checkpoint every 20 min) alone on east's rack, with `faults`."""
    raw = scenario([workload("J", "lo", 0, job(gpus=32, work=50 * MIN))], regions=("east",))
    raw["duration"] = duration
    raw["faults"] = list(faults)
    return raw


# A job's agent killed at 30 min, brought back a minute later (or, without, by its host).
AGENT_CRASH = {"action": "crash", "at": "30m", "target": "a live job-agent", "restart_after": "1m"}
AGENT_KILLED = {"action": "crash", "at": "30m", "target": "a live job-agent"}


def assert_moved_on(raw: dict[str, Any], tmp_path: Path, lost_in: tuple[int, int]) -> None:
    """J's attempt 1 is reported lost within `lost_in` (µs), J restarts from its
    20-min checkpoint as attempt 2 and ends DONE, breaking nothing."""
    result, events = run(raw, tmp_path)
    assert result.violations == [] and result.actor_errors == []
    (lost,) = [e for e in events if e.type == "cm.agent-lost"]
    assert lost.payload == {"workload": "J", "job": "trainer", "attempt": 1}
    assert lost_in[0] <= lost.t_us < lost_in[1]
    (moved,) = decisions(events, "cm.job-moved")
    assert (moved["attempt"], moved["from_us"]) == (2, 20 * MIN)
    assert states(result) == {"J": ("DONE", 0)}


# ---- agents that died unseen ----------------------------------------------------------------
def test_a_new_cm_leader_restarts_a_job_whose_agent_died_with_a_machine_that_came_back(
    tmp_path: Path,
) -> None:
    # J (50 min of work, a checkpoint every 20 min) runs on the whole rack. The
    # CM leader dies at 30 min; while no CM leads (its lease runs for 30 s),
    # the rack fails for 10 s and comes back, and J's agent dies with it.
    rack_down = {"action": "down", "at": "1805s", "node": RACK, "duration": "10s"}
    raw = lone_job("2h", crash_leader("30m"), rack_down)
    result, events = run(raw, tmp_path)
    assert result.violations == []
    (lost,) = [e for e in events if e.type == "cm.agent-lost"]
    assert lost.payload == {"workload": "J", "job": "trainer", "attempt": 1}
    assert lost.src != "cm/east/c0/0"  # the follower that took over found it
    # Restarted from its last checkpoint, within a minute of the crash.
    (moved,) = decisions(events, "cm.job-moved")
    assert (moved["attempt"], moved["from_us"]) == (2, 20 * MIN)
    assert lost.t_us < 31 * MIN
    # Without the probe J would hold the rack, RUNNING, to the end of the run.
    assert states(result) == {"J": ("DONE", 0)}


def test_an_agent_that_crashed_alone_and_restarted_has_its_job_restarted_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    # J's agent crashes at 30 min (the machines stay up) and restarts a minute
    # later without its state. Nothing else would tell the CM: J would hold the
    # rack, RUNNING and doing nothing, to the end of the run.
    assert_moved_on(lone_job("3h", AGENT_CRASH), tmp_path, (31 * MIN, 32 * MIN))


def test_an_agent_killed_for_good_is_restarted_by_its_host_and_its_job_moved_on(
    tmp_path: Path,
) -> None:
    # J's agent is killed at 30 min and no fault brings it back (no restart_after,
    # no nemesis heal). Its host's supervisor restarts it 5 s later; that restart
    # tells the CM, which restarts J from its checkpoint. Without it J held the
    # rack, RUNNING and doing nothing, to the end of the run: no invariant and no
    # liveness verdict saw it (the workload held machines).
    assert_moved_on(lone_job("3h", AGENT_KILLED), tmp_path, (30 * MIN + 5_000_000, 31 * MIN))


@pytest.fixture(scope="module")
def failover_while_saving(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[RunResult, list[TraceEvent]]:
    """H (priority 1) preempts L at 60 min 10 s; L's checkpoint takes 3 min; the
    CM leader dies at 61 min, and a follower takes over while L still saves."""
    raw = preemption_story(duration="3h")
    raw["system"]["checkpoint_cost"] = "3m"
    raw["faults"] = [crash_leader("61m")]
    return run(raw, tmp_path_factory.mktemp("saving"))


def test_a_live_agent_saving_a_checkpoint_through_a_cm_failover_is_not_taken_for_dead(
    failover_while_saving: tuple[RunResult, list[TraceEvent]],
) -> None:
    # The new leader probes L's agent while it is still saving. The agent
    # answers at once, so L keeps its machines until its checkpoint is saved,
    # as invariant 6 requires.
    result, events = failover_while_saving
    assert result.violations == []
    assert decisions(events, "cm.agent-lost") == []
    took_over = [
        e.t_us
        for e in events
        if e.type == "lease.leader" and e.payload["role"] == "cm/east/c0" and e.t_us > 61 * MIN
    ]
    saved = [
        e.t_us
        for e in store_events(events, "fleet.checkpoint", "L")
        if e.result and e.t_us > 60 * MIN
    ]
    released = [e.t_us for e in store_events(events, "fleet.release", "L") if e.result]
    assert took_over and saved and released
    sent = [e.t_us for e in probes(events)]
    assert sent and took_over[0] <= sent[0] < saved[0]  # probed while saving
    assert saved[0] < released[0]
    assert states(result)["H"] == ("DONE", 0)


def test_a_plan_waiting_for_its_victims_survives_a_cm_failover(
    failover_while_saving: tuple[RunResult, list[TraceEvent]],
) -> None:
    # H's plan waited for L's checkpoint when the leader that took it died. The
    # new leader takes it up from the store and starts H as soon as L has
    # stopped, instead of the RMS giving up on H after its 15-min timeout.
    result, events = failover_while_saving
    (taken,) = decisions(events, "cm.plan-taken-up")
    assert (taken["workload"], taken["victims"]) == ("H", 1)
    released = next(e.t_us for e in store_events(events, "fleet.release", "L") if e.result)
    started = [e.t_us for e in store_events(events, "fleet.start", "H") if e.result]
    assert started == [released]
    assert not [d for d in decisions(events, "dispatch.failed") if d["workload"] == "H"]
    # Done with, the record is gone: a later leader has nothing to take up.
    puts = [e for e in store_events(events, "kv.put") if e.namespace == "cm-plans/east/c0"]
    deletes = [e for e in store_events(events, "kv.delete") if e.result]
    assert len(puts) == len(deletes) == 1
    assert states(result)["H"] == ("DONE", 0)


def test_a_run_without_a_change_of_cm_leader_sends_no_probe(tmp_path: Path) -> None:
    result, events = run(preemption_story(), tmp_path)
    assert result.violations == []
    assert probes(events) == []
    assert decisions(events, "cm.agent-lost") == []


def test_after_a_cm_failover_live_agents_keep_their_jobs(tmp_path: Path) -> None:
    # Nothing but the CM leader fails: every agent answers, no job restarts.
    raw = preemption_story()
    raw["faults"] = [crash_leader("30m")]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert probes(events)
    assert decisions(events, "cm.agent-lost") == []
    assert len([e for e in store_events(events, "fleet.start", "L") if e.result]) == 1


# ---- the preemption checker and the emulator process's kill -----------------------------------
FENCE: dict[str, Any] = {"role": "cm/r/c1", "holder": "cm/r/c1/0", "epoch": 1}
START = ("store", "fleet.start", [FENCE, 0, "v", "j", "r/c1", 5, [["m1", 8]], []], [1, 0])
RESUME = ("run", "resume", {"after_seq": 1, "seed": 1, "status": "running"}, None)


def preemption_verdicts(*events: tuple[str, str, Any, Any]) -> list[str]:
    """v runs on m1; w (priority 0) preempts it; v is released without a checkpoint."""
    checker = PreemptionChecker()
    story = [
        *events,
        ("store", "fleet.state", [FENCE, 1, "v", "j", "RUNNING"], True),
        ("decision", "rms.dispatch", {"workload": "w", "priority": 0, "victims": [["v", "j"]]}, 0),
        ("store", "fleet.release", [FENCE, 9, "v", "j", "STOPPED"], True),
    ]
    out: list[str] = []
    for seq, (kind, type_, payload, result) in enumerate(story, start=1):
        body = [payload, result] if kind == "store" else payload
        out += checker.observe(TraceEvent(seq, 5, kind, "x", "", type_, body))
    return out


def test_a_victim_whose_agent_died_with_the_process_is_excused() -> None:
    # The attempt began before the resume: its agent died with the process.
    assert preemption_verdicts(START, RESUME) == []


def test_a_victim_started_after_the_resume_still_needs_its_checkpoint() -> None:
    # Same time, later in the trace: the resume excuses only attempts before it.
    (violation,) = preemption_verdicts(RESUME, START)
    assert "v/j released its machines before saving a checkpoint" in violation
    assert len(preemption_verdicts(START)) == 1


def test_a_job_whose_agent_died_unseen_is_frozen_in_the_liveness_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The story above with an agent no host restarts: J holds the rack, RUNNING
    # and silent (no checkpoint every 20 min), from 30 min to the end. No
    # invariant sees it; the liveness verdict must.
    raw = lone_job("3h", AGENT_KILLED)
    monkeypatch.setattr(JobAgent, "supervised_restart_us", None)
    result, events = run(raw, tmp_path / "unseen")
    assert result.violations == [] and states(result) == {"J": ("RUNNING", 0)}
    stuck = [s for r in judge_liveness(events) for s in r.stuck]
    assert [(s.id, s.state) for s in stuck] == [("J", "RUNNING")]
    assert stuck[0].why.startswith("holds machines, no sign of life for 2h")
    # Restarted by its host, the agent tells its CM, J moves on and ends: nothing stuck.
    monkeypatch.undo()
    _, events = run(raw, tmp_path / "seen")
    assert [s for r in judge_liveness(events) for s in r.stuck] == []


def test_the_final_heal_leaves_an_agent_that_came_back_and_left_alone(tmp_path: Path) -> None:
    # J's agent crashes at 30 min and restarts a minute later, reports its attempt
    # lost and leaves. The nemesis' final heal at 2 h restarts what faults left
    # down: not that agent, which is no longer down but gone.
    raw = lone_job("3h", AGENT_CRASH)
    raw["nemesis"] = {"enabled": True, "faults_max": 0, "heal_at": "2h"}
    result, events = run(raw, tmp_path)
    assert result.violations == [] and states(result) == {"J": ("DONE", 0)}
    restarts = [e.t_us for e in events if e.kind == "restart" and e.dst == "agent/J/trainer/1"]
    assert restarts == [31 * MIN]
    assert len([e for e in events if e.type == "cm.agent-lost"]) == 1
