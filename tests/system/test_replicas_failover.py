"""Replicated roles: a follower takes over from a leader that died, and nothing is lost.

The world of `tests/support/dsl.py` (regions east and west, one dynamic cluster
of 32 GPUs and 4 CPU machines each) with MAST's replica counts: 2 GMS
instances (gms/0 in east, gms/1 in west), 2 RMS instances per region and 3
CM instances per cluster. The lease lasts 30 s and is renewed every 10 s, so a
follower must lead at most 40 s after its leader's crash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.common.leadership import LeaseHolder
from emulator.cli.main import main
from emulator.errors import InputError
from emulator.run.runner import plan_run
from emulator.run.scenario import convert_scenario
from emulator.trace import TraceEvent
from emulator.units import MIN, H, S
from tests.support.dsl import (
    TAKEOVER_US_MAX,
    crash,
    job,
    preemption_story,
    run,
    scenario,
    states,
    workload,
)
from tests.support.rundb import read_run_db
from tests.support.trace import events_of, leaders, started_once, store_events


def two_region_story(*faults: dict[str, Any]) -> dict[str, Any]:
    """L fills east for 3 h; A (a gang) and B go to west; H arrives at 1 h."""
    raw = scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=3 * H)),
            workload("A", "lo", 5 * MIN, job(gpus=16, work=30 * MIN), job("prep", cpus=2)),
            workload("B", "hi", 20 * MIN, job(gpus=16, work=40 * MIN)),
            workload("H", "hi", 60 * MIN, job(gpus=16)),
        ],
        duration="4h",
    )
    raw["faults"] = list(faults)
    return raw


def crash_time(events: list[TraceEvent]) -> tuple[int, str]:
    (event,) = [e for e in events if e.kind == "crash"]
    return event.t_us, event.dst


def assert_takeover(events: list[TraceEvent], role: str) -> str:
    """The crashed leader's role went to another instance, in time; returns that instance."""
    t_crash, crashed = crash_time(events)
    claims = leaders(events, role)
    assert [epoch for _, _, epoch in claims] == [1, 2]
    (_, first, _), (t_new, successor, _) = claims
    assert first == crashed != successor
    assert 0 < t_new - t_crash <= TAKEOVER_US_MAX
    return successor


ALL_DONE = {"L": ("DONE", 0), "A": ("DONE", 0), "B": ("DONE", 0), "H": ("DONE", 0)}
ONCE = {"L/trainer": 1, "A/trainer": 1, "A/prep": 1, "B/trainer": 1, "H/trainer": 1}


# ---- the GMS ---------------------------------------------------------------------------------
def test_gms_leader_dies_and_the_follower_in_the_other_region_leads(tmp_path: Path) -> None:
    result, events = run(two_region_story(crash("leader of gms", "21m")), tmp_path)
    assert result.violations == []
    assert assert_takeover(events, "gms") == "gms/1"
    # H arrives after the failover: the new leader auctions it.
    (award,) = [e for e in events if e.type == "auction.award" and e.payload["workload"] == "H"]
    assert award.src == "gms/1"
    assert states(result) == ALL_DONE
    assert started_once(events, *ALL_DONE) == ONCE


def test_gms_leader_dies_mid_auction_and_the_workload_is_dispatched_once(tmp_path: Path) -> None:
    # B's auction opens at 20m10s; the bids (west is 30–150 ms away) are not in
    # when the leader dies 100 ms later. The new leader auctions B again.
    result, events = run(two_region_story(crash("leader of gms", "20m10.1s")), tmp_path)
    assert result.violations == []
    assert assert_takeover(events, "gms") == "gms/1"
    opened = [e for e in store_events(events, "auction.open", "B") if e.result]
    assert [e.src for e in opened] == ["gms/0", "gms/1"]
    awards = [e for e in store_events(events, "queue.award", "B") if e.result]
    assert [e.src for e in awards] == ["gms/1"]
    assert states(result) == ALL_DONE
    assert started_once(events, *ALL_DONE) == ONCE


