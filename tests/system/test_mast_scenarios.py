"""mast: scripted fast-path stories on a tiny world, and broken components caught.

The world: regions east and west, each one dynamic cluster of 4 A100 machines
(32 GPUs) and 4 CPU machines. Tenants `hi` (priority 1) and `lo` (priority 5)
with quotas far above the world. Workloads and tables are scripted with the DSL
of `actors/mast/scripted.py`; the broken components are in `tests/support/broken.py`
and run through the `mastemu` fixture, as a user's suite would run them.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulator.registry import builtin_scenarios
from emulator.run.runner import execute, plan_run
from emulator.testing import MastemuFixture
from emulator.trace import TraceEvent
from emulator.units import MIN, H
from store.mast.queue import QUEUED
from tests.support.broken import (
    DataBlindRMS,
    DoubleAwardGMS,
    EagerCM,
    ForgetfulGMS,
    GangBreakingRMS,
    GenerousGMS,
    broken_system,
)
from tests.support.dsl import (
    caught_offline,
    job,
    preemption_story,
    run,
    scenario,
    states,
    workload,
)
from tests.support.trace import decisions, started, store_events


# ---- stories ------------------------------------------------------------------------------
def test_two_regions_bid_and_the_higher_p_score_wins(tmp_path: Path) -> None:
    # L fills east (its data is only there); H's data is in both regions. East can
    # place H only by preempting L, west has free GPUs: west's plan scores higher.
    raw = scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=10 * H, tables=("t-east",))),
            workload("H", "hi", 30 * MIN, job(gpus=16, tables=("t",))),
        ],
        tables=[
            {"name": "t-east", "size_bytes": 1, "home_region": "east"},
            {"name": "t", "size_bytes": 1, "home_region": "east", "replicas": ["west"]},
        ],
    )
    result, events = run(raw, tmp_path)
    assert result.violations == []
    award = next(d for d in decisions(events, "auction.award") if d["workload"] == "H")
    assert set(award["bids"]) == {"east", "west"}
    assert award["bids"]["west"] > award["bids"]["east"]
    assert award["winner"] == "west"
    assert states(result)["L"] == ("RUNNING", 0)  # nobody was preempted


def test_a_workload_whose_data_is_in_no_region_waits_for_data(tmp_path: Path) -> None:
    raw = scenario([workload("W", "hi", 0, job(gpus=8, tables=("nowhere",)))], duration="30m")
    result, events = run(raw, tmp_path)
    assert states(result)["W"][0] == "WAITING_DATA"
    none = [d for d in decisions(events, "auction.none") if d["workload"] == "W"]
    assert none and all(d["reasons"] == ["no_data"] for d in none)
    assert not store_events(events, "fleet.start", "W")


def test_a_workloads_jobs_start_together_or_not_at_all(tmp_path: Path) -> None:
    raw = scenario(
        [
            # Fits: 16 GPUs + 2 CPU machines in one region.
            workload("G", "hi", 0, job(gpus=16), job("prep", cpus=2)),
            # Its preprocess job needs 6 CPU machines; no cluster has more than 4.
            workload("X", "hi", 0, job(gpus=8), job("prep", cpus=6)),
        ],
        duration="3h",
    )
    result, events = run(raw, tmp_path)
    assert result.violations == []
    starts = store_events(events, "fleet.start", "G")
    assert sorted(e.job_name for e in starts) == ["prep", "trainer"]
    running = [
        e
        for e in store_events(events, "queue.transition", "G")
        if e.to_state == "RUNNING" and e.result
    ]
    assert running and running[0].seq > max(e.seq for e in starts)
    assert states(result)["G"][0] == "DONE"
    assert not store_events(events, "fleet.start", "X")  # not even its trainer
    assert states(result)["X"][0] in QUEUED


def test_only_lower_priority_work_is_preempted_after_its_checkpoint(tmp_path: Path) -> None:
    # E has L's priority: it never preempts L.
    raw = preemption_story(duration="6h", extra=[workload("E", "lo", 40 * MIN, job(gpus=8))])
    result, events = run(raw, tmp_path)
    assert result.violations == []
    (dispatch,) = [d for d in decisions(events, "rms.dispatch") if d["victims"]]
    assert dispatch["workload"] == "H" and dispatch["victims"] == [["L", "trainer"]]
    release = next(e for e in store_events(events, "fleet.release", "L") if e.state == "STOPPED")
    saved = [e for e in store_events(events, "fleet.checkpoint", "L") if e.result]
    h_start = store_events(events, "fleet.start", "H")[0]
    # The victim's checkpoint lands before its machines are released, and they
    # are reused only after that.
    assert any(e.seq < release.seq and e.t_us >= 60 * MIN for e in saved)
    assert release.seq < h_start.seq
    # L comes back from its checkpoint (not from zero) and finishes.
    restarts = [e for e in store_events(events, "fleet.start", "L") if e.result]
    assert [started(e).attempt for e in restarts] == [1, 2]
    assert started(restarts[1]).from_us >= 60 * MIN - 10 * MIN  # minus setup time
    final = states(result)
    assert final["L"] == ("DONE", 1)
    assert final["H"] == ("DONE", 0)
    # E (L's priority) never preempts L: it starts only on GPUs that H's
    # preemption of L left over, never by a plan with victims.
    e_start = store_events(events, "fleet.start", "E")[0]
    assert e_start.seq > release.seq
    assert [d["victims"] for d in decisions(events, "rms.dispatch") if d["workload"] == "E"] == [[]]


def test_quickstart_twice_gives_one_hash_and_no_violations(tmp_path: Path) -> None:
    path = builtin_scenarios()["quickstart"]
    text = path.read_text()
    from emulator.run.scenario import decode_scenario

    plan = plan_run(decode_scenario(text, str(path)), text, str(path))
    a = asyncio.run(execute(plan, seed=5, out=tmp_path / "a.db", until_us=2 * H))
    b = asyncio.run(execute(plan, seed=5, out=tmp_path / "b.db", until_us=2 * H))
    assert a.trace_hash == b.trace_hash
    assert a.status == "ok" and a.violations == []
    with sqlite3.connect(a.out) as c:
        done = c.execute("SELECT count(*) FROM workloads WHERE state = 'DONE'").fetchone()[0]
        running = c.execute("SELECT count(*) FROM workloads WHERE state = 'RUNNING'").fetchone()[0]
    assert done + running > 0


# ---- broken components are caught ----------------------------------------------------------------
def test_a_gms_that_awards_twice_is_caught_online_and_offline(mastemu: MastemuFixture) -> None:
    kind = broken_system("mast-double-award", gms=DoubleAwardGMS)
    raw = scenario([workload("W", "hi", 0, job(gpus=8))], kind=kind, duration="20m")
    done = mastemu.run(raw)
    assert any(
        v.invariant == "auction" and "awarded to west while DISPATCHING" in v.message
        for v in done.violations
    )
    assert caught_offline(done.db, "auction")


def test_an_rms_that_breaks_the_gang_is_caught(mastemu: MastemuFixture) -> None:
    kind = broken_system("mast-gang-breaker", rms=GangBreakingRMS)
    # The preprocess job waits for a CPU victim's checkpoint; the trainer starts at once.
    raw = scenario(
        [
            workload("V", "lo", 0, job("prep", cpus=4, work=5 * H)),
            workload("G", "hi", 60 * MIN, job(gpus=8), job("prep", cpus=2)),
        ],
        regions=("east",),
        kind=kind,
        duration="3h",
    )
    done = mastemu.run(raw)
    assert any(
        v.invariant == "gang" and v.message.startswith("G RUNNING but jobs ['prep']")
        for v in done.violations
    )
    assert caught_offline(done.db, "gang")


def test_a_cm_that_reuses_a_victims_machines_before_its_checkpoint_is_caught(
    mastemu: MastemuFixture,
) -> None:
    kind = broken_system("mast-eager-cm", cm=EagerCM)
    raw = preemption_story(kind=kind)
    done = mastemu.run(raw)
    assert any(
        v.invariant == "preemption" and "before saving a checkpoint" in v.message
        for v in done.violations
    )
    assert caught_offline(done.db, "preemption")


def test_double_allocation_is_caught_by_the_allocation_checker() -> None:
    from actors.checks.allocation import AllocationChecker

    checker = AllocationChecker()
    fence = {"role": "cm/east/c0", "holder": "cm/east/c0/0", "epoch": 1}

    def start(w: str, gpus: list[list[Any]], cpus: list[str] = ()) -> list[str]:  # type: ignore[assignment]
        args = [fence, 0, w, "trainer", "east/c0", 5, gpus, list(cpus)]
        return checker.observe(TraceEvent(1, 0, "store", "cm", "", "fleet.start", [args, [1, 0]]))

    assert start("a", [["m0", 6]]) == []
    assert start("b", [["m0", 2]], ["c0"]) == []  # exactly full
    assert start("c", [["m0", 1]]) == [
        "m0: 9 GPUs allocated (of 8) to a/trainer, b/trainer, c/trainer"
    ]
    assert start("d", [], ["c0"]) == ["CPU machine c0 held by b/trainer and d/trainer"]
    assert start("a", [["m1", 1]]) == ["a/trainer started again while it still holds machines"]


@pytest.mark.parametrize("name", ["quickstart"])
def test_builtin_mast_scenarios_are_listed(name: str) -> None:
    assert name in builtin_scenarios()


def test_a_machine_failure_restarts_the_job_on_a_spare_from_its_last_checkpoint(
    tmp_path: Path,
) -> None:
    raw = scenario([workload("J", "hi", 0, job(gpus=8, work=2 * H))], regions=("east",))
    raw["faults"] = [{"action": "down", "at": "70m", "node": "east/dc0/fd0/r0/m0"}]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    first, second = [e for e in store_events(events, "fleet.start", "J") if e.result]
    assert [h for h, _ in first.gpus] == ["east/dc0/fd0/r0/m0"]
    assert "east/dc0/fd0/r0/m0" not in [h for h, _ in second.gpus]
    (moved,) = decisions(events, "cm.job-moved")
    # Checkpoints every 20 min of progress after setup; the failure at 70 min loses
    # what was done since the last one, and the new attempt resumes from it.
    saved = max(
        e.progress_us for e in store_events(events, "fleet.checkpoint", "J") if e.t_us < 70 * MIN
    )
    assert started(second) == (2, saved) and moved["from_us"] == saved > 0
    assert states(result)["J"] == ("DONE", 0)


@pytest.mark.parametrize(
    ("binding", "state", "region"), [("mast", "DONE", "east"), ("federated", "WAITING_DATA", None)]
)
def test_federated_early_binding_ignores_where_the_data_is(
    tmp_path: Path, binding: str, state: str, region: str | None
) -> None:
    # L keeps half of east busy. H's data is only in east, which has room for it.
    # MAST's auction finds east; the federated baseline binds H to west (demand/supply
    # 0/32 against east's 16/32) and H can never run there.
    raw = scenario(
        [
            workload("L", "lo", 0, job(gpus=16, work=10 * H)),
            workload("H", "hi", 10 * MIN, job(gpus=8)),
        ],
        tables=[{"name": "t", "size_bytes": 1, "home_region": "east"}],
        duration="2h",
    )
    raw["system"]["policy"] = binding
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert states(result)["H"][0] == state
    if binding == "federated":
        assert {"workload": "H", "region": "west"} in decisions(events, "federated.bind")
    else:
        starts = store_events(events, "fleet.start", "H")
        assert starts[0].cluster == "east/c0"


def test_a_csv_trace_is_imported_relative_to_the_scenario_file(tmp_path: Path) -> None:
    from actors.mast.workload.csv_trace import write_csv_trace
    from emulator.cli.main import main
    from store.mast.records import JobSpec, WorkloadSpec

    jobs = (JobSpec(name="trainer", gpu_type="A100", gpus=8, work_us=H, input_tables=("logs",)),)
    write_csv_trace(
        tmp_path / "trace.csv",
        [WorkloadSpec(id=f"w{i}", tenant="hi", submit_at_us=i * MIN, jobs=jobs) for i in range(3)],
    )
    raw = scenario([])
    del raw["system"]["workload_list"], raw["system"]["table_list"]
    raw["system"]["workload_csv"] = "trace.csv"
    raw["system"]["data_placement"] = "colocated"
    raw["duration"] = "3h"
    (tmp_path / "s.json").write_text(msgspec.json.encode(raw).decode())
    assert main(["run", str(tmp_path / "s.json"), "--out", str(tmp_path / "r.db")]) == 0
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("SELECT id, state FROM workloads ORDER BY id").fetchall() == [
            ("w0", "DONE"),
            ("w1", "DONE"),
            ("w2", "DONE"),
        ]
    # A malformed trace is bad input: exit 2 naming the file and line, no run database.
    (tmp_path / "trace.csv").write_text("workload_id,tenant\nw0,hi\n")
    assert main(["run", str(tmp_path / "s.json"), "--out", str(tmp_path / "bad.db")]) == 2
    assert not (tmp_path / "bad.db").exists()


# ---- invariants 5, 7 and 8 ----------------------------------------------------------------------
def test_an_rms_that_ignores_where_data_is_is_caught_by_colocation(mastemu: MastemuFixture) -> None:
    kind = broken_system("mast-data-blind", rms=DataBlindRMS)
    # The data is only in west, which L fills; east is free and (wrongly) bids.
    raw = scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=5 * H, tables=("t",))),
            workload("H", "hi", 20 * MIN, job(gpus=8, tables=("t",))),
        ],
        tables=[{"name": "t", "size_bytes": 1, "home_region": "west"}],
        kind=kind,
        duration="1h",
    )
    done = mastemu.run(raw)
    assert any(
        v.invariant == "colocation" and "/trainer started in east without ready ['t']" in v.message
        for v in done.violations
    )
    assert caught_offline(done.db, "colocation")


def test_a_gms_with_a_wrong_quota_view_is_caught_by_quota(mastemu: MastemuFixture) -> None:
    kind = broken_system("mast-generous", gms=GenerousGMS)
    raw = scenario(
        [workload("A", "small", 0, job(gpus=8)), workload("B", "small", 0, job(gpus=8))],
        kind=kind,
        duration="20m",
    )
    # Tenant "small" may use 8 GPUs at once: its second workload is over quota.
    raw["system"]["tenant_list"].append(
        {"name": "small", "priority": 2, "gpu_quota": 8, "cpu_quota": 0}
    )
    done = mastemu.run(raw)
    assert any(
        v.invariant == "quota" and "ranked within quota" in v.message for v in done.violations
    )
    assert caught_offline(done.db, "quota")


def test_quota_holds_with_a_correct_gms(tmp_path: Path) -> None:
    raw = scenario(
        [workload("A", "small", 0, job(gpus=8)), workload("B", "small", 0, job(gpus=8))],
        duration="20m",
    )
    raw["system"]["tenant_list"].append(
        {"name": "small", "priority": 2, "gpu_quota": 8, "cpu_quota": 0}
    )
    result, events = run(raw, tmp_path)
    assert result.violations == []
    ranks = store_events(events, "queue.rank")
    first = {wid: (priority, within) for wid, priority, _c, within in ranks[0].ranking}
    # A fits the quota and keeps its tenant's priority; B would exceed it: lowest priority.
    assert first == {"A": (2, True), "B": (7, False)}


def test_a_gms_that_forgets_a_preempted_workload_is_caught_as_lost(mastemu: MastemuFixture) -> None:
    kind = broken_system("mast-forgetful", gms=ForgetfulGMS)
    raw = preemption_story(kind=kind)
    done = mastemu.run(raw)
    assert any(
        v.invariant == "no-lost-workload"
        and v.message.startswith("L is RUNNING but none of its jobs")
        for v in done.violations
    )
    assert caught_offline(done.db, "no-lost-workload")
