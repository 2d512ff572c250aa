"""The built-in outage scenarios: what each exists to show, read back from its trace.

`wan-partition-migration` cuts the WAN out of the data lake while two big
on-demand copies run; `region-outage` takes a whole region down for an
hour; `power-domain` takes a fault domain of machines down at once. Each
test finds the facts it judges in the trace (faults, flows, store events,
decisions) and the run database, never in the scenario file alone. Each
scenario runs once per module (about two seconds each).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actors.common.cm.manager import ClusterManager
from actors.mast.system import MastSystem
from emulator.liveness import judge_liveness
from emulator.registry import builtin_scenarios, register_system
from emulator.run.events import NamedEvent, named
from emulator.run.runner import RunResult
from emulator.trace import TraceEvent
from emulator.units import MIN, H, S, format_us
from store.mast.records import JobSpec
from tests.support.builtin import Run, raw_builtin, run_raw
from tests.support.dsl import workload_states
from tests.support.trace import (
    copy_finished,
    decision_events,
    job_starts,
    started,
    store_events,
)

NAMES = ("wan-partition-migration", "region-outage", "power-domain")
TB = 10**12
WAN_BYTES_S = 12.5e9  # the default 100 Gb/s per region pair


def run_builtin(name: str, out: Path, edit: Callable[[dict[str, Any]], None] | None = None) -> Run:
    raw = raw_builtin(name)
    if edit is not None:
        edit(raw)
    return run_raw(raw, out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    folder = tmp_path_factory.mktemp("outage")
    return {name: run_builtin(name, folder / f"{name}.db") for name in NAMES}


# ---- reading the trace --------------------------------------------------------------------
def checkpoints(events: list[TraceEvent], workload: str, job: str) -> list[tuple[int, int, int]]:
    """(t, attempt, progress µs) of every checkpoint of one job that the store took."""
    return [
        (e.t_us, e.attempt, e.progress_us)
        for e in store_events(events, "fleet.checkpoint", workload)
        if e.job_name == job and e.result
    ]


def awards(events: list[TraceEvent], workload: str) -> list[NamedEvent]:
    return [e for e in decision_events(events, "auction.award") if e.workload == workload]


def fault_window(events: list[TraceEvent], down: str, up: str) -> tuple[int, int]:
    (start,) = [e.t_us for e in events if e.kind == "fault" and e.type == down][:1]
    (end,) = [e.t_us for e in events if e.kind == "fault" and e.type == up][:1]
    return start, end


# ---- all three ------------------------------------------------------------------------------
def test_the_outage_scenarios_are_built_in() -> None:
    assert set(NAMES) <= set(builtin_scenarios())
    # They check every invariant family the random nemesis run does.
    families = set(raw_builtin("chaos")["invariants"]["enabled"])
    assert "progress" in families
    for name in NAMES:
        assert set(raw_builtin(name)["invariants"]["enabled"]) >= families


@pytest.mark.parametrize("name", NAMES)
def test_an_outage_scenario_ends_clean(runs: dict[str, Run], name: str) -> None:
    result, _ = runs[name]
    assert result.status == "ok" and result.violations == []
    assert result.fault_windows


def test_an_outage_scenario_gives_the_same_trace_twice(
    runs: dict[str, Run], tmp_path: Path
) -> None:
    again, _ = run_builtin("power-domain", tmp_path / "again.db")
    assert again.trace_hash == runs["power-domain"][0].trace_hash


# ---- wan-partition-migration --------------------------------------------------------------
def flows(events: list[TraceEvent]) -> dict[int, dict[str, Any]]:
    """Every WAN flow: its start (t, src, dst, bytes) and how it ended (done or cancelled)."""
    out: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.kind != "flow":
            continue
        f = named(e)
        if e.type == "start":
            out[f.flow_id] = {
                "t": e.t_us,
                "src": f.src_region,
                "dst": f.dst_region,
                "bytes": f.nbytes,
                "moved": None,
            }
        elif e.type == "cancel":
            out[f.flow_id].update(moved=f.bytes_done, ended=e.t_us)
        elif e.type == "done":
            out[f.flow_id].update(moved=out[f.flow_id]["bytes"], ended=e.t_us)
    return out


def copies(result: RunResult) -> dict[str, tuple[str, int, int, str]]:
    with sqlite3.connect(result.out) as c:
        rows = c.execute("SELECT table_name, dst, bytes_done, size_bytes, state FROM copies")
        return {t: (dst, done, size, state) for t, dst, done, size, state in rows}


def test_wan_cut_stalls_both_copies_and_they_resume_where_they_stopped(
    runs: dict[str, Run],
) -> None:
    result, events = runs["wan-partition-migration"]
    cut, heal = fault_window(events, "partition.start", "partition.end")
    by_dst: dict[str, list[dict[str, Any]]] = {}
    for flow in sorted(flows(events).values(), key=lambda f: f["t"]):
        assert flow["src"] == "ap-south"
        by_dst.setdefault(flow["dst"], []).append(flow)
    assert sorted(by_dst) == ["eu-west", "us-east"]
    budget = {"us-east": 20 * TB, "eu-west": 10 * TB}  # eu-west's copy: up to the daily cap
    for dst, (before, after) in by_dst.items():
        # The first flow stalled at the cut: what it moved is what the link
        # carried until then, though the service stopped it only later.
        assert before["t"] < cut <= before["ended"] < heal
        assert before["moved"] == pytest.approx(WAN_BYTES_S * (cut - before["t"]) / 1e6, rel=1e-3)
        # The second one starts after the heal and carries only what was missing.
        assert after["t"] >= heal
        assert after["bytes"] == budget[dst] - before["moved"]
        assert after["moved"] == after["bytes"]
    # Nothing moved twice: the per-day count is what the flows carried, and
    # what the copies say they hold.
    moved = sum(f["moved"] for f in flows(events).values())
    with sqlite3.connect(result.out) as c:
        (day_total,) = c.execute("SELECT sum(bytes) FROM migration_days").fetchone()
    assert moved == day_total == sum(done for _, done, _, _ in copies(result).values())
    # While cut, the persisted progress of every copy stood still.
    during = [e.updates for e in store_events(events, "migration.progress") if cut < e.t_us < heal]
    seen: dict[int, set[int]] = {}
    for updates in during:
        for copy_id, done, _ in updates:
            seen.setdefault(copy_id, set()).add(done)
    assert seen and all(len(values) == 1 for values in seen.values())


def test_wan_the_daily_cap_and_the_storage_quota_hold(runs: dict[str, Run]) -> None:
    result, events = runs["wan-partition-migration"]
    cap = raw_builtin("wan-partition-migration")["system"]["migration"]["daily_cap_bytes"]
    with sqlite3.connect(result.out) as c:
        assert c.execute("SELECT day, bytes FROM migration_days").fetchall() == [(0, cap)]
    held = copies(result)
    assert held["clicks"] == ("us-east", 20 * TB, 20 * TB, "done")
    # `images` stopped at the cap and waits for the next day; so does its workload.
    assert held["images"] == ("eu-west", 10 * TB, 15 * TB, "queued")
    # `archive` does not fit next to the bytes `images` reserved in eu-west:
    # never ordered, its workload keeps waiting.
    assert "archive" not in held
    asked = [
        e.fields for e in decision_events(events, "migration.on-demand")
        if e.workload == "archive-scan"
    ]  # fmt: skip
    assert asked and all(a["region"] is None for a in asked)
    final = workload_states(result)
    assert final["image-tagger"] == final["archive-scan"] == "WAITING_DATA"


def test_wan_whichever_workload_loses_eu_wests_room_waits_without_being_stuck(
    runs: dict[str, Run], tmp_path: Path
) -> None:
    """eu-west takes `images` (15 TB) or `archive` (30 TB), never both (40 TB).

    The scenario's story gives the room to `images`, asked first. explore found
    the other order (seed 2, shrunk): the migration leader paused from the start
    for 15m25.5s, its requests piled up and reached it in resend order;
    `archive` won the room, and the liveness judge, blind to storage, called
    image-tagger stuck. It counts each region's room now, as the `storage`
    invariant does, and the scenario names no workload that may wait.
    """
    assert "may_wait" not in raw_builtin("wan-partition-migration")["invariants"]
    _, events = runs["wan-partition-migration"]
    (report,) = judge_liveness(events)
    assert report.stuck == [] and report.waiting_ok == 2  # image-tagger (the cap), archive-scan

    def paused(raw: dict[str, Any]) -> None:
        pause = {"action": "pause", "at": "0s", "target": "leader of migration"}
        raw["faults"] = [{**pause, "duration": "15m25.536892s"}]

    result, events = run_builtin("wan-partition-migration", tmp_path / "paused.db", paused)
    assert result.status == "ok" and result.violations == []
    held = copies(result)
    assert held["archive"][0] == "eu-west" and "images" not in held  # the other order
    # archive's copy waits for the next day's cap (clicks took 20 of today's 30 TB);
    # images has no room in eu-west at all.
    assert held["archive"][3] == "queued"
    final = workload_states(result)
    assert final["image-tagger"] == final["archive-scan"] == "WAITING_DATA"
    (report,) = judge_liveness(events)
    assert report.stuck == [] and report.waiting_ok == 2


def test_wan_a_copy_that_lands_just_before_the_end_leaves_its_workload_waiting_not_stuck(
    tmp_path: Path,
) -> None:
    """explore's schedule (seed 2, shrunk): the service down from 45m50s to 2h15m.

    It resumes the copy of `clicks`, which lands 30 s before the run ends:
    clicks-ranker has had no time to be placed, and is not stuck.
    """

    def late(raw: dict[str, Any]) -> None:
        crash = {"action": "crash", "target": "leader of migration"}
        raw["faults"] = [
            {**crash, "at": "7m5.170005s", "restart_after": "2m19.784835s"},
            *raw["faults"],
            {**crash, "at": "45m50.942013s", "restart_after": "1h29m9.057987s"},
        ]

    result, events = run_builtin("wan-partition-migration", tmp_path / "late.db", late)
    assert result.status == "ok" and result.violations == []
    (landed,) = [
        e.t_us
        for e in store_events(events, "migration.done")
        if e.result and copy_finished(e).table == "clicks"
    ]
    end = 150 * MIN
    assert end - MIN < landed < end  # the story still happens
    assert workload_states(result)["clicks-ranker"] == "WAITING_DATA"
    (report,) = judge_liveness(events)
    assert report.stuck == []


def test_wan_the_workload_waiting_for_its_data_runs_once_it_lands(runs: dict[str, Run]) -> None:
    result, events = runs["wan-partition-migration"]
    (landed,) = [
        e
        for e in store_events(events, "migration.done")
        if e.result and copy_finished(e).table == "clicks"
    ]
    waits = [e for e in decision_events(events, "auction.none") if e.workload == "clicks-ranker"]
    assert waits and waits[0].state == "WAITING_DATA"
    assert all(w.t_us < landed.t_us for w in waits)
    ((t, job, cluster, attempt, _),) = job_starts(events, "clicks-ranker")
    assert landed.t_us < t < landed.t_us + 2 * MIN  # the next GMS pass
    assert (job, cluster, attempt) == ("trainer", "us-east/c0", 1)
    assert workload_states(result)["clicks-ranker"] == "DONE"
    # Work whose data was local never waited.
    assert job_starts(events, "feature-check")[0].t_us < MIN


@pytest.mark.slow
def test_wan_the_capped_copy_finishes_the_next_day_and_its_workload_runs(tmp_path: Path) -> None:
    def longer(raw: dict[str, Any]) -> None:
        raw["duration"] = "26h"

    result, events = run_builtin("wan-partition-migration", tmp_path / "long.db", longer)
    assert result.violations == []
    with sqlite3.connect(result.out) as c:
        days = c.execute("SELECT day, bytes FROM migration_days ORDER BY day").fetchall()
    assert days == [(0, 30 * TB), (1, 5 * TB)]
    assert copies(result)["images"][1:] == (15 * TB, 15 * TB, "done")
    (t, *_), *_ = job_starts(events, "image-tagger")
    assert t > 24 * H
    assert workload_states(result)["image-tagger"] == "DONE"


# ---- region-outage --------------------------------------------------------------------------
def test_region_outage_work_with_a_dr_replica_runs_in_the_other_region_meanwhile(
    runs: dict[str, Run],
) -> None:
    result, events = runs["region-outage"]
    down, up = fault_window(events, "down", "up")
    (award,) = awards(events, "logs-adhoc")
    assert down < award.t_us < up
    assert award.winner == "us-west" and set(award.bids) == {"us-west"}
    ((t, _, cluster, _, _),) = job_starts(events, "logs-adhoc")
    assert down < t < up and cluster.startswith("us-west/")
    assert workload_states(result)["logs-adhoc"] == "DONE"


def test_region_outage_work_whose_data_is_only_there_waits_for_the_region(
    runs: dict[str, Run],
) -> None:
    _, events = runs["region-outage"]
    down, up = fault_window(events, "down", "up")
    tried = [e for e in decision_events(events, "auction.none") if e.workload == "ads-adhoc"]
    assert tried and all(down < e.t_us < up for e in tried)
    (award,) = awards(events, "ads-adhoc")
    assert up < award.t_us < up + 2 * MIN and award.winner == "us-east"


def test_region_outage_the_region_is_used_again_once_back(runs: dict[str, Run]) -> None:
    _, events = runs["region-outage"]
    _, up = fault_window(events, "down", "up")
    (award,) = awards(events, "logs-late")
    assert award.t_us > up and set(award.bids) == {"us-east", "us-west"}
    assert award.winner == "us-east"
    # The job that died with the region's machines and whose data has no replica
    # elsewhere ran again there, from the last checkpoint it saved before the
    # power went. The region's CM released the dead attempt as it came back
    # (its workload had been queued again meanwhile), and restarted nothing.
    first, again = job_starts(events, "ads-train")
    assert first.cluster == again.cluster == "us-east/c0" and again.attempt == first.attempt + 1
    assert up < again.t_us < up + 2 * MIN
    saved = [p for t, _, p in checkpoints(events, "ads-train", "trainer") if t < up]
    assert saved and again.from_us == saved[-1] > 0
    (gone,) = decision_events(events, "cm.dispatch-gone")
    assert gone.t_us == up
    assert gone.fields == {"workload": "ads-train", "job": "trainer", "attempt": 1}
    assert not decision_events(events, "cm.agent-lost")


def test_region_outage_nothing_is_lost(runs: dict[str, Run]) -> None:
    result, _ = runs["region-outage"]
    assert set(workload_states(result).values()) == {"DONE"}
    assert len(workload_states(result)) == len(
        raw_builtin("region-outage")["system"]["workload_list"]
    )


def test_region_outage_running_work_with_a_dr_replica_moves_to_the_other_region(
    runs: dict[str, Run],
) -> None:
    result, events = runs["region-outage"]
    down, up = fault_window(events, "down", "up")
    # The GMS gives the region up once its RMS and CM leases have been expired
    # for `region_lost_after` (10 min by default), at its next pass (every minute).
    (lost,) = decision_events(events, "gms.region-lost")
    assert lost.region == "us-east"
    assert sorted(w for w, _ in lost.workloads) == ["ads-train", "logs-train"]
    dark = lost.dark_since_us
    assert down < dark <= down + 30 * S  # the last lease ran out (ttl 30 s)
    assert dark + 10 * MIN <= lost.t_us < dark + 11 * MIN
    requeued = [
        e for e in store_events(events, "queue.transition", "logs-train")
        if e.to_state == "PENDING" and e.result
    ]  # fmt: skip
    assert [e.t_us for e in requeued] == [lost.t_us]
    # In the same pass it runs again in us-west, on the DR replica, from the
    # checkpoint it saved at 20 min; it never runs in us-east again.
    first, moved = job_starts(events, "logs-train")
    assert first.cluster == "us-east/c0" and moved.cluster == "us-west/c0"
    assert lost.t_us < moved.t_us < lost.t_us + MIN and down < moved.t_us < up
    assert moved.attempt == 2 and moved.from_us == 20 * MIN
    assert workload_states(result)["logs-train"] == "DONE"


# ---- power-domain ---------------------------------------------------------------------------
FD = "us-east/dc0/fd2"


def test_power_domain_a_job_restarts_from_its_checkpoint_on_the_spare_machines(
    runs: dict[str, Run],
) -> None:
    _, events = runs["power-domain"]
    down, _ = fault_window(events, "down", "up")
    (moved,) = decision_events(events, "cm.job-moved")
    assert moved.t_us == down and moved.workload == "captioner"
    first, again = store_events(events, "fleet.start", "captioner")
    old_hosts = {h for h, _ in first.gpus}
    new_hosts = {h for h, _ in again.gpus}
    assert all(h.startswith(FD + "/") for h in old_hosts)
    # The spares: healthy machines of the same cluster that no job held.
    held = {
        h
        for e in store_events(events, "fleet.start")
        if e.t_us < down and e.workload_id != "captioner"
        for h, _ in e.gpus
    }
    assert new_hosts.isdisjoint(held) and not any(h.startswith(FD) for h in new_hosts)
    assert again.cluster == "us-east/c0"
    saved = [p for t, a, p in checkpoints(events, "captioner", "trainer") if t < down]
    assert started(again) == (2, saved[-1]) and saved[-1] > 0


def test_power_domain_a_gang_without_room_is_stopped_whole_and_runs_in_another_region(
    runs: dict[str, Run],
) -> None:
    result, events = runs["power-domain"]
    down, _ = fault_window(events, "down", "up")
    (lost,) = decision_events(events, "cm.job-lost")
    assert lost.t_us == down and lost.fields == {"workload": "tagger", "job": "trainer"}
    # Its healthy preprocessing job was stopped before the workload was queued again.
    released = [
        e for e in store_events(events, "fleet.release", "tagger") if e.state == "STOPPED"
    ]  # fmt: skip
    requeued = next(
        e for e in store_events(events, "queue.transition", "tagger")
        if e.to_state == "PENDING" and e.result
    )  # fmt: skip
    assert {e.job_name for e in released} == {"trainer", "preprocess"}
    assert all(e.t_us <= requeued.t_us for e in released)
    (award,) = [a for a in awards(events, "tagger") if a.t_us > down]
    assert award.winner == "us-west"
    # Both jobs of the gang start there, each from its own last checkpoint.
    again = [s for s in job_starts(events, "tagger") if s.t_us > down]
    assert sorted(s.job for s in again) == ["preprocess", "trainer"]
    for _, job, cluster, attempt, resumed in again:
        assert cluster == "us-west/c0" and attempt == 2
        saved = [p for ct, _, p in checkpoints(events, "tagger", job) if ct < down]
        assert resumed == saved[-1] > 0
    assert workload_states(result)["tagger"] == "DONE"
    # The gang away from the dead fault domain never restarted.
    assert [s.attempt for s in job_starts(events, "ranker")] == [1, 1]


def test_power_domain_ras_drops_the_dead_machines_and_takes_them_back(
    runs: dict[str, Run],
) -> None:
    _, events = runs["power-domain"]
    down, up = fault_window(events, "down", "up")
    passes = [e for e in decision_events(events, "ras.pass") if e.region == "us-east"]
    assert passes[0].buffer_met  # 16 machines for 12 intended
    after_down = next(p for p in passes if p.t_us > down)
    after_up = next(p for p in passes if p.t_us > up)
    assert not after_down.buffer_met
    assert after_up.buffer_met
    memberships = [e for e in store_events(events, "fleet.membership") if e.result]
    dropped = next(e for e in memberships if e.t_us > down)
    back = next(e for e in memberships if e.t_us > up)
    fd_hosts = {h for h, _, _ in dropped.moves}
    assert fd_hosts and all(h.startswith(FD + "/") for h in fd_hosts)
    assert all(new is None for _, _, new in dropped.moves)
    assert {h for h, _, new in back.moves if new == "us-east/c0"} == fd_hosts


# ---- where each attempt starts from (every scenario) --------------------------------
class FromScratchCM(ClusterManager):
    """Launches every agent from zero progress, whatever checkpoint the store handed out."""

    def launch(self, key: tuple[str, str], job: JobSpec, priority: int, attempt: int,
               saved_us: int, *rest: Any) -> None:  # fmt: skip
        super().launch(key, job, priority, attempt, 0, *rest)


@pytest.mark.parametrize("name", NAMES)
def test_every_agent_starts_from_what_the_store_handed_out(runs: dict[str, Run], name: str) -> None:
    _, events = runs[name]
    handed = [
        (e.t_us, e.workload_id, e.job_name, answer.attempt, answer.from_us)
        for e in store_events(events, "fleet.start")
        if (answer := started(e))
    ]
    launched = [
        (e.t_us, e.workload, e.job, e.attempt, e.progress_us)
        for e in decision_events(events, "cm.agent-start")
    ]
    assert launched == handed
    # Some attempt resumed from a checkpoint, in the scenarios that restart jobs.
    assert any(p > 0 for *_, p in launched) == (name != "wan-partition-migration")


def test_a_cm_launching_a_moved_job_from_scratch_is_caught_when_it_launches(
    tmp_path: Path,
) -> None:
    register_system(MastSystem("mast-from-scratch", cm=FromScratchCM))

    def broken(raw: dict[str, Any]) -> None:
        raw["system"]["kind"] = "mast-from-scratch"
        raw["duration"] = "55m"  # past the failure at 50 m

    result, events = run_builtin("power-domain", tmp_path / "p.db", broken)
    (moved,) = decision_events(events, "cm.job-moved")
    caught = [v for v in result.violations if v[2] == "progress" and "agent launched" in v[3]]
    assert caught and caught[0][1] == moved.t_us
    assert caught[0][3] == (
        f"captioner/trainer attempt 2: agent launched from {format_us(0)} of progress, "
        f"but the last committed checkpoint is {format_us(moved.from_us)}"
    )
