"""The global ML scheduler (GMS): ranks the global queue and runs auctions.

Every `scan_interval` a GMS-scan pass computes each queued workload's credit
(expressions 10 and 11), runs the quota scan (within-quota workloads get
their tenant's priority, over-quota ones the lowest), stores the ⟨priority,
credit⟩ ranking, tells the RMSs the pass has started (they reset their
negative caches), and dispatches in rank order through auctions. An award is
committed in the store (compare-and-set, fenced by the GMS lease) before it
is announced. A workload no region can place waits (WAITING) for the next
pass; one that only lacks data in the regions with its hardware waits for
data (WAITING_DATA) and, with a migration service, asks for it to be copied;
a region that does not answer (cut off, or with no leader) is left out of
that judgement rather than counted as one that lacks nothing but data.

A region gone dark (MAST §3.5): when the region's RMS role and every one of
its CM roles have had no leader for `region_lost_after` (checked at every
pass), its DISPATCHING and RUNNING workloads go back to the queue, each by a
compare-and-set on the auction that sent it there, so a report of that
dispatch arriving late changes nothing. They are auctioned again in the same
pass: work whose data has a replica elsewhere runs there from its last
checkpoint; the rest waits. Requiring the CMs dark too keeps a region whose
RMS alone is down (its jobs still run) from being emptied twice over. When
the region comes back its CMs release what is left of those attempts
(`actors/common/cm/manager.py`) and its RMS adopts none of them (`actors/mast/rms.py`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from actors.common.leadership import LeaseHolder, LeaseTiming
from actors.common.messages import Submitted
from actors.mast.messages import (
    Abstain,
    AuctionOpen,
    Award,
    Bid,
    DataRequest,
    Dispatched,
    Release,
    ReplicaReady,
    ScanEnd,
    ScanStart,
    WorkloadEnded,
)
from actors.policies.mast import ranking
from actors.policies.mast.api import RoutingView
from actors.policies.mast.credit import CreditParams
from actors.policies.mast.federated import main_hardware
from actors.policies.mast.quota import TenantQuota
from actors.policies.mast.registry import resolve
from emulator.actor import on
from emulator.errors import PolicyContractError
from emulator.units import Duration
from store import leases
from store.mast import fleet, queue
from store.mast.queue import QUEUED
from store.mast.records import GPUS_PER_MACHINE, QueueEntry, WorkloadSpec

# A limit on auctions in flight: each holds machines in every bidding region.
PIPELINE_MAX = 64
# Specs of ended workloads are dropped once this many have piled up (the pass
# that drops them rebuilds two dicts: on meta-day about every 1.5 emulated hours).
SPECS_SLACK = 1024


class GMSParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    regions: list[str]
    scan_interval: Duration = Duration(300_000_000)
    first_scan: Duration = Duration(10_000_000)
    auction_deadline: Duration = Duration(2_000_000)
    usage_window: Duration = Duration(86_400_000_000)
    credit: CreditParams = CreditParams()
    # The MAST-level policy (actors/policies/mast/registry.py) that routes each
    # auction: "mast" asks every region, "federated" (§5.6) only the region the
    # workload was bound to on arrival. Its parameters: validated on start.
    policy: str = "mast"
    policy_params: dict[str, Any] = {}
    lease: LeaseTiming = LeaseTiming()
    # On-demand replication: a workload that every region declined for lack of
    # data is reported to the migration service (when the run has one), which
    # copies its data to a region with its hardware by this soft deadline.
    on_demand: bool = False
    on_demand_deadline: Duration = Duration(2 * 3_600_000_000)
    # A region whose RMS and CM roles all have had no leader this long is lost:
    # its running work is queued again (module docstring).
    region_lost_after: Duration = Duration(600_000_000)
    # Auctions in flight at once during a pass (`[system] auction.pipeline`):
    # 1 runs them one after the other; more opens that many together and
    # awards them in rank order once their bids are in (`_auctions`).
    auction_pipeline: Annotated[int, Meta(ge=1, le=PIPELINE_MAX)] = 1


class _Scan(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: time for a GMS-scan pass."""


