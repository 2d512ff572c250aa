"""mast: scripted fast-path stories on a tiny world, and broken components caught.

The world: regions east and west, each one dynamic cluster of 4 A100 machines
(32 GPUs) and 4 CPU machines. Tenants `hi` (priority 1) and `lo` (priority 5)
with quotas far above the world. Workloads and tables are scripted.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.common.cm.manager import ClusterManager
from actors.common.messages import ExecutePlan, PlanResult
from actors.mast.gms import GlobalScheduler
from actors.mast.rms import RegionalScheduler
from actors.mast.system import MastSystem
from emulator.registry import builtin_scenarios, load_plugins, register_system
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import convert_scenario
from emulator.trace import TraceEvent
from store import Store
from store.events import store_event
from store.mast.queue import FENCE, QUEUED, Fence
from tests.conftest import trace_events

load_plugins()
MIN = 60_000_000
H = 60 * MIN
CHECKERS = [
    "lease-safety",
    "allocation",
    "gang",
    "auction",
    "preemption",
    "colocation",
    "quota",
    "no-lost-workload",
    "progress",
]


def region(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "gpu_machines": {"A100": 4},
        "cpu_machines": 4,
        "datacenters": 1,
        "fault_domains": 1,
        "machines_per_rack": 4,
    }


def job(
    name: str = "trainer", *, gpus: int = 0, cpus: int = 0, work: int = H, tables=("t",)
) -> dict:
    out: dict[str, Any] = {"name": name, "work_us": work, "checkpoint_every_us": 20 * MIN}
    if gpus:
        out.update(role="trainer", gpu_type="A100", gpus=gpus)
    else:
        out.update(role="preprocess", cpu_machines=cpus)
    out["input_tables"] = list(tables)
    return out


def workload(wid: str, tenant: str, at_us: int, *jobs: dict) -> dict[str, Any]:
    return {"id": wid, "tenant": tenant, "submit_at_us": at_us, "jobs": list(jobs)}


def scenario(
    workloads: list[dict[str, Any]],
    *,
    regions: tuple[str, ...] = ("east", "west"),
    tables: list[dict[str, Any]] | None = None,
    kind: str = "mast",
    duration: str = "6h",
) -> dict[str, Any]:
    return {
        "name": "scripted",
        "duration": duration,
        "system": {
            "kind": kind,
            "world_model": {"regions": [region(r) for r in regions], "clusters_per_region": 1},
            "tenant_list": [
                {"name": "hi", "priority": 1, "gpu_quota": 10_000, "cpu_quota": 10_000},
                {"name": "lo", "priority": 5, "gpu_quota": 10_000, "cpu_quota": 10_000},
            ],
            "workload_list": workloads,
            "table_list": tables
            if tables is not None
            else [
                {
                    "name": "t",
                    "size_bytes": 1,
                    "home_region": regions[0],
                    "replicas": list(regions[1:]),
                }
            ],
            "data_placement": "home-only",
            "scan_interval": "1m",
        },
        "invariants": {"enabled": CHECKERS},
    }


def preemption_story(*, kind: str = "mast", duration: str = "2h", extra=()) -> dict[str, Any]:
    """One region of 32 GPUs: L (priority 5) fills it; at 1 h H (priority 1) needs 16 of them."""
    return scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=3 * H)),
            *extra,
            workload("H", "hi", 60 * MIN, job(gpus=16)),
        ],
        regions=("east",),
        kind=kind,
        duration=duration,
    )


def run(raw: dict[str, Any], tmp_path: Path, seed: int = 1) -> tuple[RunResult, list[TraceEvent]]:
    text = msgspec.json.encode(raw).decode()
    plan = plan_run(convert_scenario(raw, "scripted"), text, "scripted")
    result = asyncio.run(execute(plan, seed=seed, out=tmp_path / f"run-{seed}.db"))

    return result, trace_events(result.out)


def states(result: RunResult) -> dict[str, tuple[str, int]]:
    with sqlite3.connect(result.out) as c:
        return {w: (s, p) for w, s, p in c.execute("SELECT id, state, preemptions FROM workloads")}


def store_events(
    events: list[TraceEvent], name: str, workload: str | None = None
) -> list[TraceEvent]:
    out = [e for e in events if e.kind == "store" and e.type == name]
    if workload is not None:
        out = [e for e in out if workload in _ids(e)]
    return out


def _ids(e: TraceEvent) -> set[str]:
    args = e.payload[0]
    return {a for a in args if isinstance(a, str)}


def decisions(events: list[TraceEvent], type_: str) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.kind == "decision" and e.type == type_]


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
    assert sorted(e.payload[0][3] for e in starts) == ["prep", "trainer"]
    running = [
        e
        for e in store_events(events, "queue.transition", "G")
        if e.payload[0][2] == "RUNNING" and e.payload[1]
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
    release = next(
        e for e in store_events(events, "fleet.release", "L") if e.payload[0][4] == "STOPPED"
    )
    saved = [e for e in store_events(events, "fleet.checkpoint", "L") if e.payload[1]]
    h_start = store_events(events, "fleet.start", "H")[0]
    # The victim's checkpoint lands before its machines are released, and they
    # are reused only after that.
    assert any(e.seq < release.seq and e.t_us >= 60 * MIN for e in saved)
    assert release.seq < h_start.seq
    # L comes back from its checkpoint (not from zero) and finishes.
    restarts = [e for e in store_events(events, "fleet.start", "L") if e.payload[1]]
    assert [e.payload[1][0] for e in restarts] == [1, 2]
    assert restarts[1].payload[1][1] >= 60 * MIN - 10 * MIN  # minus setup time
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
@store_event("queue.award")
async def award_twice(
    store: Store, fence: Fence, now_us: int, workload_id: str, auction_id: int, region: str
) -> bool:
    """BROKEN: no compare-and-set on the workload's state."""
    await store.write(
        f"UPDATE workloads SET state = 'DISPATCHING', region = :region WHERE id = :id AND {FENCE}",
        {**fence.params(now_us), "region": region, "id": workload_id},
    )
    return True


