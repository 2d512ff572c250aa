"""The built-in outage scenarios: what each exists to show, read back from its trace.

`wan-partition-migration` cuts the WAN out of the data lake while two big
on-demand copies run; `region-outage` takes a whole region down for an
hour; `power-domain` takes a fault domain of machines down at once. Each
test finds the facts it judges in the trace (faults, flows, store events,
decisions) and the run database, never in the scenario file alone. Each
scenario runs once per module (about two seconds each).
"""

from __future__ import annotations

import asyncio
import sqlite3
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.common.cm.manager import ClusterManager
from actors.mast.system import MastSystem
from emulator.registry import builtin_scenarios, load_plugins, register_system
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import convert_scenario
from emulator.trace import TraceEvent
from emulator.units import format_us
from store.mast.records import JobSpec
from tests.conftest import trace_events

load_plugins()
NAMES = ("wan-partition-migration", "region-outage", "power-domain")
MIN = 60_000_000
H = 60 * MIN
TB = 10**12
WAN_BYTES_S = 12.5e9  # the default 100 Gb/s per region pair
Run = tuple[RunResult, list[TraceEvent]]


def raw_builtin(name: str) -> dict[str, Any]:
    return tomllib.loads(builtin_scenarios()[name].read_text(encoding="utf-8"))


def run_raw(raw: dict[str, Any], out: Path) -> Run:
    text = msgspec.json.encode(raw).decode()
    plan = plan_run(convert_scenario(raw, raw["name"]), text, raw["name"])
    result = asyncio.run(execute(plan, seed=raw.get("seed", 1), out=out))

    return result, trace_events(out)


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
def stored(events: list[TraceEvent], name: str) -> list[TraceEvent]:
    """Store events of one repository function (payload: [args, result])."""
    return [e for e in events if e.kind == "store" and e.type == name]


def decided(events: list[TraceEvent], name: str) -> list[TraceEvent]:
    return [e for e in events if e.kind == "decision" and e.type == name]


def starts(events: list[TraceEvent], workload: str) -> list[tuple[int, str, str, int, int]]:
    """(t, job, cluster, attempt, resumed from µs) of every job start of `workload`."""
    return [
        (e.t_us, args[3], args[4], result[0], result[1])
        for e in stored(events, "fleet.start")
        for args, result in [e.payload]
        if args[2] == workload and result
    ]


def checkpoints(events: list[TraceEvent], workload: str, job: str) -> list[tuple[int, int, int]]:
    """(t, attempt, progress µs) of every checkpoint of one job that the store took."""
    return [
        (e.t_us, args[3], args[4])
        for e in stored(events, "fleet.checkpoint")
        for args, ok in [e.payload]
        if args[1] == workload and args[2] == job and ok
    ]


def awards(events: list[TraceEvent], workload: str) -> list[TraceEvent]:
    return [e for e in decided(events, "auction.award") if e.payload["workload"] == workload]


def states(result: RunResult) -> dict[str, str]:
    with sqlite3.connect(result.out) as c:
        return dict(c.execute("SELECT id, state FROM workloads").fetchall())


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
        if e.type == "start":
            fid, src, dst, nbytes, _ = e.payload
            out[fid] = {"t": e.t_us, "src": src, "dst": dst, "bytes": nbytes, "moved": None}
        elif e.type == "cancel":
            fid, moved = e.payload
            out[fid].update(moved=moved, ended=e.t_us)
        elif e.type == "done":
            out[e.payload].update(moved=out[e.payload]["bytes"], ended=e.t_us)
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
    during = [e.payload[0][1] for e in stored(events, "migration.progress") if cut < e.t_us < heal]
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
        e.payload for e in decided(events, "migration.on-demand")
        if e.payload["workload"] == "archive-scan"
    ]  # fmt: skip
    assert asked and all(a["region"] is None for a in asked)
    final = states(result)
    assert final["image-tagger"] == final["archive-scan"] == "WAITING_DATA"


def test_wan_the_workload_waiting_for_its_data_runs_once_it_lands(runs: dict[str, Run]) -> None:
    result, events = runs["wan-partition-migration"]
    (landed,) = [
        e for e in stored(events, "migration.done") if e.payload[1] and e.payload[1][0] == "clicks"
    ]
    waits = [e for e in decided(events, "auction.none") if e.payload["workload"] == "clicks-ranker"]
    assert waits and waits[0].payload["state"] == "WAITING_DATA"
    assert all(w.t_us < landed.t_us for w in waits)
    ((t, job, cluster, attempt, _),) = starts(events, "clicks-ranker")
    assert landed.t_us < t < landed.t_us + 2 * MIN  # the next GMS pass
    assert (job, cluster, attempt) == ("trainer", "us-east/c0", 1)
    assert states(result)["clicks-ranker"] == "DONE"
    # Work whose data was local never waited.
    assert starts(events, "feature-check")[0][0] < MIN


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
    (t, *_), *_ = starts(events, "image-tagger")
    assert t > 24 * H
    assert states(result)["image-tagger"] == "DONE"


