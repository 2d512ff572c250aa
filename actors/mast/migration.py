"""The data-migration service: cross-region table copies as WAN bulk flows.

Orders come from Tetris (`ReplicateOrders`: moves, DR, colocation and hot
replicas) and from the GMS (`DataRequest`: on-demand replication for a
workload no region can run for lack of data; `actors.policies.mast.on_demand`
picks the region). Each order is a copy row in the store (`store.mast.copies`),
which also reserves the bytes in the destination. The service re-plans on
every change and every `tick`: `actors.policies.mast.migration.plan_copies` says
which copies run and how fast (priority, soft deadlines, a per-link limit,
the daily byte cap); the service starts, paces and stops flows to match.

What must stay true:
- progress survives: every re-plan persists each flow's bytes into the copy
  row, so a crash of the service (its flows die with it) or a partition
  (flows pause, and the plan holds them) resumes a copy from its persisted
  bytes, never from zero;
- the bytes moved per day never exceed the cap (a copy is started for at
  most its budget and waits for the next day when that runs out);
- a replica becomes `ready` only when its last byte is in; then Tetris and,
  for an on-demand copy, the GMS hear `ReplicaReady`.
"""

from __future__ import annotations

import msgspec

from actors.common.leadership import LeaseHolder, LeaseTiming
from actors.mast.messages import DataRequest, ReplicaReady, ReplicateOrders
from actors.policies.mast.migration import (
    ActiveCopy,
    LinkCapacity,
    MigrationSettings,
    MigrationSnapshot,
    plan_copies,
)
from actors.policies.mast.on_demand import plan_on_demand
from emulator.actor import on
from emulator.sysmsg import FlowDone
from emulator.units import US_PER_S
from store.mast import catalog, copies, fleet
from store.mast.copies import DAY_US, Copy


class MigrationServiceParams(msgspec.Struct, frozen=True, kw_only=True):
    settings: MigrationSettings
    regions: list[str]
    tetris: bool = False
    lease: LeaseTiming = LeaseTiming()


