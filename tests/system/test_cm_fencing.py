"""cm: an RMS's stop order carries its epoch, and a deposed RMS's order has no effect.

Invariant 1 (no effect from a stale epoch) for `StopJob`: once another RMS
instance has led the region, an order from the old leader's memory may
name a job that runs again for a later dispatch; its successor stops what
still has to stop. The story: J runs in east from the start; the RMS leader
dies at 10 min and its follower takes over (epoch 2); at 20 min a stop
order for J arrives at the CM, as a late order of the old leader (epoch 1)
or as one of the new leader (epoch 2). And what the new leader does stop:
the rest of a gang one of whose jobs ended while no RMS led.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec

from actors.common.messages import StopJob
from emulator.kernel import Kernel
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import convert_scenario
from emulator.trace import TraceEvent
from emulator.units import MIN
from tests.support.dsl import job, run, scenario, states, workload
from tests.support.rundb import trace_events
from tests.support.trace import decisions, store_events


def story(
    tmp_path: Path, order_epoch: int, auction_id: int = 0
) -> tuple[RunResult, list[TraceEvent]]:
    raw: dict[str, Any] = scenario(
        [workload("J", "lo", 0, job(gpus=32, work=50 * MIN))], regions=("east",), duration="2h"
    )
    raw["system"]["replicas"] = {"rms": 2, "cm": 1}
    raw["faults"] = [{"action": "crash", "at": "10m", "target": "leader of rms/east"}]
    text = msgspec.json.encode(raw).decode()
    plan = plan_run(convert_scenario(raw, "scripted"), text, "scripted")
    order = StopJob(
        workload_id="J",
        job="trainer",
        reason="preempted",
        checkpoint=True,
        rms_epoch=order_epoch,
        auction_id=auction_id,
    )

    def arm(kernel: Kernel) -> None:
        kernel.at(20 * MIN, kernel.post, "cm/east/c0/0", order)

    result = asyncio.run(execute(plan, seed=1, out=tmp_path / "run.db", on_kernel=arm))

    return result, trace_events(result.out)


def rms_epochs(events: list[TraceEvent]) -> list[int]:
    return [d["epoch"] for d in decisions(events, "lease.leader") if d["role"] == "rms/east"]


def test_a_stop_order_of_a_deposed_rms_leaves_the_job_running(tmp_path: Path) -> None:
    result, events = story(tmp_path, order_epoch=1)
    assert rms_epochs(events) == [1, 2]
    assert result.violations == []
    (ignored,) = decisions(events, "cm.ignore")
    assert ignored["workload"] == "J" and "RMS epoch 1 is stale" in ignored["why"]
    # J was neither stopped nor restarted: one attempt, done.
    assert [e.state for e in store_events(events, "fleet.state", "J")] == ["RUNNING"]
    assert len(store_events(events, "fleet.start", "J")) == 1
    assert states(result) == {"J": ("DONE", 0)}


def test_a_stop_order_of_the_current_rms_stops_the_job(tmp_path: Path) -> None:
    # The same order from the leader of epoch 2 takes effect: the one above
    # was ignored for its epoch alone.
    result, events = story(tmp_path, order_epoch=2)
    assert result.violations == []
    assert decisions(events, "cm.ignore") == []
    stop = [e for e in store_events(events, "fleet.state", "J") if e.state != "RUNNING"]
    assert [(e.t_us, e.state) for e in stop] == [(20 * MIN, "CHECKPOINTING")]
    released = [e.t_us for e in store_events(events, "fleet.release", "J") if e.result]
    assert released and released[0] < 21 * MIN


def test_a_stop_order_for_another_dispatch_leaves_the_job_running(tmp_path: Path) -> None:
    # The current leader's order, resent across failovers, names the dispatch of
    # an earlier attempt: J runs under another, which the order must not stop.
    result, events = story(tmp_path, order_epoch=2, auction_id=999)
    assert result.violations == []
    (ignored,) = decisions(events, "cm.ignore")
    assert "stop order for dispatch 999" in ignored["why"]
    assert [e.state for e in store_events(events, "fleet.state", "J")] == ["RUNNING"]
    assert states(result) == {"J": ("DONE", 0)}
    # Named right, the same order stops it.
    (award,) = store_events(events, "queue.award", "J")
    _, events = story(tmp_path / "named", order_epoch=2, auction_id=award.auction_id)
    assert decisions(events, "cm.ignore") == []
    assert "CHECKPOINTING" in [e.state for e in store_events(events, "fleet.state", "J")]


def test_a_new_rms_leader_stops_the_rest_of_a_gang_that_lost_a_job_unseen(
    tmp_path: Path,
) -> None:
    # W's trainer (all 32 GPUs) and preprocess job (2 CPU machines) run from
    # the start. The RMS leader dies at 30 min; 5 s later a GPU machine fails
    # for good, and the CM, with no spare, gives the trainer up. The follower
    # that takes over finds W RUNNING with its trainer stopped: it used to keep
    # the preprocess job running alone and call W done when it ended.
    raw = scenario(
        [workload("W", "lo", 0, job(gpus=32, work=60 * MIN), job("prep", cpus=2, work=60 * MIN))],
        regions=("east",),
        duration="2h",
    )
    raw["faults"] = [
        {"action": "crash", "at": "30m", "target": "leader of rms/east"},
        {"action": "down", "at": "1805s", "node": "east/dc0/fd0/r0/m1"},
    ]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert decisions(events, "cm.job-lost") == [{"workload": "W", "job": "trainer"}]
    (prep,) = [e for e in store_events(events, "fleet.release", "W") if e.job_name == "prep"]
    assert prep.state == "STOPPED" and prep.t_us < 32 * MIN
    # Back in the queue, waiting: 24 healthy GPUs are left, W needs 32.
    assert states(result) == {"W": ("WAITING", 0)}