# ---- region-outage --------------------------------------------------------------------------
def test_region_outage_work_with_a_dr_replica_runs_in_the_other_region_meanwhile(
    runs: dict[str, Run],
) -> None:
    result, events = runs["region-outage"]
    down, up = fault_window(events, "down", "up")
    (award,) = awards(events, "logs-adhoc")
    assert down < award.t_us < up
    assert award.payload["winner"] == "us-west" and set(award.payload["bids"]) == {"us-west"}
    ((t, _, cluster, _, _),) = starts(events, "logs-adhoc")
    assert down < t < up and cluster.startswith("us-west/")
    assert states(result)["logs-adhoc"] == "DONE"


def test_region_outage_work_whose_data_is_only_there_waits_for_the_region(
    runs: dict[str, Run],
) -> None:
    _, events = runs["region-outage"]
    down, up = fault_window(events, "down", "up")
    tried = [e for e in decided(events, "auction.none") if e.payload["workload"] == "ads-adhoc"]
    assert tried and all(down < e.t_us < up for e in tried)
    (award,) = awards(events, "ads-adhoc")
    assert up < award.t_us < up + 2 * MIN and award.payload["winner"] == "us-east"


def test_region_outage_the_region_is_used_again_once_back(runs: dict[str, Run]) -> None:
    _, events = runs["region-outage"]
    _, up = fault_window(events, "down", "up")
    (award,) = awards(events, "logs-late")
    assert award.t_us > up and set(award.payload["bids"]) == {"us-east", "us-west"}
    assert award.payload["winner"] == "us-east"
    # The job that died with the region's machines and whose data has no replica
    # elsewhere ran again there, from the last checkpoint it saved before the
    # power went. The region's CM released the dead attempt as it came back
    # (its workload had been queued again meanwhile), and restarted nothing.
    first, again = starts(events, "ads-train")
    assert first[2] == again[2] == "us-east/c0" and again[3] == first[3] + 1
    assert up < again[0] < up + 2 * MIN
    saved = [p for t, _, p in checkpoints(events, "ads-train", "trainer") if t < up]
    assert saved and again[4] == saved[-1] > 0
    (gone,) = decided(events, "cm.dispatch-gone")
    assert gone.t_us == up
    assert gone.payload == {"workload": "ads-train", "job": "trainer", "attempt": 1}
    assert not decided(events, "cm.agent-lost")


def test_region_outage_nothing_is_lost(runs: dict[str, Run]) -> None:
    result, _ = runs["region-outage"]
    assert set(states(result).values()) == {"DONE"}
    assert len(states(result)) == len(raw_builtin("region-outage")["system"]["workload_list"])


def test_region_outage_running_work_with_a_dr_replica_moves_to_the_other_region(
    runs: dict[str, Run],
) -> None:
    result, events = runs["region-outage"]
    down, up = fault_window(events, "down", "up")
    # The GMS gives the region up once its RMS and CM leases have been expired
    # for `region_lost_after` (10 min by default), at its next pass (every minute).
    (lost,) = decided(events, "gms.region-lost")
    assert lost.payload["region"] == "us-east"
    assert sorted(w for w, _ in lost.payload["workloads"]) == ["ads-train", "logs-train"]
    dark = lost.payload["dark_since_us"]
    assert down < dark <= down + 30 * 1_000_000  # the last lease ran out (ttl 30 s)
    assert dark + 10 * MIN <= lost.t_us < dark + 11 * MIN
    requeued = [
        e for e in stored(events, "queue.transition")
        if e.payload[0][0] == "logs-train" and e.payload[0][2] == "PENDING" and e.payload[1]
    ]  # fmt: skip
    assert [e.t_us for e in requeued] == [lost.t_us]
    # In the same pass it runs again in us-west, on the DR replica, from the
    # checkpoint it saved at 20 min; it never runs in us-east again.
    first, moved = starts(events, "logs-train")
    assert first[2] == "us-east/c0" and moved[2] == "us-west/c0"
    assert lost.t_us < moved[0] < lost.t_us + MIN and down < moved[0] < up
    assert moved[3] == 2 and moved[4] == 20 * MIN
    assert states(result)["logs-train"] == "DONE"


# ---- power-domain ---------------------------------------------------------------------------
FD = "us-east/dc0/fd2"


