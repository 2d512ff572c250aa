"""gms: a region dark too long is given up, and everything agrees once it is back.

Stories on `region-outage` (us-east, holding `logs` with a DR replica in
us-west and `ads` alone, goes dark at 30 min), with the outage shortened or
replaced; the repository rules (`store/mast/fleet.py`) on a bare store. A broken
component is run next to each rule to show the checkers catch it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import msgspec

from actors.common.cm.manager import ClusterManager
from actors.common.cm.recovery import CMRecovery
from actors.mast.gms import GlobalScheduler
from actors.mast.rms import RMSParams
from actors.mast.system import MastSystem
from emulator.registry import register_system
from emulator.units import MIN
from store import Store, leases
from store.mast import fleet, queue
from store.mast.records import DynamicCluster, JobSpec, Machine, Tenant, WorkloadSpec
from store.mast.schema import MAST_SCHEMA
from tests.support.builtin import Run, raw_builtin, run_raw
from tests.support.dsl import workload_states
from tests.support.trace import decision_events, delivered, events_of, job_starts, store_events


def outage(tmp_path: Path, faults: list[dict[str, Any]], kind: str = "mast") -> Run:
    raw = raw_builtin("region-outage")
    raw["faults"] = faults
    raw["system"]["kind"] = kind
    return run_raw(raw, tmp_path / "run.db")


SHORT = [{"action": "down", "at": "30m", "node": "region us-east", "duration": "20m"}]
# Both RMS instances of us-east die for 20 min; its CMs, machines and jobs live on.
RMS_ONLY = [
    {"action": "crash", "at": "30m", "target": "all of rms/us-east", "restart_after": "20m"}
]


def told_gms(events: list[Any], region: str) -> list[dict[str, Any]]:
    """The messages an RMS of `region` got through to the GMS (unwrapped from `Reliable`)."""
    out = []
    for e in events_of(events, "deliver"):
        if e.src.startswith(f"rms/{region}/") and e.dst.startswith("gms"):
            out.append(e.msg["msg"] if e.msg.get("type") == "Reliable" else e.msg)
    return out


# ---- the region comes back while the work it lost runs elsewhere ---------------------
def test_a_region_back_frees_what_its_dead_jobs_left_and_adopts_none_of_it(
    tmp_path: Path,
) -> None:
    result, events = outage(tmp_path, SHORT)
    assert result.status == "ok" and result.violations == []
    (lost,) = decision_events(events, "gms.region-lost")
    (moved,) = [s for s in job_starts(events, "logs-train") if s.t_us > lost.t_us]
    up = 50 * MIN
    assert moved.cluster == "us-west/c0" and moved.t_us < up
    # Back at 50 min, logs-train still runs in us-west: its old allocations on
    # us-east's machines (4 machines × 8 GPUs) are freed by us-east's CM.
    freed = [e for e in store_events(events, "fleet.leftovers") if e.result]
    assert [e.t_us for e in freed] == [up]
    assert sorted({(w, j) for _, w, j in freed[0].result}) == [("logs-train", "trainer")]
    first_hosts = {
        h
        for e in store_events(events, "fleet.start", "logs-train")
        if e.cluster == "us-east/c0"
        for h, _ in e.gpus
    }
    assert {h for h, _, _ in freed[0].result} == first_hosts and len(first_hosts) == 4
    # Nothing of it runs in us-east again, and us-east's RMS says nothing of
    # the dispatch it held before the outage.
    assert [s.cluster for s in job_starts(events, "logs-train")] == ["us-east/c0", "us-west/c0"]
    after = [e for e in events if e.t_us >= up]
    assert [m for m in told_gms(after, "us-east") if m.get("workload_id") == "logs-train"] == []
    assert set(workload_states(result).values()) == {"DONE"}
    with sqlite3.connect(result.out) as c:
        assert c.execute("SELECT count(*) FROM allocations").fetchone() == (0,)


class RestartingRecovery(CMRecovery):
    """Takes every dispatch for standing, whatever became of its workload."""

    async def dispatch_stands(self, key: tuple[str, str], attempt: int) -> bool:
        return True

    async def drop_gone(self, key: tuple[str, str]) -> None:
        return None


class RestartingCM(ClusterManager):
    """Restarts every job it rebuilds whose agent is gone, whatever became of its workload."""

    Recovery = RestartingRecovery


def test_a_cm_back_that_restarts_work_given_up_is_caught(tmp_path: Path) -> None:
    register_system(MastSystem("mast-restarting-cm", cm=RestartingCM))
    result, events = outage(tmp_path, SHORT, kind="mast-restarting-cm")
    # ads-train (no DR replica) waits in the queue; the broken CM restarts its
    # dead job in us-east anyway, and the workload is queued with a job running.
    again = [s for s in job_starts(events, "ads-train") if s.t_us >= 50 * MIN]
    assert again and again[0].cluster == "us-east/c0"
    assert any(
        v[2] == "gang" and v[3].startswith("ads-train went to") and "still hold machines" in v[3]
        for v in result.violations
    ), result.violations


# ---- a region whose RMS alone is down is not dark ------------------------------------
class RmsOnlyGMS(GlobalScheduler):
    """Takes a region for dark as soon as its RMS role has no leader (its CMs are not asked)."""

    async def _requeue_lost_regions(self) -> None:
        self.region_roles = {r: roles[:1] for r, roles in self.region_roles.items()}
        await super()._requeue_lost_regions()


def test_a_region_whose_rms_alone_is_down_keeps_its_work(tmp_path: Path) -> None:
    result, events = outage(tmp_path, RMS_ONLY)
    assert result.status == "ok" and result.violations == []
    assert decision_events(events, "gms.region-lost") == []
    # Its jobs ran on, each once, where they started.
    for workload in ("logs-train", "ads-train"):
        assert [(s.cluster, s.attempt) for s in job_starts(events, workload)] == [("us-east/c0", 1)]
    assert set(workload_states(result).values()) == {"DONE"}


def test_a_gms_giving_up_a_region_whose_cms_lead_is_caught(tmp_path: Path) -> None:
    register_system(MastSystem("mast-rms-only-gms", gms=RmsOnlyGMS))
    result, events = outage(tmp_path, RMS_ONLY, kind="mast-rms-only-gms")
    (lost, *_) = decision_events(events, "gms.region-lost")
    # logs-train now runs twice: on in us-east, and again in us-west.
    assert [s.cluster for s in job_starts(events, "logs-train")] == ["us-east/c0", "us-west/c0"]
    caught = [v for v in result.violations if v[2] == "auction"]
    assert caught and caught[0][1] == lost.t_us
    assert "us-east given up as dark" in caught[0][3] and "cm/us-east/c0" in caught[0][3]


# ---- the repository rules -----------------------------------------------------------
EAST = [
    Machine(host=f"east/m{i}", region="east", rack="east/r0", fault_domain="east/fd0",
            gpu_type="A100", gpus=8, cpu_cores=64, memory_gb=512, cluster="east/c0")
    for i in range(2)
]  # fmt: skip
WEST = [
    Machine(host="west/m0", region="west", rack="west/r0", fault_domain="west/fd0",
            gpu_type="A100", gpus=8, cpu_cores=64, memory_gb=512, cluster="west/c0")
]  # fmt: skip
SPEC = WorkloadSpec(
    id="w",
    tenant="t",
    submit_at_us=0,
    jobs=(JobSpec(name="j", gpu_type="A100", gpus=8, work_us=10**9),),
)


async def start(store: Store, fence: queue.Fence, t: int, host: str, wid: str = "w") -> Any:
    cluster = fence.role.removeprefix("cm/")
    return await fleet.start_job(store, fence, t, wid, "j", cluster, 1, [(host, 8)], [])


async def _fleet(store: Store) -> tuple[queue.Fence, queue.Fence]:
    await queue.put_tenants(store, [Tenant(name="t", priority=1, gpu_quota=100, cpu_quota=100)])
    await fleet.put_clusters(
        store,
        [DynamicCluster(id=c, region=c.split("/")[0], ml=True, intended_machines=2)
         for c in ("east/c0", "west/c0")],
    )  # fmt: skip
    await fleet.put_machines(store, EAST + WEST)
    await queue.submit(store, SPEC, 1, 0)
    fences = []
    for cluster in ("east/c0", "west/c0"):
        lease = await leases.acquire(store, f"cm/{cluster}", f"cm/{cluster}/0", 0, 10**12)
        assert lease is not None
        fences.append(queue.Fence(f"cm/{cluster}", f"cm/{cluster}/0", lease.epoch))
    return fences[0], fences[1]


def test_store_an_attempt_replaced_elsewhere_leaves_a_leftover_only_its_cm_frees(
    tmp_path: Path,
) -> None:
    async def story() -> None:
        async with Store.open_ctx(tmp_path / "s.db", (MAST_SCHEMA,)) as store:
            east, west = await _fleet(store)
            assert await start(store, east, 10, "east/m0") == (1, 0)
            # The job starts again in west (its region given up): the old allocation stays.
            assert await start(store, west, 20, "west/m0") == (2, 0)
            row = await fleet.job(store, "w", "j")
            assert row is not None and (row.cluster, row.attempt) == ("west/c0", 2)
            # east's CM may no longer end attempt 1, nor move the row's state.
            assert not await fleet.release_job(store, east, 30, "w", "j", "STOPPED", 1)
            assert not await fleet.set_job_state(store, east, 30, "w", "j", "RUNNING", 1)
            # The left-over keeps east/m0 taken, and the job cannot start on it again.
            assert await start(store, east, 40, "east/m0", wid="x") is None
            assert await start(store, east, 40, "east/m0") is None
            # west's CM frees nothing of east's; east's frees exactly the left-over.
            assert await fleet.free_leftovers(store, west, 50, "west/c0") == []
            assert await fleet.free_leftovers(store, east, 50, "east/c0") == [("east/m0", "w", "j")]
            assert [a.host for a in await fleet.allocations(store, "west/c0")] == ["west/m0"]
            assert await fleet.allocations(store, "east/c0") == []
            # The current attempt ends normally.
            assert await fleet.release_job(store, west, 60, "w", "j", "DONE", 2)

    asyncio.run(story())


def test_store_a_machine_in_transit_is_not_a_leftover(tmp_path: Path) -> None:
    async def story() -> None:
        async with Store.open_ctx(tmp_path / "s.db", (MAST_SCHEMA,)) as store:
            east, west = await _fleet(store)
            assert await start(store, east, 10, "east/m1") == (1, 0)
            # RAS moves east/m1 to west/c0 while the job (current attempt) holds it.
            ras = await leases.acquire(store, "ras/east", "ras/east/0", 20, 10**12)
            assert ras is not None
            fence = queue.Fence("ras/east", "ras/east/0", ras.epoch)
            moves = [("east/m1", "east/c0", "west/c0")]
            assert await fleet.set_membership(store, fence, 20, moves, {})
            assert await fleet.free_leftovers(store, west, 30, "west/c0") == []
            assert [a.host for a in await fleet.allocations(store, "west/c0")] == ["east/m1"]
            # A dispatch that still stands is reported with its auction; one queued again is not.
            standing = await fleet.dispatches(store, "east/c0", "east", fleet.LIVE_JOB_STATES)
            assert [(r.job, a) for r, a in standing] == [("j", None)]  # w is PENDING

    asyncio.run(story())


# Found by `mastemu explore region-outage --seed 2027`: every RMS of us-east paused
# through the dark spell, its CM too. ads-train finished at 2h13m, but its end never
# reached an RMS; the GMS gave the region up at 2h30m (ads-train back to PENDING). The
# RMS leader resumed at 2h39m05s under a new epoch that nobody else had led, so it kept
# its memory (ads-train running under auction 106), won ads-train again (auction 128),
# and took the old attempt's end, resent by the CM, for the new dispatch's: it reported
# the dispatch failed while the new attempt had started (gang violated).
PAUSED_THROUGH = [
    {"action": "down", "at": "30m", "node": "region us-east", "duration": "1h"},
    {"action": "pause", "at": "2h10m3.331957s", "target": "all of rms/us-east",
     "duration": "29m2.396761s"},
    {"action": "pause", "at": "2h18m58.396772s", "target": "all of cm/us-east/c0",
     "duration": "20m"},
    {"action": "pause", "at": "2h38m58.661177s", "target": "leader of cm/us-east/c0",
     "duration": "3m1.338823s"},
]  # fmt: skip


def test_an_rms_that_led_through_the_dark_spell_forgets_the_attempts_given_up(
    tmp_path: Path,
) -> None:
    result, events = outage(tmp_path, PAUSED_THROUGH)
    assert result.status == "ok" and result.violations == []
    lost = decision_events(events, "gms.region-lost")
    given_up = {(w, a) for e in lost for w, a in e.workloads}
    superseded = {e.workload: (e.auction, e.by) for e in decision_events(events, "rms.superseded")}
    # Each workload given up and won back by us-east: its old attempt is forgotten.
    assert superseded and all((w, old) in given_up for w, (old, _new) in superseded.items())
    # The old attempt's end, resent once the CM came back, is dropped, not taken as the new one's.
    stale = [(e.workload, e.job, e.auction) for e in decision_events(events, "rms.stale-end")]
    assert ("ads-train", "trainer", 106) in stale
    assert workload_states(result)["ads-train"] == "DONE"


# Found by explore on power-domain, against the first version of the rule above: the
# RMS leader of us-east crashes as tagger's award (auction 3) is sent, and the GMS
# leader pauses for 6m25s. The new GMS leader awards tagger again (auction 4), which
# runs; at 6m35s the deposed GMS wakes and resends its award 3. Taken as superseding
# auction 4, it stopped the running gang, and tagger stayed RUNNING with nothing
# running (no-lost-workload at the end).
STALE_AWARD = [
    {"action": "crash", "at": "10.520511s", "target": "leader of rms/us-east",
     "restart_after": "4m39.285114s"},
    {"action": "pause", "at": "11.000231s", "target": "leader of gms",
     "duration": "6m24.781341s"},
]  # fmt: skip


def test_an_award_resent_by_a_deposed_gms_supersedes_no_later_attempt(tmp_path: Path) -> None:
    raw = raw_builtin("power-domain")
    raw["faults"] = STALE_AWARD
    result, events = run_raw(raw, tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    awards = [d for d in delivered(events, "Award") if d["workload_id"] == "tagger"]
    assert [a["auction_id"] for a in awards][-1] == 3  # the late resend came
    assert decision_events(events, "rms.superseded") == []
    assert workload_states(result)["tagger"] == "DONE"


# The RMSs and the CM of us-east paused 25 min, no hardware fault: the GMS gives the
# region up at 31m10s and logs-train (32 GPUs) starts again in us-west. The RMS leader
# resumes its epoch with its memory kept; it used to let attempt 1 run on in us-east to
# its natural end at 61m44s, beside attempt 2.
PAUSED_RMS_AND_CM = [
    {"action": "pause", "at": "20m", "target": "all of rms/us-east", "duration": "25m"},
    {"action": "pause", "at": "20m", "target": "all of cm/us-east/c0", "duration": "25m"},
]


def test_a_resumed_rms_stops_the_gangs_the_gms_gave_up_meanwhile(tmp_path: Path) -> None:
    result, events = outage(tmp_path, PAUSED_RMS_AND_CM)
    assert result.status == "ok" and result.violations == []
    (lost,) = decision_events(events, "gms.region-lost")
    given_up = {(w, a) for w, a in lost.workloads}
    forgotten = {(e.workload, e.auction) for e in decision_events(events, "rms.superseded")}
    assert ("logs-train", 2) in given_up and forgotten == given_up
    resumed_us = 45 * MIN
    exits = {e.dst: e.t_us for e in events_of(events, "exit") if e.dst.startswith("agent/")}
    # Attempt 1 stops once the RMS is back (its checkpoint, then the agent leaves),
    # while attempt 2 runs in us-west.
    assert resumed_us < exits["agent/logs-train/trainer/1"] < resumed_us + 2 * MIN
    assert [s.cluster for s in job_starts(events, "logs-train")][-1].startswith("us-west")
    assert workload_states(result)["logs-train"] == "DONE"


def test_a_dispatch_timed_out_while_its_cm_is_dark_is_not_started_by_the_given_up_attempt(
    tmp_path: Path,
) -> None:
    # us-east's RMSs are back at 45m, its CM only at 80m. ads-train's attempt 1,
    # given up at 31m10s, still runs in us-east/c0 (its CM cannot be told); the
    # RMS wins ads-train again and its dispatch times out with the CM still dark.
    # The store's live row of attempt 1 is no start of that dispatch (reported
    # started, ads-train ran with no machines for two hours: gang, no-lost-workload).
    faults = [
        {"action": "pause", "at": "20m", "target": "all of rms/us-east", "duration": "25m"},
        {"action": "pause", "at": "20m", "target": "all of cm/us-east/c0", "duration": "60m"},
    ]
    result, events = outage(tmp_path, faults)
    assert result.status == "ok" and result.violations == []
    reports = [m for m in told_gms(events, "us-east") if m.get("workload_id") == "ads-train"]
    dispatched = [(m["auction_id"], m["ok"]) for m in reports if m["type"] == "Dispatched"]
    cm_back_us = 80 * MIN
    (lost,) = decision_events(events, "gms.region-lost")
    timeout_us = next(
        int(f.default) for f in msgspec.structs.fields(RMSParams) if f.name == "dispatch_timeout"
    )
    awards = {
        e.auction: e.t_us
        for e in decision_events(events, "auction.award")
        if e.workload == "ads-train"
    }
    # Every dispatch awarded after the region was given up and timed out while the
    # CM was dark failed.
    dark = [a for a, t in awards.items() if t > lost.t_us and t + timeout_us < cm_back_us]
    assert dark and all((a, False) in dispatched for a in dark)
    assert workload_states(result)["ads-train"] == "DONE"
