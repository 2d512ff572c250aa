"""Tetris: the slow path's daily data placement (MAST §3).

Once a day (first soon after start) the Tetris leader reads the catalog,
builds a `TetrisSnapshot` (tables with their homes and replicas; the
recurring ML and analytics jobs it knows from history; each region's GPU
supply, storage and per-application CPU caps), runs the hill climbing
(`actors.policies.mast.tetris.plan.plan_tetris`) and the extra replicas
(`actors.policies.mast.tetris.replicas.plan_replicas`, which also reads the
tables' access history: who read each table on which GPU type, first-time
workloads of the past included), records the pass, and
orders the copies from the migration service. A move copies the table to
its new home first; when the copy is ready (`ReplicaReady`) the new region
becomes the home and the old home is deleted unless it is still wanted as a
replica. Every pass and every completed move records the placement's
figures (`tetris.state`: demand/supply, colocation and training-at-home
rates) for the report.

Tetris's real-time component — answering an RMS's "does this region hold
ready replicas of these tables?" — is the catalog in the store, which the
RMSs read (`store.mast.catalog.ready_tables`).
"""

from __future__ import annotations

import msgspec

from actors.common.leadership import LeaseHolder, LeaseTiming
from actors.mast.messages import CopyOrder, ReplicaReady, ReplicateOrders
from actors.mast.warehouse import Warehouse
from actors.mast.world import WorldModel
from actors.policies.mast.tetris.cost import (
    TetrisJob,
    TetrisParams,
    TetrisRegion,
    TetrisSnapshot,
    TetrisTable,
)
from actors.policies.mast.tetris.metrics import placement_metrics
from actors.policies.mast.tetris.plan import plan_tetris
from actors.policies.mast.tetris.replicas import plan_replicas
from actors.policies.mast.tetris.settings import TetrisSettings
from emulator.actor import on
from emulator.units import US_PER_S
from store.db import Store
from store.events import store_event
from store.mast import catalog
from store.mast.records import GPUS_PER_MACHINE


class TetrisActorParams(msgspec.Struct, frozen=True, kw_only=True):
    settings: TetrisSettings
    jobs: tuple[TetrisJob, ...]
    regions: tuple[TetrisRegion, ...]
    dr: dict[str, str]  # table → its DR region
    # Access history: table → GPU type → distinct ML jobs that read it there.
    # None: the recurring ML `jobs` are all the history Tetris has.
    readers: dict[str, dict[str, int]] | None = None
    lease: LeaseTiming = LeaseTiming()