def test_power_domain_a_job_restarts_from_its_checkpoint_on_the_spare_machines(
    runs: dict[str, Run],
) -> None:
    _, events = runs["power-domain"]
    down, _ = fault_window(events, "down", "up")
    (moved,) = decided(events, "cm.job-moved")
    assert moved.t_us == down and moved.payload["workload"] == "captioner"
    first, again = [e for e in stored(events, "fleet.start") if e.payload[0][2] == "captioner"]
    old_hosts = {h for h, _ in first.payload[0][6]}
    new_hosts = {h for h, _ in again.payload[0][6]}
    assert all(h.startswith(FD + "/") for h in old_hosts)
    # The spares: healthy machines of the same cluster that no job held.
    held = {
        h
        for e in stored(events, "fleet.start")
        if e.t_us < down and e.payload[0][2] != "captioner"
        for h, _ in e.payload[0][6]
    }
    assert new_hosts.isdisjoint(held) and not any(h.startswith(FD) for h in new_hosts)
    assert again.payload[0][4] == "us-east/c0"
    saved = [p for t, a, p in checkpoints(events, "captioner", "trainer") if t < down]
    assert again.payload[1] == [2, saved[-1]] and saved[-1] > 0


def test_power_domain_a_gang_without_room_is_stopped_whole_and_runs_in_another_region(
    runs: dict[str, Run],
) -> None:
    result, events = runs["power-domain"]
    down, _ = fault_window(events, "down", "up")
    (lost,) = decided(events, "cm.job-lost")
    assert lost.t_us == down and lost.payload == {"workload": "tagger", "job": "trainer"}
    # Its healthy preprocessing job was stopped before the workload was queued again.
    released = [
        e for e in stored(events, "fleet.release")
        if e.payload[0][2] == "tagger" and e.payload[0][4] == "STOPPED"
    ]  # fmt: skip
    requeued = next(
        e for e in stored(events, "queue.transition")
        if e.payload[0][0] == "tagger" and e.payload[0][2] == "PENDING" and e.payload[1]
    )  # fmt: skip
    assert {e.payload[0][3] for e in released} == {"trainer", "preprocess"}
    assert all(e.t_us <= requeued.t_us for e in released)
    (award,) = [a for a in awards(events, "tagger") if a.t_us > down]
    assert award.payload["winner"] == "us-west"
    # Both jobs of the gang start there, each from its own last checkpoint.
    again = [s for s in starts(events, "tagger") if s[0] > down]
    assert sorted(s[1] for s in again) == ["preprocess", "trainer"]
    for _, job, cluster, attempt, resumed in again:
        assert cluster == "us-west/c0" and attempt == 2
        saved = [p for ct, _, p in checkpoints(events, "tagger", job) if ct < down]
        assert resumed == saved[-1] > 0
    assert states(result)["tagger"] == "DONE"
    # The gang away from the dead fault domain never restarted.
    assert [s[3] for s in starts(events, "ranker")] == [1, 1]


def test_power_domain_ras_drops_the_dead_machines_and_takes_them_back(
    runs: dict[str, Run],
) -> None:
    _, events = runs["power-domain"]
    down, up = fault_window(events, "down", "up")
    passes = [e for e in decided(events, "ras.pass") if e.payload["region"] == "us-east"]
    assert passes[0].payload["buffer_met"]  # 16 machines for 12 intended
    after_down = next(p for p in passes if p.t_us > down)
    after_up = next(p for p in passes if p.t_us > up)
    assert not after_down.payload["buffer_met"]
    assert after_up.payload["buffer_met"]
    memberships = [e for e in stored(events, "fleet.membership") if e.payload[1]]
    dropped = next(e for e in memberships if e.t_us > down)
    back = next(e for e in memberships if e.t_us > up)
    fd_hosts = {h for h, _, _ in dropped.payload[0][2]}
    assert fd_hosts and all(h.startswith(FD + "/") for h in fd_hosts)
    assert all(new is None for _, _, new in dropped.payload[0][2])
    assert {h for h, _, new in back.payload[0][2] if new == "us-east/c0"} == fd_hosts


# ---- where each attempt starts from (every scenario) --------------------------------
class FromScratchCM(ClusterManager):
    """Launches every agent from zero progress, whatever checkpoint the store handed out."""

    def _launch(self, key: tuple[str, str], job: JobSpec, priority: int, attempt: int,
                saved_us: int, *rest: Any) -> None:  # fmt: skip
        super()._launch(key, job, priority, attempt, 0, *rest)


@pytest.mark.parametrize("name", NAMES)
def test_every_agent_starts_from_what_the_store_handed_out(runs: dict[str, Run], name: str) -> None:
    _, events = runs[name]
    handed = [(e.t_us, a[2], a[3], r[0], r[1]) for e in stored(events, "fleet.start")
              for a, r in [e.payload] if r]  # fmt: skip
    launched = [
        (e.t_us, p["workload"], p["job"], p["attempt"], p["progress_us"])
        for e in decided(events, "cm.agent-start")
        for p in [e.payload]
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
    (moved,) = decided(events, "cm.job-moved")
    caught = [v for v in result.violations if v[2] == "progress" and "agent launched" in v[3]]
    assert caught and caught[0][1] == moved.t_us
    assert caught[0][3] == (
        f"captioner/trainer attempt 2: agent launched from {format_us(0)} of progress, "
        f"but the last committed checkpoint is {format_us(moved.payload['from_us'])}"
    )