class DoubleAwardGMS(GlobalScheduler):
    """Awards the best bid, then the runner-up as well."""

    async def _auction(self, workload_id: str, priority: int) -> None:
        await super()._auction(workload_id, priority)
        if self.fence is not None:
            await self.store(
                award_twice, self.fence, self.now_us, workload_id, 10_000 + len(workload_id), "west"
            )


class GangBreakingRMS(RegionalScheduler):
    """Reports a workload dispatched as soon as its first job started."""

    def plan_result(self, msg: PlanResult) -> None:
        d = self.dispatching.get(msg.auction_id)
        if d is not None and msg.ok and not d.results:
            self._report(msg.auction_id, msg.workload_id, True, "")
        super().plan_result(msg)


class EagerCM(ClusterManager):
    """Frees a plan's victims at once instead of waiting for their checkpoint."""

    async def execute(self, msg: ExecutePlan) -> None:
        for victim in msg.victims:
            if victim in self.running and self.fence is not None:
                await self._release(victim, "preempted", "STOPPED")
        await super().execute(msg)


def _broken(kind: str, **classes: Any) -> str:
    register_system(MastSystem(kind, **classes))
    return kind


def test_a_gms_that_awards_twice_is_caught_online_and_offline(tmp_path: Path) -> None:
    kind = _broken("mast-double-award", gms=DoubleAwardGMS)
    raw = scenario([workload("W", "hi", 0, job(gpus=8))], kind=kind, duration="20m")
    result, _ = run(raw, tmp_path)
    assert any(
        v[2] == "auction" and "awarded to west while DISPATCHING" in v[3] for v in result.violations
    )
    assert _offline(result.out, "auction")


def test_an_rms_that_breaks_the_gang_is_caught(tmp_path: Path) -> None:
    kind = _broken("mast-gang-breaker", rms=GangBreakingRMS)
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
    result, _ = run(raw, tmp_path)
    assert any(
        v[2] == "gang" and v[3].startswith("G RUNNING but jobs ['prep']") for v in result.violations
    )
    assert _offline(result.out, "gang")


def test_a_cm_that_reuses_a_victims_machines_before_its_checkpoint_is_caught(
    tmp_path: Path,
) -> None:
    kind = _broken("mast-eager-cm", cm=EagerCM)
    raw = preemption_story(kind=kind)
    result, _ = run(raw, tmp_path)
    assert any(
        v[2] == "preemption" and "before saving a checkpoint" in v[3] for v in result.violations
    )
    assert _offline(result.out, "preemption")


