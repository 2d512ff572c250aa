"""The built-in failure scenarios: each ends clean, and the failure it is about happened.

`gms-failover`, `rms-failover` and `cm-failover-preemption` run the loaded
small world of quickstart for 90 minutes with MAST's replica counts and kill
one leader at a chosen instant of the 46m10s GMS-scan pass, whose first
auction's winner (us-east) preempts a lower-priority job for its trainer.
Every test finds the workloads involved from the trace, not from the file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from emulator.registry import builtin_scenarios
from emulator.run.events import NamedEvent
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import load_scenario_file
from emulator.trace import TraceEvent
from tests.support.dsl import TAKEOVER_US_MAX
from tests.support.rundb import trace_events
from tests.support.trace import decisions, store_events

NAMES = ("gms-failover", "rms-failover", "cm-failover-preemption")


def run_builtin(name: str, out: Path) -> tuple[RunResult, list[TraceEvent]]:
    scenario, text = load_scenario_file(builtin_scenarios()[name])
    plan = plan_run(scenario, text, name)
    result = asyncio.run(execute(plan, seed=scenario.seed, out=out))

    return result, trace_events(out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("failover")
    return {name: run_builtin(name, folder / f"{name}.db") for name in NAMES}


def the_crash(events: list[TraceEvent]) -> TraceEvent:
    (crash,) = [e for e in events if e.kind == "crash"]
    return crash


def before(events: list[TraceEvent], event: TraceEvent) -> list[TraceEvent]:
    return [e for e in events if e.seq < event.seq]


def landed(events: list[TraceEvent], name: str, workload: str) -> list[NamedEvent]:
    return [e for e in store_events(events, name, workload) if e.result]


def moves(events: list[TraceEvent], workload: str) -> list[tuple[int, list[str], str, Any]]:
    """(seq, from states, to state, auction) of the workload's committed queue moves."""
    return [
        (e.seq, e.from_states, e.to_state, e.fields.get("auction_id"))
        for e in landed(events, "queue.transition", workload)
    ]


def takeover(events: list[TraceEvent], role: str, crash: TraceEvent) -> tuple[str, TraceEvent]:
    """The new leader of `role` after the crash (epoch 2), and its claim."""
    claims = [
        e
        for e in events
        if e.kind == "decision" and e.type == "lease.leader" and e.payload["role"] == role
    ]
    assert [e.payload["epoch"] for e in claims] == [1, 2]
    assert claims[0].src == crash.dst != claims[1].src
    assert 0 < claims[1].t_us - crash.t_us <= TAKEOVER_US_MAX
    return claims[1].src, claims[1]


def test_the_failure_scenarios_are_built_in() -> None:
    assert set(NAMES) <= set(builtin_scenarios())


@pytest.mark.parametrize("name", NAMES)
def test_a_failure_scenario_ends_clean(runs: dict[str, Any], name: str) -> None:
    result, events = runs[name]
    assert result.status == "ok" and result.violations == []
    # Every role except the failed one kept its first leader.
    changed = {
        e.payload["role"] for e in events if e.type == "lease.leader" and e.payload["epoch"] > 1
    }
    assert len(changed) == 1


def test_gms_failover_the_interrupted_auctions_workload_is_dispatched_once(
    runs: dict[str, Any],
) -> None:
    _, events = runs["gms-failover"]
    crash = the_crash(events)
    assert crash.dst == "gms/0"
    # The dead leader had opened an auction and had not closed it.
    opened = [e for e in store_events(before(events, crash), "auction.open") if e.result]
    interrupted = opened[-1]
    auction, workload = interrupted.result, interrupted.workload_id
    assert interrupted.src == "gms/0" and crash.t_us - interrupted.t_us < 1_000_000
    assert not [e for e in store_events(events, "auction.close") if e.auction_id == auction]
    assert not [e for e in landed(events, "queue.award", workload) if e.auction_id == auction]
    successor, claim = takeover(events, "gms", crash)
    assert successor == "gms/1"
    # The new leader auctions it again: one award, one dispatch, each job started once.
    (award, *_) = [e for e in landed(events, "queue.award", workload) if e.seq > claim.seq]
    assert award.src == "gms/1"
    again = award.auction_id
    dispatches = [d for d in decisions(events, "rms.dispatch") if d["workload"] == workload]
    assert [d["auction"] for d in dispatches][:1] == [again]
    running = next(m for m in moves(events, workload) if m[2] == "RUNNING")
    assert running[3] == again
    starts = [e.job_name for e in landed(events, "fleet.start", workload) if e.seq < running[0]]
    assert sorted(starts) == sorted(set(starts)) and starts