class GlobalScheduler(LeaseHolder):
    kind = "mast-gms"
    Params = GMSParams
    params: GMSParams

    async def on_start(self) -> None:
        self.scan_timer: int | None = None
        self.tenants = {
            t.name: TenantQuota(
                name=t.name, priority=t.priority, gpu_quota=t.gpu_quota, cpu_quota=t.cpu_quota
            )
            for t in await self.store(queue.get_tenants)
        }
        self.quotas = {n: (t.priority, t.gpu_quota, t.cpu_quota) for n, t in self.tenants.items()}
        self.specs: dict[str, WorkloadSpec] = {}
        self.sizes: dict[str, tuple[int, int]] = {}  # (GPUs, CPU machines) of each spec
        self.usage = ranking.UsageWindow()
        self.scans = 0
        self.policy, self.policy_params = resolve(self.params.policy, self.params.policy_params)
        self.routing_state: Any = self.policy.initial_state(self.policy_params)
        self.targets: Mapping[str, tuple[str, ...]] = {}
        self.supply: dict[str | None, dict[str, float]] = {}
        if self.policy.reads_supply:
            for region, kinds in (await self.store(fleet.region_hardware)).items():
                for kind, machines in kinds.items():
                    unit = GPUS_PER_MACHINE if kind != "cpu" else 1
                    key = None if kind == "cpu" else kind
                    self.supply.setdefault(key, {})[region] = float(machines * unit)
        # Region → its RMS and CM roles (a region is dark when none has a leader).
        self.region_roles: dict[str, tuple[str, ...]] = {
            r: (f"rms/{r}",) for r in self.params.regions
        }
        for cluster in await self.store(fleet.clusters):
            if cluster.region in self.region_roles:
                self.region_roles[cluster.region] += (f"cm/{cluster.id}",)
        await self.lead("gms")

    async def on_lead(self) -> None:
        """A new epoch: forget what an earlier leadership knew; scan soon.

        The queue, the awards and the dispatches are in the store; the usage
        window and the policy's routing state start afresh, as after a restart.
        A follower keeps no scan timer: it starts one when it takes over. Each
        award still DISPATCHING goes to its region again (see below).
        """
        self.usage = ranking.UsageWindow()
        self.scans = 0
        self.routing_state = self.policy.initial_state(self.policy_params)
        self.targets = {}
        if self.scan_timer is not None:
            self.cancel_timer(self.scan_timer)
        self.scan_timer = self.set_timer(self.params.first_scan, _Scan())
        if self.fence is None:
            return
        for entry in await self.store(queue.in_states, ("DISPATCHING",)):
            if self.bug("gms-reauctions-dispatching"):
                # Seeded bug: a new leader takes a workload still DISPATCHING (its award
                # stands, its region is starting it) for one its predecessor lost, and
                # queues it again: the next pass auctions it a second time.
                await self.store(
                    queue.transition,
                    entry.id,
                    ("DISPATCHING",),
                    "PENDING",
                    self.now_us,
                    entry.auction_id,
                )
            elif entry.region is not None and entry.auction_id is not None:
                # The award stands in the store, but its region may never have heard
                # of it: the Award was lost and its sender died before resending it.
                # Told again, an RMS ignores an award already under way, and fails
                # one whose plan it no longer holds (the workload is queued again).
                self.send_reliably(
                    f"rms/{entry.region}",
                    Award(
                        auction_id=entry.auction_id,
                        gms_epoch=entry.gms_epoch or 0,
                        workload_id=entry.id,
                    ),
                )

    @on(Submitted)
    def submitted(self, _: Submitted) -> None:
        """Nothing to do now: the next pass ranks and dispatches it."""

    # ---- the GMS-scan pass ------------------------------------------------------------
    @on(_Scan)
    async def scan(self, _: _Scan) -> None:
        self.scan_timer = self.set_timer(self.params.scan_interval, _Scan())
        if await self.take_lead() is None:
            return
        self.scans += 1
        await self._requeue_lost_regions()
        t0 = time.perf_counter()
        ranked = await self._rank()
        # Wall time of the pass goes to metrics only (MAST Fig. 9); it never steers the run.
        self.metric("gms_scan_ms", (time.perf_counter() - t0) * 1000, queued=len(ranked))
        self.metric("queue_length", len(ranked))
        epoch = self.fence.epoch if self.fence else 0
        for region in self.params.regions:
            self.send(f"rms/{region}", ScanStart(scan=self.scans, gms_epoch=epoch))
        window = self.params.auction_pipeline
        # A pass ends when the next one is due, even with workloads left: while
        # it auctions, the GMS handles nothing else (dispatch reports, ends),
        # and the next pass ranks the queue again (its credit has aged).
        ends_us = self.now_us + self.params.scan_interval
        for start in range(0, len(ranked), window):
            # Auctions wait for bids in emulated time: a long queue keeps this
            # handler busy past the renewal timer, so the lease is renewed here.
            if self.now_us >= ends_us or await self.renew_if_due() is None:
                break
            batch = ranked[start : start + window]
            if len(batch) == 1:
                await self._auction(*batch[0])
            else:
                await self._auctions(batch)
        for region in self.params.regions:
            self.send(f"rms/{region}", ScanEnd(scan=self.scans, gms_epoch=epoch))

    async def _requeue_lost_regions(self) -> None:
        """Queue again the active workloads of every region dark for `region_lost_after`.

        Dark: none of the region's roles has a leader now (service discovery
        says so at no cost); since when is the last expiry of their leases in
        the store, so a GMS that has just taken over judges as its predecessor
        would have, and a leader that came and went between two passes counts.
        """
        now = self.now_us
        for region in self.params.regions:
            roles = self.region_roles[region]
            if self.bug("gms-region-lost-ignores-cms"):
                # Seeded bug: a region counts as dark once its RMS role is, though
                # its CMs still lead and its jobs still run.
                roles = roles[:1]
            if any(self.leader_of(role) is not None for role in roles):
                continue
            since = 0
            for role in roles:
                lease = await self.store(leases.get, role)
                if lease is not None:
                    since = max(since, lease.expires_at_us)
            if now - since < self.params.region_lost_after:
                continue
            active = [
                e
                for e in await self.store(queue.in_states, ("DISPATCHING", "RUNNING"))
                if e.region == region and e.auction_id is not None
            ]
            if not active:
                continue
            # Before the writes: the checkers learn which attempts are given up.
            self.decision(
                "gms.region-lost",
                {
                    "region": region,
                    "dark_since_us": since,
                    "roles": list(roles),
                    "workloads": [[e.id, e.auction_id] for e in active],
                },
            )
            for entry in active:
                await self.store(
                    queue.transition,
                    entry.id,
                    ("DISPATCHING", "RUNNING"),
                    "PENDING",
                    now,
                    entry.auction_id,
                )

    async def _rank(self) -> list[tuple[str, int]]:
        queued = await self.store(queue.in_states, QUEUED)
        active = await self.store(queue.in_states, ("DISPATCHING", "RUNNING"))
        missing = [e.id for e in queued + active if e.id not in self.specs]
        if missing:
            fetched = await self.store(queue.specs, missing)
            self.specs.update(fetched)
            self.sizes.update({wid: (s.gpus, s.cpu_machines) for wid, s in fetched.items()})
        if len(self.specs) > len(queued) + len(active) + SPECS_SLACK:
            # A workload neither queued nor active has ended, and an ended one never
            # comes back: without this a week of meta-day kept 100k specs.
            live = {e.id for e in queued} | {e.id for e in active}
            self.specs = {wid: s for wid, s in self.specs.items() if wid in live}
            self.sizes = {wid: n for wid, n in self.sizes.items() if wid in live}
        now = self.now_us
        if self.bug("gms-quota-ignores-running"):
            # Seeded bug: the quota scan forgets what each tenant already runs, so
            # a tenant at its quota gets its queued work ranked within quota again.
            active = []
        rows, self.usage = scan_pass(
            self.usage, now, queued, active, self.sizes, self.quotas, self.params
        )
        rows = self._order(rows)
        self._route(queued, active)
        if self.fence is not None:
            await self.store(
                queue.rank, self.fence, now, [(wid, p, c, w) for wid, _, p, c, w in rows]
            )
        return [(wid, p) for wid, _, p, _, _ in rows]

    def _order(self, ranked: list[ranking.Row]) -> list[ranking.Row]:
        """The policy's dispatch order for this pass, checked to be a permutation of `ranked`."""
        got = self.policy.order(ranked, self.policy_params)
        if got is ranked:  # MAST's own order: nothing to check on the scan's hot path
            return ranked
        ordered = list(got)
        if sorted(ordered) != sorted(ranked):
            # A policy bug, not bad input: dropping or inventing a workload
            # here would lose it or auction a stranger.
            raise PolicyContractError(
                f"MAST policy {self.policy.name!r}: order() must return a permutation of the "
                f"ranked workloads ({len(ranked)} given, {len(ordered)} returned)"
            )
        return ordered

    def _route(self, queued: list[QueueEntry], active: list[QueueEntry]) -> None:
        """Ask the policy which regions this pass's auctions go to (all, unless it says)."""
        view = RoutingView(
            now_us=self.now_us,
            regions=tuple(self.params.regions),
            queued=tuple(queued),
            active=tuple(active),
            specs=self.specs,
            supply=self.supply,
        )
        routing, self.routing_state = self.policy.route(
            view, self.routing_state, self.policy_params
        )
        self.targets = routing.targets
        for type_, payload in routing.notes:
            self.decision(type_, payload)

    async def _auction(self, workload_id: str, priority: int) -> None:
        await self._auctions([(workload_id, priority)])

    async def _auctions(self, batch: list[tuple[str, int]]) -> None:
        """Open the batch's auctions together; settle each, in rank order, once all bids are in.

        With more than one in flight an RMS may bid for several at once: it
        holds each bid's plan (`actors/mast/rms.py`), so its later bids leave those
        machines alone, and a CM refuses a plan whose machines are taken.
        """
        assert self.fence is not None
        opened: list[tuple[AuctionOpen, list[str]]] = []
        for workload_id, priority in batch:
            auction_id = await self.store(queue.open_auction, self.fence, self.now_us, workload_id)
            if auction_id is None:
                self.fence = None
                break
            msg = AuctionOpen(
                auction_id=auction_id,
                gms_epoch=self.fence.epoch,
                scan=self.scans,
                workload_id=workload_id,
                priority=priority,
                jobs=self.specs[workload_id].jobs,
                deadline_us=self.now_us + self.params.auction_deadline,
            )
            opened.append((msg, list(self.targets.get(workload_id, self.params.regions))))
        if not opened:
            return
        replies = await self.gather(
            [(f"rms/{r}", msg) for msg, regions in opened for r in regions],
            self.params.auction_deadline,
        )
        for msg, regions in opened:
            await self._settle(msg, replies[: len(regions)], pipelined=len(opened) > 1)
            replies = replies[len(regions) :]

    async def _settle(self, opened: AuctionOpen, replies: list[Any], pipelined: bool) -> None:
        """Award an auction to its best bid (compare-and-set), or send its workload waiting."""
        auction_id, workload_id = opened.auction_id, opened.workload_id
        spec, priority = self.specs[workload_id], opened.priority
        bids = sorted(
            (b for b in replies if isinstance(b, Bid) and b.auction_id == auction_id),
            key=lambda b: (-b.score, b.region),
        )
        abstains = [a for a in replies if isinstance(a, Abstain)]
        if bids:
            winner = bids[0]
            args = (self.fence, self.now_us, workload_id, auction_id, winner.region)
            # Seeded bug `gms-award-forgets-epoch`: the awards of a pipelined batch are
            # written without the lease in their condition, so a leader whose lease
            # lapsed while the batch's bids came in (paused) still awards.
            if pipelined and self.bug("gms-award-forgets-epoch"):
                args += (False,)
            won = self.fence is not None and await self.store(queue.award, *args)
            self.decision(
                "auction.award" if won else "auction.lost-cas",
                {
                    "auction": auction_id,
                    "workload": workload_id,
                    "winner": winner.region,
                    "bids": {b.region: b.score for b in bids},
                },
            )
            epoch = self.fence.epoch if self.fence else 0
            for bid in bids:
                if won and bid is winner:
                    # Reliable: a lost award would leave the workload DISPATCHING forever.
                    self.send_reliably(
                        f"rms/{bid.region}",
                        Award(auction_id=auction_id, gms_epoch=epoch, workload_id=workload_id),
                    )
                else:
                    self.send(f"rms/{bid.region}", Release(auction_id=auction_id, gms_epoch=epoch))
            await self.store(
                queue.close_auction,
                auction_id,
                self.now_us,
                "awarded" if won else "lost",
                winner.region if won else None,
            )
            return
        reasons = sorted({a.reason for a in abstains})
        # Waiting for data: every region that answered and has the hardware lacks
        # the data. One that did not answer (cut off, dark) says nothing either way:
        # counting it would stop the data requests for as long as the cut lasts.
        for_data = "no_data" in reasons and set(reasons) <= {"no_data", "no_hardware"}
        state = "WAITING_DATA" if for_data else "WAITING"
        await self.store(queue.transition, workload_id, QUEUED, state, self.now_us)
        self.decision(
            "auction.none",
            {"auction": auction_id, "workload": workload_id, "state": state, "reasons": reasons},
        )
        if state == "WAITING_DATA" and self.params.on_demand:
            self._request_data(spec, priority)
        await self.store(queue.close_auction, auction_id, self.now_us, state.lower(), None)

    def _request_data(self, spec: WorkloadSpec, priority: int) -> None:
        """Ask the migration service to bring the workload's data next to its hardware.

        Sent at every pass the workload still waits for data: the service
        ignores tables already on their way, and a request lost with a failed
        service is made again.
        """
        kinds = sorted({j.gpu_type for j in spec.jobs if j.gpus and j.gpu_type})
        main = main_hardware(spec)[0]
        if main in kinds:  # the main GPU type first: the target is chosen by its supply
            kinds.remove(main)
            kinds.insert(0, main)
        if any(j.cpu_machines for j in spec.jobs):
            kinds.append("cpu")
        self.send_reliably(
            "migration",
            DataRequest(
                workload_id=spec.id,
                tables=spec.input_tables,
                hardware=tuple(kinds),
                priority=priority,
                deadline_us=self.now_us + self.params.on_demand_deadline,
                gms_epoch=self.fence.epoch if self.fence else 0,
            ),
        )

    @on(ReplicaReady)
    def replica_ready(self, msg: ReplicaReady) -> None:
        """A table arrived somewhere: workloads waiting for it are tried at the next pass."""
        self.decision(
            "data.ready", {"table": msg.table, "region": msg.region, "workload": msg.workload_id}
        )

    # ---- reports from the RMSs --------------------------------------------------------
    @on(Bid, Abstain)
    def late(self, msg: Bid | Abstain) -> None:
        """A reply after the auction's deadline: the auction is closed; ignore it."""
        self.decision("auction.late", {"auction": msg.auction_id, "region": msg.region})

    @on(Dispatched)
    async def dispatched(self, msg: Dispatched) -> None:
        target = "RUNNING" if msg.ok else "PENDING"
        moved = await self.store(
            queue.transition,
            msg.workload_id,
            ("DISPATCHING",),
            target,
            self.now_us,
            msg.auction_id,
        )
        if moved and not msg.ok:
            self.decision("dispatch.failed", {"workload": msg.workload_id, "why": msg.reason})

    @on(WorkloadEnded)
    async def ended(self, msg: WorkloadEnded) -> None:
        target = "DONE" if msg.reason == "done" else "PENDING"
        await self.store(
            queue.transition,
            msg.workload_id,
            ("DISPATCHING", "RUNNING"),
            target,
            self.now_us,
            msg.auction_id,
            msg.reason == "preempted",
        )