def test_a_gms_leader_back_within_its_lease_leads_a_new_epoch_and_the_rmss_follow_its_scans(
    tmp_path: Path,
) -> None:
    # The leader crashes at 40m and is back 5 s later, its lease still valid. It
    # numbers its scans from 1 again: in its old epoch the RMSs, which order a
    # scan's messages by (epoch, scan), took them all for stale ones and went on
    # with the negative cache and views of the last pass they knew, for as many
    # scans as the crashed leader had made (chaos seed 52: 36 minutes).
    fault = {"action": "crash", "at": "40m", "target": "leader of gms", "restart_after": "5s"}
    result, events = run(two_region_story(fault), tmp_path)
    assert result.violations == []
    claims = leaders(events, "gms")
    assert [(holder, epoch) for _, holder, epoch in claims] == [("gms/0", 1), ("gms/0", 2)]
    passes = [e for e in events if e.type == "rms.pass" and 40 * MIN < e.t_us < 50 * MIN]
    regions = {e.payload["region"] for e in passes}
    assert regions == {"east", "west"}
    assert {e.payload["gms_epoch"] for e in passes} == {2}
    assert states(result) == ALL_DONE


# ---- an RMS ----------------------------------------------------------------------------------
def test_rms_leader_dies_while_its_plan_waits_for_a_victims_checkpoint(tmp_path: Path) -> None:
    # H preempts L at 1 h; the CM saves L's checkpoint (30 s) and the RMS leader
    # dies meanwhile. Its successor finds H dispatching with nothing started and
    # gives the dispatch up; H is auctioned again and starts once.
    raw = preemption_story(duration="5h")
    raw["faults"] = [crash("leader of rms/east", "60m10.3s")]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert assert_takeover(events, "rms/east") == "rms/east/1"
    assert started_once(events, "L", "H") == {"L/trainer": 2, "H/trainer": 1}
    assert states(result) == {"L": ("DONE", 1), "H": ("DONE", 0)}


# ---- a CM ------------------------------------------------------------------------------------
def test_cm_leader_dies_while_its_jobs_run_and_a_follower_finishes_them(tmp_path: Path) -> None:
    result, events = run(two_region_story(crash("leader of cm/west/c0", "30m")), tmp_path)
    assert result.violations == []
    successor = assert_takeover(events, "cm/west/c0")
    # A and B (running at 30 min) end under the new leader, reported by their agents.
    ends = [e for e in store_events(events, "fleet.release") if e.result]
    assert {e.src for e in ends if e.workload_id in ("A", "B")} == {successor}
    assert states(result) == ALL_DONE
    assert started_once(events, *ALL_DONE) == ONCE


def test_cm_leader_paused_past_its_lease_is_deposed_and_does_not_act(tmp_path: Path) -> None:
    # J's agent reports it finished (21 m 51 s) to a CM leader paused from
    # 21 m 45 s for 2 min. A follower leads meanwhile. The paused instance
    # leaves the report unacknowledged when it wakes (it no longer leads), so
    # the agent resends it to the role: the new leader frees J's machines.
    raw = scenario([workload("J", "lo", 0, job(gpus=32, work=20 * MIN))], regions=("east",))
    raw["duration"] = "1h"
    raw["faults"] = [
        {"action": "pause", "at": "1305s", "target": "leader of cm/east/c0", "duration": "2m"}
    ]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    claims = leaders(events, "cm/east/c0")
    assert [(src, epoch) for _, src, epoch in claims] == [("cm/east/c0/0", 1), ("cm/east/c0/1", 2)]
    (release,) = [e for e in store_events(events, "fleet.release", "J") if e.result]
    assert release.src == "cm/east/c0/1" and release.state == "DONE"
    woke = next(e.t_us for e in events if e.kind == "unpause")
    assert not [
        e for e in events if e.src == "cm/east/c0/0" and e.t_us >= woke and e.kind == "store"
    ]
    assert any(e.reason == "not-leader" for e in events_of(events, "drop"))
    assert states(result)["J"] == ("DONE", 0)