def test_double_allocation_is_caught_by_the_allocation_checker() -> None:
    from actors.checks.protocol import AllocationChecker

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


def _offline(db: Path, invariant: str) -> bool:
    import io

    from emulator.run.replay import check

    out = io.StringIO()
    code = asyncio.run(check(db, out=out))
    return code == 1 and f"VIOLATION {invariant}" in out.getvalue()


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
    first, second = [e for e in store_events(events, "fleet.start", "J") if e.payload[1]]
    assert [h for h, _ in first.payload[0][6]] == ["east/dc0/fd0/r0/m0"]
    assert "east/dc0/fd0/r0/m0" not in [h for h, _ in second.payload[0][6]]
    (moved,) = decisions(events, "cm.job-moved")
    # Checkpoints every 20 min of progress after setup; the failure at 70 min loses
    # what was done since the last one, and the new attempt resumes from it.
    saved = max(
        e.payload[0][4] for e in store_events(events, "fleet.checkpoint", "J") if e.t_us < 70 * MIN
    )
    assert second.payload[1] == [2, saved] and moved["from_us"] == saved > 0
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
        assert starts[0].payload[0][4] == "east/c0"


def test_a_csv_trace_is_imported_relative_to_the_scenario_file(tmp_path: Path) -> None:
    from actors.mast.workload.generator import write_csv_trace
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
class DataBlindRMS(RegionalScheduler):
    """Bids without checking that its region holds the workload's data."""

    async def _refresh(self) -> None:
        await super()._refresh()
        self.ready = _Everything()


class _Everything(set):  # type: ignore[type-arg]
    def __ge__(self, other: object) -> bool:
        return True

    def __contains__(self, item: object) -> bool:
        return True


class GenerousGMS(GlobalScheduler):
    """Believes every tenant's quota is a hundred times larger than it is."""

    async def on_start(self) -> None:
        await super().on_start()
        self.tenants = {
            n: msgspec.structs.replace(t, gpu_quota=t.gpu_quota * 100, cpu_quota=t.cpu_quota * 100)
            for n, t in self.tenants.items()
        }
        self.quotas = {n: (t.priority, t.gpu_quota, t.cpu_quota) for n, t in self.tenants.items()}


class ForgetfulGMS(GlobalScheduler):
    """Drops the news that a workload was preempted (it never re-enters the queue)."""

    async def ended(self, msg: Any) -> None:
        if msg.reason != "preempted":
            await super().ended(msg)


def test_an_rms_that_ignores_where_data_is_is_caught_by_colocation(tmp_path: Path) -> None:
    kind = _broken("mast-data-blind", rms=DataBlindRMS)
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
    result, _ = run(raw, tmp_path)
    assert any(
        v[2] == "colocation" and "/trainer started in east without ready ['t']" in v[3]
        for v in result.violations
    )
    assert _offline(result.out, "colocation")


def test_a_gms_with_a_wrong_quota_view_is_caught_by_quota(tmp_path: Path) -> None:
    kind = _broken("mast-generous", gms=GenerousGMS)
    raw = scenario(
        [workload("A", "small", 0, job(gpus=8)), workload("B", "small", 0, job(gpus=8))],
        kind=kind,
        duration="20m",
    )
    # Tenant "small" may use 8 GPUs at once: its second workload is over quota.
    raw["system"]["tenant_list"].append(
        {"name": "small", "priority": 2, "gpu_quota": 8, "cpu_quota": 0}
    )
    result, _ = run(raw, tmp_path)
    assert any(v[2] == "quota" and "ranked within quota" in v[3] for v in result.violations)
    assert _offline(result.out, "quota")


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
    first = {wid: (priority, within) for wid, priority, _c, within in ranks[0].payload[0][2]}
    # A fits the quota and keeps its tenant's priority; B would exceed it: lowest priority.
    assert first == {"A": (2, True), "B": (7, False)}


def test_a_gms_that_forgets_a_preempted_workload_is_caught_as_lost(tmp_path: Path) -> None:
    kind = _broken("mast-forgetful", gms=ForgetfulGMS)
    raw = preemption_story(kind=kind)
    result, _ = run(raw, tmp_path)
    assert any(
        v[2] == "no-lost-workload" and v[3].startswith("L is RUNNING but none of its jobs")
        for v in result.violations
    )
    assert _offline(result.out, "no-lost-workload")
