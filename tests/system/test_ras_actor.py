"""ras: the RAS actor per region, and membership flowing RAS → store → CM → RMS.

The story is the built-in `ras-fault-domain` scenario (read its header): us-east
has four fault domains, fd0 the largest; ML clusters intend half of their
static split, a non-ML cluster 4 then 6 CPU machines; fd0 loses power at
1 h 40 m and comes back at 2 h 30 m. Membership and health over time are
rebuilt from the trace (the static split, then every committed
`fleet.membership` and `fleet.health`), independently of what RAS reports.
"""

from __future__ import annotations

import asyncio
import io
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from actors.common.cm.ledger import ClusterLedger
from actors.common.leadership import LeaseTiming
from actors.mast.ras import RasSettings, SpecChange, ras_wiring, specs_at
from actors.mast.system import MastParams
from actors.mast.world import RegionHardware, WorldModel, machines, static_clusters
from actors.policies.mast.ras import ClusterSpec, kind_of
from emulator.registry import builtin_scenarios, load_plugins
from emulator.run.events import named
from emulator.run.replay import check
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import (
    Duration,
    InputError,
    convert_scenario,
    decode_params,
    decode_scenario,
)
from emulator.trace import TraceEvent
from emulator.units import MIN
from store import Store, leases
from store.events import event_name
from store.mast import fleet
from store.mast.fleet import Allocation
from store.mast.queue import Fence
from store.mast.records import DynamicCluster, Machine
from store.mast.schema import MAST_SCHEMA
from tests.support.rundb import trace_events
from tests.support.trace import store_events

load_plugins()
POWER_LOSS_US = 100 * MIN
FD0 = "us-east/dc0/fd0"


# ---- the scenario, run twice -------------------------------------------------------------
def _run(out: Path) -> tuple[RunResult, list[TraceEvent]]:
    path = builtin_scenarios()["ras-fault-domain"]
    text = path.read_text()
    plan = plan_run(decode_scenario(text, str(path)), text, str(path))
    result = asyncio.run(execute(plan, seed=1, out=out))

    return result, trace_events(result.out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[RunResult, list[TraceEvent]]]:
    folder = tmp_path_factory.mktemp("ras")
    return [_run(folder / "a.db"), _run(folder / "b.db")]


@pytest.fixture(scope="module")
def story(runs: list[tuple[RunResult, list[TraceEvent]]]) -> list[TraceEvent]:
    return runs[0][1]


def _world() -> WorldModel:
    path = builtin_scenarios()["ras-fault-domain"]
    system = decode_scenario(path.read_text(), str(path)).system
    raw = {k: v for k, v in system.items() if k != "kind"}
    params = decode_params(MastParams, raw, str(path), "system")
    assert params.world_model is not None
    return params.world_model


class Fleet:
    """Membership and health as the store committed them, replayed event by event."""

    def __init__(self, world: WorldModel) -> None:
        _, ms = static_clusters(world, machines(world))
        self.machines: dict[str, Machine] = {m.host: m for m in ms}
        self.cluster: dict[str, str | None] = {m.host: m.cluster for m in ms}
        self.healthy: dict[str, bool] = dict.fromkeys(self.machines, True)

    def apply(self, e: TraceEvent) -> None:
        if e.kind != "store" or e.type not in ("fleet.membership", "fleet.health"):
            return
        write = named(e)
        if e.type == "fleet.membership" and write.result:
            for host, old, new in write.moves:
                assert self.cluster[host] == old, f"{host} moved from {old} but was elsewhere"
                self.cluster[host] = new
        elif e.type == "fleet.health":
            for host in write.hosts:
                self.healthy[host] = write.healthy

    def healthy_counts(self) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for host, c in self.cluster.items():
            if c is not None and self.healthy[host]:
                out.setdefault(c, Counter())[kind_of(self.machines[host])] += 1
        return out