# ---- what replicas cost and what they leave alone ---------------------------------------------
def test_followers_never_write_and_every_role_keeps_one_epoch_without_faults(
    tmp_path: Path,
) -> None:
    result, events = run(two_region_story(), tmp_path)
    assert result.violations == []
    writers = {
        e.src for e in events if e.kind == "store" and e.src.split("/")[0] in ("gms", "rms", "cm")
    }
    assert writers and all(w.endswith("/0") for w in writers)
    for role in ("gms", "rms/east", "rms/west", "cm/east/c0", "cm/west/c0"):
        assert [(src, epoch) for _, src, epoch in leaders(events, role)] == [(f"{role}/0", 1)]
    assert states(result) == ALL_DONE


def test_one_replica_per_role_is_the_unreplicated_system(tmp_path: Path) -> None:
    raw = two_region_story(crash("leader of cm/west/c0", "30m", "5m"))
    raw["system"]["replicas"] = {"gms": 1, "rms": 1, "cm": 1}
    result, events = run(raw, tmp_path)
    assert result.violations == []
    instances = {
        e.dst for e in events if e.kind == "start" and e.dst.split("/")[0] in ("gms", "rms", "cm")
    }
    assert instances == {"gms/0", "rms/east/0", "rms/west/0", "cm/east/c0/0", "cm/west/c0/0"}
    # The role waits for its one instance: the same one leads again after its restart.
    assert [src for _, src, _ in leaders(events, "cm/west/c0")] == ["cm/west/c0/0"] * 2
    assert states(result) == ALL_DONE


# ---- long handlers renew the lease ---------------------------------------------------------------
def long_scan_story() -> dict[str, Any]:
    """200 workloads no region can place: each pass holds 200 auctions of ~0.25 s (> ttl)."""
    return scenario(
        [workload(f"W{i:03d}", "lo", 0, job(gpus=64)) for i in range(200)],
        regions=("east", "west", "south"),
        duration="10m",
    )


def test_gms_keeps_its_lease_through_a_scan_longer_than_the_lease(tmp_path: Path) -> None:
    result, events = run(long_scan_story(), tmp_path)
    assert result.violations == []
    auctions = sorted(e.t_us for e in events if e.type == "auction.none")
    assert len(auctions) > 1000 and auctions[199] - auctions[0] > 30 * S  # a pass outlasts a lease
    assert [(src, epoch) for _, src, epoch in leaders(events, "gms")] == [("gms/0", 1)]


def test_a_gms_that_does_not_renew_during_a_scan_changes_epoch_every_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bug the test above guards against (quickstart showed ~90 leader changes).
    async def never(self: LeaseHolder) -> Any:
        return self.fence

    monkeypatch.setattr(LeaseHolder, "renew_if_due", never)
    _, events = run(long_scan_story(), tmp_path)
    assert len(leaders(events, "gms")) > 5


@pytest.mark.slow
def test_quickstart_without_faults_keeps_one_leader_epoch_per_role(tmp_path: Path) -> None:
    # Quickstart used to change GMS leader ~90 times in 6 h (scans outlasting the lease).
    db = tmp_path / "q.db"
    assert main(["run", "quickstart", "--out", str(db), "--no-progress"]) == 0
    _, rows = read_run_db(db)
    claims = [r.payload for r in rows if r.kind == "decision" and r.type == "lease.leader"]
    roles = [c["role"] for c in claims]
    assert len(roles) == len(set(roles)) == 10  # gms, 3 RMSs, 6 CMs
    assert {c["epoch"] for c in claims} == {1}


# ---- the parameter ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("replicas", "path"),
    [
        ({"cm": 0}, "system.replicas.cm"),
        ({"gms": 8}, "system.replicas.gms"),
        ({"rms": "2"}, "system.replicas.rms"),
        ({"ras": 2}, "system.replicas.ras"),
    ],
)
def test_a_bad_replica_count_names_its_key_path(replicas: dict[str, Any], path: str) -> None:
    raw = two_region_story()
    raw["system"]["replicas"] = replicas
    with pytest.raises(InputError) as caught:
        plan_run(convert_scenario(raw, "s.toml"), "", "s.toml")
    assert caught.value.path == path