def test_rms_failover_the_successor_settles_the_dispatch_and_the_workload_runs_once(
    runs: dict[str, Any],
) -> None:
    _, events = runs["rms-failover"]
    crash = the_crash(events)
    role = crash.dst.rsplit("/", 1)[0]
    # The dead leader's last dispatch was waiting for a victim's checkpoint.
    (dispatch, *_) = reversed(
        [e for e in before(events, crash) if e.type == "rms.dispatch" and e.src == crash.dst]
    )
    workload, auction = dispatch.payload["workload"], dispatch.payload["auction"]
    assert dispatch.payload["victims"]
    assert not [m for m in moves(before(events, crash), workload) if m[3] == auction]
    successor, claim = takeover(events, role, crash)
    # The successor found the gang half started: it stopped the started job, and
    # only then gave the dispatch up; the dead leader's waiting plan started nothing.
    given_up = next(m for m in moves(events, workload) if m[3] == auction)
    assert given_up[1:3] == (["DISPATCHING", "RUNNING"], "PENDING") and given_up[0] > claim.seq
    stopped = [e for e in landed(events, "fleet.release", workload) if e.seq < given_up[0]]
    assert stopped and all(e.state == "STOPPED" for e in stopped)
    starts = landed(events, "fleet.start", workload)
    assert not [e for e in starts if claim.seq < e.seq < given_up[0]]
    # Dispatched again (more than once if a CM refuses a plan made stale meanwhile)
    # by the new leader: the dispatch that runs it starts each of its jobs once.
    running = next(m for m in moves(events, workload) if m[2] == "RUNNING")
    assert running[0] > given_up[0]
    (again,) = [
        e for e in events if e.type == "rms.dispatch" and e.payload["auction"] == running[3]
    ]
    assert again.src == successor
    second = [e.job_name for e in starts if again.seq < e.seq < running[0]]
    assert second and sorted(second) == sorted(set(second))


def test_cm_failover_preemption_the_victim_saves_its_checkpoint_before_its_machines_go(
    runs: dict[str, Any],
) -> None:
    _, events = runs["cm-failover-preemption"]
    crash = the_crash(events)
    role = crash.dst.rsplit("/", 1)[0]
    # The dead leader had ordered a victim's checkpoint, which had not finished.
    (ordered, *_) = reversed(
        [
            e
            for e in store_events(before(events, crash), "fleet.state")
            if e.src == crash.dst and e.state == "CHECKPOINTING"
        ]
    )
    victim, job = ordered.workload_id, ordered.job_name
    mine = [e for e in landed(events, "fleet.release", victim) if e.job_name == job]
    assert mine and mine[0].seq > crash.seq
    successor, claim = takeover(events, role, crash)
    # The successor finished the preemption: the checkpoint first, then the release.
    release = mine[0]
    assert release.src == successor and release.state == "STOPPED"
    saved = [e for e in landed(events, "fleet.checkpoint", victim) if e.job_name == job]
    assert any(ordered.seq < e.seq < release.seq for e in saved)
    # The victim's workload went back to the queue once, counted as a preemption.
    back = [
        e
        for e in landed(events, "queue.transition", victim)
        if e.to_state == "PENDING" and ordered.seq < e.seq
    ]
    assert back and back[0].preempted is True
    assert back[0].seq > release.seq > claim.seq