def _short(fleet_: Fleet, intended: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Per cluster and kind, how many healthy machines are missing from the intent."""
    have = fleet_.healthy_counts()
    out = {
        c: {k: n - have.get(c, Counter())[k] for k, n in kinds.items()}
        for c, kinds in intended.items()
    }
    missing = {c: {k: n for k, n in ks.items() if n > 0} for c, ks in out.items()}
    return {c: ks for c, ks in missing.items() if ks}


def _passes(events: list[TraceEvent], region: str = "us-east") -> list[TraceEvent]:
    return [
        e
        for e in events
        if e.kind == "decision" and e.type == "ras.pass" and e.payload["region"] == region
    ]


# ---- the story ------------------------------------------------------------------------------
def test_ras_fault_domain_twice_gives_one_hash_and_no_violations(runs) -> None:
    (a, _), (b, _) = runs
    assert a.status == b.status == "ok"
    assert a.violations == [] and b.violations == []
    assert a.trace_hash == b.trace_hash
    out = io.StringIO()
    assert asyncio.run(check(a.out, out=out)) == 0, out.getvalue()  # offline, every checker


def test_every_cluster_keeps_its_intended_healthy_capacity_through_the_power_loss(story) -> None:
    fleet_ = Fleet(_world())
    intended: dict[str, dict[str, int]] = {}
    checked = []
    for e in story:
        if e.kind == "decision" and e.type == "ras.pass" and e.payload["region"] == "us-east":
            intended = e.payload["intended"]
        if e.type == "fleet.membership" and e.t_us > POWER_LOSS_US and len(checked) == 0:
            # Power is out, the next pass has not moved anything yet: the buffer holds.
            assert all(not fleet_.healthy[h] for h in fleet_.machines if h.startswith(FD0))
            checked.append(("before the pass", _short(fleet_, intended)))
            fleet_.apply(e)
            checked.append(("after the pass", _short(fleet_, intended)))
            assert not any(fleet_.cluster[h] for h in fleet_.machines if h.startswith(FD0))
            continue
        fleet_.apply(e)
    assert checked == [("before the pass", {}), ("after the pass", {})]
    # The clusters were spread with the buffer met before the loss (a real test of it):
    # every cluster held machines of fd0 and would have lost them without it.
    before = [p for p in _passes(story) if p.t_us < POWER_LOSS_US]
    assert before and all(p.payload["buffer_met"] for p in before)
    after = next(p for p in _passes(story) if p.t_us > POWER_LOSS_US)
    assert after.payload["shortfall"] == {}
    assert intended["us-east/c0"] == {"H100": 6, "cpu": 8}  # half the static split


def test_a_job_runs_on_a_machine_ras_moved_into_its_cluster(story) -> None:
    fleet_ = Fleet(_world())
    static = dict(fleet_.cluster)
    moved_in = []
    for e in story:
        fleet_.apply(e)
        if e.kind != "store" or e.type != "fleet.start":
            continue
        start = named(e)
        if start.result is not None:
            cluster = start.cluster
            hosts = [h for h, _ in start.gpus] + list(start.cpu_hosts)
            assert all(fleet_.cluster[h] == cluster for h in hosts)  # never another cluster's
            moved_in += [(start.workload_id, h) for h in hosts if static[h] != cluster]
    # The RMS planned on them and the CM accepted them: both views followed RAS.
    assert len(moved_in) >= 5


def test_a_spec_change_moves_machines_from_ml_clusters_to_the_non_ml_one(story) -> None:
    change = next(p for p in _passes(story) if p.t_us == 60 * MIN)
    assert change.payload["intended"]["us-east/nonml"] == {"cpu": 6}
    moves = Counter((old, new) for _, old, new in change.payload["moves"])
    to_non_ml = sum(n for (old, new), n in moves.items() if new == "us-east/nonml")
    assert to_non_ml >= 2 and all(old in ("us-east/c0", "us-east/c1") for old, _ in moves)
    commit = next(
        e for e in store_events(story, "fleet.membership") if e.t_us == 60 * MIN and e.result
    )
    assert sorted(commit.moves) == sorted(change.payload["moves"])
    # Non-ML machines have no CM: only ML clusters were told.
    told = {
        e.payload["msg"]["msg"]["cluster"]
        for e in story
        if e.kind == "deliver" and e.type == "MembershipChanged" and e.t_us // MIN == 60
    }
    assert told <= {"us-east/c0", "us-east/c1"} and told


def test_jobs_on_machines_moved_away_restart_like_after_a_failure(story) -> None:
    decisions = [e for e in story if e.kind == "decision" and e.type.startswith("cm.")]
    left = [e for e in decisions if e.type == "cm.machine-left"]
    assert left
    for e in left:
        key = (e.payload["workload"], e.payload["job"])
        after = next(
            d
            for d in decisions
            if d.seq > e.seq and (d.payload.get("workload"), d.payload.get("job")) == key
        )
        assert after.type in ("cm.job-moved", "cm.job-lost")


def test_the_store_ends_with_the_replayed_membership_and_cluster_totals(runs, story) -> None:
    result = runs[0][0]
    fleet_ = Fleet(_world())
    for e in story:
        fleet_.apply(e)
    with sqlite3.connect(result.out) as c:
        assert dict(c.execute("SELECT host, cluster FROM machines")) == fleet_.cluster
        totals = dict(c.execute("SELECT id, intended FROM clusters"))
    assert totals == {
        "us-east/c0": 14,  # H100 6 + cpu 8
        "us-east/c1": 12,  # H100 4 + cpu 8
        "us-east/nonml": 6,  # cpu 4, then 6 from 1 h
        "eu-west/c0": 8,
        "eu-west/c1": 8,
    }


# ---- specs and wiring --------------------------------------------------------------------
def _tiny_world() -> WorldModel:
    return WorldModel(
        regions=(
            RegionHardware(
                name="x",
                gpu_machines={"H100": 8},
                cpu_machines=8,
                fault_domains=2,
                machines_per_rack=4,
            ),
        ),
        clusters_per_region=2,
    )


def test_specs_follow_the_changes_due_in_file_order() -> None:
    base = [ClusterSpec(id="x/c0", intended={"H100": 4, "cpu": 2})]
    changes = [
        SpecChange(at=Duration(10), cluster="x/c0", intended={"cpu": 5}),
        SpecChange(at=Duration(10), cluster="x/c0", intended={"cpu": 3, "H100": 0}),
        SpecChange(at=Duration(20), cluster="x/c0", intended={"H100": 1}),
    ]
    assert specs_at(base, changes, 9)[0].intended == {"H100": 4, "cpu": 2}
    # Both changes at 10 apply, the later one in the file last; a 0 drops the kind.
    assert specs_at(base, changes, 10)[0].intended == {"cpu": 3}
    assert specs_at(base, changes, 20)[0].intended == {"cpu": 3, "H100": 1}


def test_wiring_off_keeps_the_static_split_and_adds_nothing() -> None:
    world = _tiny_world()
    clusters, ms = static_clusters(world, machines(world))
    wiring = ras_wiring(world, clusters, ms, RasSettings(), LeaseTiming())
    assert wiring.clusters == clusters
    assert (wiring.actors, wiring.roles, wiring.watchers) == ([], [], ())


def test_wiring_scales_the_static_split_and_adds_a_non_ml_cluster() -> None:
    # Static split: x/c0 = fd0 (H100 4, cpu 4), x/c1 = fd1 (the same).
    # share 0.6: floor(2.4) = 2 of each; non-ML: 3 CPU machines.
    world = _tiny_world()
    clusters, ms = static_clusters(world, machines(world))
    settings = RasSettings(enabled=True, share=0.6, non_ml={"cpu": 3})
    wiring = ras_wiring(world, clusters, ms, settings, LeaseTiming())
    assert wiring.clusters == [
        DynamicCluster(id="x/c0", region="x", ml=True, intended_machines=4),
        DynamicCluster(id="x/c1", region="x", ml=True, intended_machines=4),
        DynamicCluster(id="x/nonml", region="x", ml=False, intended_machines=3),
    ]
    ((address, host, _, make),) = wiring.actors
    assert (address, host, wiring.roles, wiring.watchers) == (
        "ras/x/0",
        "x/ctl2",
        ["ras/x"],
        ("ras/x/0",),
    )
    params = make().params
    assert params.managed == ("x/c0", "x/c1")
    assert [c.intended for c in params.clusters] == [
        {"H100": 2, "cpu": 2},
        {"H100": 2, "cpu": 2},
        {"cpu": 3},
    ]


# ---- the store and the views ---------------------------------------------------------------
async def test_membership_writes_are_fenced_all_or_nothing_and_strays_found(tmp_path) -> None:
    assert event_name(fleet.set_membership) == "fleet.membership"
    world = _tiny_world()
    clusters, ms = static_clusters(world, machines(world))
    gpu = [m.host for m in ms if m.gpus and m.cluster == "x/c0"]
    async with Store.open_ctx(tmp_path / "s.db", (MAST_SCHEMA,)) as store:
        await fleet.put_clusters(store, clusters)
        await fleet.put_machines(store, ms)
        lease = await leases.acquire(store, "ras/x", "ras/x/0", 0, 10 * MIN)
        assert lease is not None
        ras = Fence("ras/x", "ras/x/0", lease.epoch)
        cm = Fence("cm/x/c0", "cm/x/c0/0", 1)
        await leases.acquire(store, "cm/x/c0", "cm/x/c0/0", 0, 10 * MIN)
        assert await fleet.start_job(store, cm, 1, "w", "t", "x/c0", 3, [(gpu[0], 8)], [])
        # A move whose source is wrong changes nothing, not even the good moves before it.
        bad = [(gpu[1], "x/c0", "x/c1"), (gpu[2], "x/c1", "x/c0")]
        assert not await fleet.set_membership(store, ras, 2, bad, {"x/c0": 1})
        stale = Fence("ras/x", "ras/x/0", lease.epoch + 1)
        assert not await fleet.set_membership(store, stale, 2, bad[:1], {})
        where = {m.host: m.cluster for m, _ in await fleet.region_machines(store, "x")}
        assert (where[gpu[1]], where[gpu[2]]) == ("x/c0", "x/c0")
        # RAS moves the machine the job holds: the job is now a stray of x/c0, and x/c1
        # sees the machine in transit (no job of its own holds it).
        moves = [(gpu[0], "x/c0", "x/c1")]
        assert await fleet.set_membership(store, ras, 3, moves, {"x/c0": 7, "x/c1": 9})
        assert await fleet.strays(store, "x/c0") == [("w", "t")]
        totals = {c.id: c.intended_machines for c in await fleet.clusters(store)}
        assert totals == {"x/c0": 7, "x/c1": 9}
        view = await ClusterLedger.fetch(_StoreOnly(store), "x/c1")  # type: ignore[arg-type]
        assert view.transit == {gpu[0]} and not view.jobs and not view.usable(gpu[0])
        state = next(s for s in view.snapshot().machines if s.host == gpu[0])
        assert not state.healthy
        # Its CM lets the job go: the stray is gone, and a reload finds the machine free.
        assert await fleet.release_job(store, cm, 4, "w", "t", "STOPPED")
        assert await fleet.strays(store, "x/c0") == []
        again = await ClusterLedger.fetch(_StoreOnly(store), "x/c1", previous=view)  # type: ignore[arg-type]
        assert again.transit == set() and again.usable(gpu[0])
        assert next(s for s in again.snapshot().machines if s.host == gpu[0]).healthy


class _StoreOnly:
    """Just enough of an actor for `ClusterLedger.fetch`: store calls, run directly."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def store(self, fn: Any, *args: Any) -> Any:
        return await fn(self._store, *args)


def test_an_allocation_of_no_job_of_the_cluster_puts_its_machine_in_transit() -> None:
    m = Machine(host="h", region="x", rack="x/r", fault_domain="x/f", gpu_type="H100", gpus=8)
    view = ClusterLedger.load("c", [(m, True)], [Allocation("h", "w", "t", 8, False, 0)], [])
    assert view.transit == {"h"} and view.gpus_used["h"] == 0


@pytest.mark.parametrize(
    ("ras", "message"),
    [
        (
            {"changes": [{"at": "1h", "cluster": "us-east/c9", "intended": {"cpu": 1}}]},
            "ras.changes[0].cluster: unknown cluster 'us-east/c9'",
        ),
        (
            {"changes": [{"at": "1h", "cluster": "us-east/c0", "intended": {"h100": 1}}]},
            "ras.changes[0].intended: unknown kind 'h100'",
        ),
        (
            {"changes": [{"at": "1h", "cluster": "us-east/nonml", "intended": {"cpu": 1}}]},
            "(a nonml cluster needs ras.non_ml in its region)",
        ),
        ({"non_ml": {"cpu": 1}, "non_ml_regions": ["mars"]}, "unknown region 'mars'"),
        ({"share": 1.5}, "system.ras.share: Expected `float` <= 1.0"),
    ],
)
def test_bad_ras_settings_name_the_key(ras: dict[str, Any], message: str) -> None:
    raw = {
        "name": "x",
        "duration": "1h",
        "system": {"kind": "mast", "ras": ras | {"enabled": True}},
    }
    with pytest.raises(InputError) as caught:
        plan_run(convert_scenario(raw, "x"), "", "x")
    assert message in str(caught.value)