class _Pass(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: time for a daily pass."""


class _Figures(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: record the placement figures once after a burst of changes."""


# Copies finish in bursts (a pass's moves, tens of thousands at scale): the
# figures need the whole catalog and a sweep over every job, so they are
# recorded once per burst, this long after its first change, not per copy.
FIGURES_COALESCE_US = 60_000_000


@store_event("tetris.pass")
async def record_pass(
    store: Store,
    now_us: int,
    version: str,
    cost_before: float,
    cost_after: float,
    moves: int,
    replicas: int,
    bytes_planned: int,
) -> int:
    return await store.insert(
        "INSERT INTO tetris_passes (t_us, version, cost_before, cost_after, moves, replicas, "
        "bytes_planned) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (now_us, version, cost_before, cost_after, moves, replicas, bytes_planned),
    )


class Tetris(LeaseHolder):
    kind = "mast-tetris"
    Params = TetrisActorParams
    params: TetrisActorParams

    async def on_start(self) -> None:
        # Moves in flight: table → (old home, new home). Lost with a crash; the
        # next pass sees the catalog as it is and plans again.
        self.moving: dict[str, tuple[str, str, bool]] = {}
        self.figures_due = False
        self.set_timer(self.params.settings.first_pass, _Pass())
        await self.lead("tetris")

    async def _snapshot(self) -> tuple[TetrisSnapshot, dict[str, set[str]]]:
        placement = await self.store(catalog.placement)
        tables = []
        ready: dict[str, set[str]] = {}
        for name, (size, home, states) in placement.items():
            others = tuple(sorted(r for r in states if r != home))
            dr = self.params.dr.get(name)
            tables.append(
                TetrisTable(
                    name=name,
                    size_bytes=size,
                    home=home,
                    replicas=others,
                    dr_region=dr if dr in others else None,
                )
            )
            ready[name] = {r for r, s in states.items() if s == "ready"} | {home}
        snap = TetrisSnapshot(
            tables=tuple(tables), jobs=self.params.jobs, regions=self.params.regions
        )
        return snap, ready

    async def _record_state(self, snap: TetrisSnapshot, ready: dict[str, set[str]]) -> None:
        figures = placement_metrics(snap, self.params.settings.policy, ready)
        self.decision("tetris.state", figures)

    @on(_Pass)
    async def daily(self, _: _Pass) -> None:
        settings = self.params.settings
        self.set_timer(settings.interval, _Pass())
        if await self.acquire() is None:
            return
        snap, ready = await self._snapshot()
        await self._record_state(snap, ready)
        params = settings.policy
        plan = plan_tetris(snap, params)
        replicas = (
            plan_replicas(snap, plan, params, self.params.readers)
            if params.version != "tetris-v0"
            else None
        )
        orders: list[CopyOrder] = []
        best = _reader_priority(snap)
        now = self.now_us
        for m in plan.moves:
            priority = best.get(m.table, 7)
            orders.append(
                CopyOrder(
                    table=m.table,
                    dst=m.dst,
                    priority=priority,
                    deadline_us=now + _deadline_s(params, priority) * US_PER_S,
                    reason="move",
                )
            )
        keep: set[tuple[str, str]] = set()
        if replicas is not None:
            for o in replicas.orders:
                if o.keep_old_home:
                    keep.add((o.table, o.region))
                    continue
                orders.append(
                    CopyOrder(
                        table=o.table,
                        dst=o.region,
                        priority=o.priority,
                        deadline_us=now + o.deadline_hint_s * US_PER_S,
                        reason=o.reason,
                    )
                )
        for m in plan.moves:
            self.moving[m.table] = (m.src, m.dst, (m.table, m.src) not in keep)
        # Only what is not already there needs the WAN.
        sizes = {t.name: t.size_bytes for t in snap.tables}
        to_copy = [o for o in orders if o.dst not in ready[o.table]]
        pass_id = await self.store(
            record_pass,
            now,
            plan.version,
            plan.cost_before.total,
            plan.cost_after.total,
            len(plan.moves),
            len(orders) - len(plan.moves),
            sum(sizes[o.table] for o in to_copy),
        )
        self.decision(
            "tetris.pass",
            {
                "pass": pass_id,
                "version": plan.version,
                "cost_before": plan.cost_before.total,
                "cost_after": plan.cost_after.total,
                "moves": len(plan.moves),
                "replicas": len(orders) - len(plan.moves),
                "bytes_planned": plan.bytes_planned,
                "unplaced": len(replicas.unplaced) if replicas else 0,
            },
        )
        if to_copy:
            self.send_reliably(
                "migration", ReplicateOrders(tetris_pass=pass_id, orders=tuple(to_copy))
            )
        # A move to a region that already holds the table ready needs no copy.
        arrived = [m.table for m in plan.moves if m.dst in ready[m.table]]
        for table in arrived:
            await self._complete_move(table, self.moving[table][1])
        if arrived:
            self._figures_changed()

    @on(ReplicaReady)
    async def replica_ready(self, msg: ReplicaReady) -> None:
        # A completed move changes homes; any other replica changes what data is reachable.
        await self._complete_move(msg.table, msg.region)
        self._figures_changed()

    def _figures_changed(self) -> None:
        if not self.figures_due:
            self.figures_due = True
            self.set_timer(FIGURES_COALESCE_US, _Figures())

    @on(_Figures)
    async def figures(self, _: _Figures) -> None:
        self.figures_due = False
        if self.fence is not None:
            await self._record_state(*await self._snapshot())

    async def _complete_move(self, table: str, region: str) -> bool:
        """The new home holds the data: make it the home, then drop the old one."""
        move = self.moving.get(table)
        if move is None or move[1] != region or self.fence is None:
            return False
        old, new, delete_old = move
        del self.moving[table]
        if await self.store(catalog.set_home, table, new, self.now_us) and delete_old:
            await self.store(catalog.delete_replica, table, old, self.now_us)
        return True


def _reader_priority(snap: TetrisSnapshot) -> dict[str, int]:
    best: dict[str, int] = {}
    for j in snap.jobs:
        for t in j.tables:
            best[t] = min(best.get(t, j.priority), j.priority)
    return best


def _deadline_s(params: TetrisParams, priority: int) -> int:
    if priority <= params.high_priority_max:
        return params.replica_deadline_high_s
    return params.replica_deadline_low_s


class TetrisInputs(msgspec.Struct, frozen=True, kw_only=True):
    """What Tetris knows from history (`tetris_inputs`)."""

    jobs: tuple[TetrisJob, ...]  # the recurring ML jobs and the analytics jobs
    regions: tuple[TetrisRegion, ...]
    dr: dict[str, str]  # table → its DR region
    readers: dict[str, dict[str, int]]  # table → GPU type → ML jobs of the history


def tetris_inputs(
    world: WorldModel, warehouse: Warehouse, storage_bytes: dict[str, int]
) -> TetrisInputs:
    """What Tetris knows from history: recurring jobs, regions, DR regions, table readers."""
    jobs: list[TetrisJob] = [
        TetrisJob(
            id=j.id,
            kind="ml",
            tables=j.tables,
            gpu_type=j.gpu_type,
            gpu_hours=j.gpu_hours,
            priority=j.priority,
        )
        for j in warehouse.ml_jobs
        if j.gpu_type is not None and j.tables
    ]
    app_of = {job: app.name for app in warehouse.apps for job in app.jobs}
    jobs += [
        TetrisJob(
            id=j.id, kind="analytics", tables=j.tables, cpu_hours=j.cpu_hours, app=app_of.get(j.id)
        )
        for j in warehouse.analytics_jobs
        if j.tables
    ]
    caps: dict[str, dict[str, float]] = {}
    for app in warehouse.apps:
        for region, cap in app.cpu_capacity.items():
            caps.setdefault(region, {})[app.name] = cap
    regions = tuple(
        TetrisRegion(
            name=r.name,
            storage_bytes=storage_bytes[r.name],
            gpu_supply_hours={
                g: GPUS_PER_MACHINE * n * 24.0 for g, n in r.gpu_machines.items() if n
            },
            cpu_capacity_hours=caps.get(r.name, {}),
        )
        for r in world.regions
    )
    dr = {r.table: r.region for r in warehouse.replicas if r.kind == "dr"}
    readers: dict[str, dict[str, int]] = {}
    for x in warehouse.readers:
        readers.setdefault(x.table, {})[x.gpu_type] = x.jobs
    return TetrisInputs(jobs=tuple(jobs), regions=regions, dr=dr, readers=readers)