def scan_pass(
    usage: ranking.UsageWindow,
    now_us: int,
    queued: list[QueueEntry],
    active: list[QueueEntry],
    sizes: dict[str, tuple[int, int]],
    quotas: dict[str, tuple[int, int, int]],
    params: GMSParams,
) -> tuple[list[ranking.Row], ranking.UsageWindow]:
    """A GMS-scan pass's computation, between its store reads and its store write.

    Each tenant's running workloads' GPUs and CPU machines are added up and
    sampled into the usage window (a CPU machine counts as one
    GPU-equivalent); then every queued workload gets its credit, the quota
    scan its priority, and the rows come back in dispatch order, with the
    next usage window. `sizes` holds each workload's (GPUs, CPU machines).
    `mastemu bench gms` times exactly this.
    """
    running: dict[str, tuple[int, int]] = {}
    for entry in active:
        gpus, cpus = running.get(entry.tenant, (0, 0))
        more_gpus, more_cpus = sizes[entry.id]
        running[entry.tenant] = (gpus + more_gpus, cpus + more_cpus)
    usage = ranking.push(usage, now_us, running, params.usage_window)
    tenant_avg, all_avg = ranking.averages(usage, quotas)
    rows = ranking.rank(
        [(e.id, e.tenant, e.queued_us, *sizes[e.id]) for e in queued],
        now_us,
        tenant_avg,
        all_avg,
        quotas,
        running,
        params.credit,
    )
    return rows, usage