class _Tick(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: persist progress and re-plan."""


class _Running(msgspec.Struct, kw_only=True):
    flow_id: int
    base: int  # the copy's bytes done when the flow started
    nbytes: int  # what the flow carries (the whole rest, or today's budget)
    started_us: int


class MigrationService(LeaseHolder):
    kind = "mast-migration"
    Params = MigrationServiceParams
    params: MigrationServiceParams

    async def on_start(self) -> None:
        self.running: dict[int, _Running] = {}
        self.by_flow: dict[int, int] = {}
        # Copy → its bytes when a partition stopped it (`migration-cap-per-attempt` only).
        self.cut_off: dict[int, int] = {}
        self.set_timer(self.params.settings.tick, _Tick())
        await self.lead("migration")
        await self._replan()

    # ---- orders -----------------------------------------------------------------------
    @on(ReplicateOrders)
    async def replicate(self, msg: ReplicateOrders) -> None:
        placement = await self.store(catalog.placement)
        for o in msg.orders:
            entry = placement.get(o.table)
            if entry is None or o.dst in entry[2]:
                continue
            await self.store(
                copies.order,
                self.now_us,
                o.table,
                entry[1],
                o.dst,
                o.priority,
                o.deadline_us,
                o.reason,
            )
        await self._replan()

    @on(DataRequest)
    async def data_request(self, msg: DataRequest) -> None:
        placement = await self.store(catalog.placement)
        hardware = await self.store(fleet.region_hardware)
        storage = await self.store(catalog.storage)
        plan = plan_on_demand(placement, list(msg.tables), hardware, list(msg.hardware), storage)
        self.decision(
            "migration.on-demand",
            {
                "workload": msg.workload_id,
                "region": plan.region if plan else None,
                "bytes": plan.bytes if plan else 0,
            },
        )
        if plan is None:
            return
        for table, src in plan.copies:
            await self.store(
                copies.order,
                self.now_us,
                table,
                src,
                plan.region,
                msg.priority,
                msg.deadline_us,
                "on-demand",
                msg.workload_id,
            )
        await self._replan()

    # ---- flows ------------------------------------------------------------------------
    @on(_Tick)
    async def tick(self, _: _Tick) -> None:
        self.set_timer(self.params.settings.tick, _Tick())
        await self._replan()

    @on(FlowDone)
    async def flow_done(self, msg: FlowDone) -> None:
        copy_id = self.by_flow.pop(msg.flow_id, None)
        if copy_id is None:
            return
        run = self.running.pop(copy_id)
        row = await self.store(copies.get, copy_id)
        if row is None or row.state not in ("queued", "copying"):
            return
        if run.base + run.nbytes >= row.size_bytes:
            lag_s = (self.now_us - row.created_us) / US_PER_S
            done = await self.store(copies.finish, self.now_us, copy_id, lag_s)
            if done is not None:
                self._tell_ready(row)
        else:  # today's budget is spent: keep the bytes, wait for tomorrow
            await self.store(
                copies.progress, self.now_us, [(copy_id, run.base + run.nbytes, "queued")]
            )
        await self._replan()

    def _tell_ready(self, row: Copy) -> None:
        ready = ReplicaReady(
            table=row.table, region=row.dst, reason=row.reason, workload_id=row.workload_id
        )
        if row.workload_id is not None:
            self.send_reliably("gms", ready)
        if self.params.tetris:  # even on demand: it may be a move Tetris waits for
            self.send_reliably("tetris", ready)

    async def _replan(self) -> None:
        """Persist what every flow moved, then start, pace and stop flows as planned.

        Only while leading: `acquire` may hand back a lease whose answer came
        so late (a slow store) that it has run out by now, or an epoch whose
        state this instance has not rebuilt yet; either way it acts no more
        until its renewal timer makes it lead again.
        """
        if await self.acquire() is None or not self.leading:
            self._stop_all()
            return
        await self._persist()
        live = await self.store(copies.live)
        if not live:
            return
        settings = self.params.settings
        now = self.now_us
        moved = await self.store(copies.day_bytes, now // DAY_US)
        if self.bug("migration-cap-per-attempt"):
            # Seeded bug: today's bytes are counted per attempt of a copy, so what a
            # copy moved before a partition cut it off is forgotten once it resumes.
            moved = max(0, moved - sum(self.cut_off.values()))
        links = sorted({(c.src, c.dst) for c in live})
        snap = MigrationSnapshot(
            now_us=now,
            copies=tuple(_active(c) for c in live),
            links=tuple(
                LinkCapacity(src=s, dst=d, bytes_s=self.wan_capacity_bps(s, d)) for s, d in links
            ),
            daily_cap_bytes=settings.daily_cap_bytes,
            moved_today_bytes=moved,
        )
        decision = plan_copies(snap, settings.policy)
        rows = {c.id: c for c in live}
        started: list[tuple[int, int, str]] = []
        for d in decision.copies:
            copy_id = int(d.id)
            row = rows[copy_id]
            run = self.running.get(copy_id)
            if not d.admitted:
                if run is not None:
                    self._stop(copy_id)
                    if d.reason == "link_down" and self.bug("migration-cap-per-attempt"):
                        self.cut_off[copy_id] = row.bytes_done
                continue
            if run is not None and run.base + run.nbytes > row.bytes_done + d.budget_bytes:
                self._stop(copy_id)  # the budget shrank: restart it for what is allowed
                run = None
            if run is None:
                nbytes = d.budget_bytes
                flow_id = self.start_flow(row.src, row.dst, nbytes, settings.qos)
                self.running[copy_id] = _Running(
                    flow_id=flow_id, base=row.bytes_done, nbytes=nbytes, started_us=now
                )
                self.by_flow[flow_id] = copy_id
                started.append((copy_id, row.bytes_done, "copying"))
                run = self.running[copy_id]
            self.set_flow_rate_cap(run.flow_id, d.rate_cap_bytes_s)
        if started:
            await self.store(copies.progress, now, started)

    async def _persist(self) -> None:
        updates = []
        for copy_id, run in sorted(self.running.items()):
            arrived, _ = self.flow_progress(run.flow_id)
            updates.append((copy_id, run.base + arrived, "copying"))
        if updates:
            await self.store(copies.progress, self.now_us, updates)

    def _stop(self, copy_id: int) -> None:
        """Stop a copy's flow; its bytes were persisted just before."""
        run = self.running.pop(copy_id)
        self.by_flow.pop(run.flow_id, None)
        self.cancel_flow(run.flow_id)

    def _stop_all(self) -> None:
        for copy_id in sorted(self.running):
            self._stop(copy_id)


def _active(c: Copy) -> ActiveCopy:
    return ActiveCopy(
        id=str(c.id),
        table=c.table,
        src=c.src,
        dst=c.dst,
        size_bytes=c.size_bytes,
        bytes_done=c.bytes_done,
        priority=c.priority,
        soft_deadline_us=c.deadline_us,
        created_us=c.created_us,
    )
