"""The regional ML scheduler (RMS): bids in auctions, dispatches plans to its CMs.

For an auction it checks, in order: that the region has the hardware (else it abstains with
`no_hardware`), that every input table has a ready replica in the region (`no_data`), the negative
cache (`negative_cache`); then it searches every dynamic cluster for every job (the MAST-level
policy's `place`) and bids the plan's P_score, or abstains `unschedulable`. The plan is kept as a
tentative reservation until the award or release, and held in the view, under a key of its own
at the highest priority (so no plan picks it as a victim) and claiming its victims (no other plan
counts on what they free: `ClusterLedger`), for every later bid to see: with
pipelined auctions several bids are open at once, and with one auction at a time the next
AuctionOpen can still overtake the last Award (the GMS sends both at one instant, and the network
may reorder them). It goes into the view when the next bid reads it: most holds end before
another bid comes, and their views never change. A hold whose Award or Release never comes lapses
after `hold_ttl`. Holds (`rms.hold`) and their ends (`rms.unhold`:
awarded, released or expired) are in the trace. A failure found while holds stand is cached only
until one of them ends without an award: its machines may fit what failed
(`negative_cache.forget_held`). On award it applies the plan (claiming its victims too) to its
view, sends one plan per job to the job's CM, and reports to the GMS once every job has started —
or, if any CM refused, rolls the others back (at its dispatch timeout, a job whose CM has not
answered counts as started if the store shows it holding machines). A job that ends before its
whole gang has started (preempted, failed, or a machine lost) fails the dispatch like a refused
plan. A workload ends when all its jobs have: if one is preempted or fails, the others are stopped
first, so the GMS re-queues it only when nothing of it runs. Cluster views are loaded when an epoch
starts and brought up to date with the store as every GMS-scan pass begins (`ClusterLedger.sync`:
only what changed is re-read), and one cluster's is reloaded when its CM reports that RAS changed
its machines.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import msgspec

from actors.common.cm.ledger import ClusterLedger
from actors.common.leadership import LeaseHolder, LeaseTiming
from actors.common.membership import ClusterChanged
from actors.common.messages import EndReason, ExecutePlan, JobEnded, PlanResult, StopJob
from actors.mast.dispatches import (
    Dispatch,
    Live,
    current_auction,
    job_request,
    remembered,
    superseded,
)
from actors.mast.messages import (
    Abstain,
    AuctionOpen,
    Award,
    Bid,
    Dispatched,
    Release,
    ScanEnd,
    ScanStart,
    WorkloadEnded,
)
from actors.mast.takeover import rebuild
from actors.policies.mast import negative_cache as ncache
from actors.policies.mast.placement.snapshot import JobPlan, Unschedulable, WorkloadPlan
from actors.policies.mast.registry import resolve
from emulator.actor import on
from emulator.units import Duration
from store.mast import catalog, fleet, queue


class RMSParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    region: str
    clusters: list[str]
    dispatch_timeout: Duration = Duration(900_000_000)
    lease: LeaseTiming = LeaseTiming()
    # The MAST-level policy (actors/policies/mast/registry.py) whose `place`
    # makes this region's plans and chooses their victims.
    policy: str = "mast"
    policy_params: dict[str, Any] = {}
    # Each bid's plan is held in the view this long, or until its award or
    # release (module docstring).
    hold_ttl: Duration = Duration(30_000_000)


class _DispatchTimeout(msgspec.Struct, frozen=True, tag=True):
    auction_id: int


class _HoldExpired(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: a bid's hold outlived `hold_ttl` (its Award or Release was lost, or late)."""

    auction_id: int


class RegionalScheduler(LeaseHolder):
    kind = "mast-rms"
    Params = RMSParams
    params: RMSParams

    async def on_start(self) -> None:
        self.policy, self.policy_params = resolve(self.params.policy, self.params.policy_params)
        self._forget()
        await self.lead(f"rms/{self.params.region}")

    def _forget(self) -> None:
        """No leader state: a follower's, and where a newly led epoch starts from."""
        self.cache = ncache.empty()
        self.tentative: dict[int, tuple[AuctionOpen, WorkloadPlan]] = {}
        self.unplaced: set[int] = set()  # holds not yet in the views (module docstring)
        self.pass_begun = (-1, -1)  # (GMS epoch, scan) of the last GMS-scan pass begun
        self.dispatching: dict[int, Dispatch] = {}
        self.live: dict[str, Live] = {}
        self.views: dict[str, ClusterLedger] = {}
        self.ready: set[str] = set()
        self.ready_seq: int | None = None  # the catalog change `ready` was read at
        self.gpu_types: set[str] = set()
        self.has_cpu = False

    async def on_lead(self) -> None:
        """A new epoch: rebuild from the store and the CMs' records, as after a restart."""
        self._forget()
        await self._refresh()
        await rebuild(self)

    async def on_resume(self) -> None:
        """Forget the attempts the GMS gave up while this leader's lease lapsed.

        A workload remembered as dispatching or running here under an auction
        the queue no longer holds it at (its region was given up: it waits, or
        runs elsewhere) is not this region's any more: its reservations go and
        a gang still running is stopped, or it runs on beside its new attempt
        (region-outage with the RMSs and CM of us-east paused 25 min: 32 GPUs
        of a given-up gang ran 30 min more). Its later reports are stale.
        """
        current = {
            e.id: e.auction_id
            for e in await self.store(queue.in_states, ("DISPATCHING", "RUNNING"))
            if e.region == self.params.region
        }
        for workload_id, auction_id in remembered(self.live, self.dispatching):
            if current.get(workload_id) != auction_id:
                self._forget_attempt(workload_id, auction_id, current.get(workload_id))

    def _forget_attempt(self, workload_id: str, auction_id: int, by: int | None) -> None:
        """Drop a remembered attempt the GMS no longer counts on (`superseded`, `on_resume`)."""
        live = self.live.get(workload_id)
        if live is not None and live.auction_id == auction_id:
            del self.live[workload_id]
            clusters, running = live.clusters, True
        else:
            d = self.dispatching.pop(auction_id)
            clusters, running = {jp.job: jp.cluster_id for jp in d.plan.jobs}, False
        # What it reserved goes; a gang still running is stopped (its CMs ignore the
        # order if a later attempt runs).
        for job, cluster in clusters.items():
            self.views[cluster].release((workload_id, job))
        if running:
            self.stop_jobs(workload_id, auction_id, clusters, "aborted", checkpoint=True)
        self.decision("rms.superseded", {"workload": workload_id, "auction": auction_id, "by": by})

    async def _refresh(self) -> None:
        """Bring the region's clusters and catalog up to date with the store.

        A view this incarnation already holds is synced (only what changed is
        re-read, and its reservations and holds stay); others are loaded, and
        a loaded view gets the open holds back.
        """
        p = self.params
        old = self.views
        self.views: dict[str, ClusterLedger] = {}
        for cluster in p.clusters:
            view = old.get(cluster)
            synced = await view.sync(self) if view is not None else None
            if synced is None or synced is not view:
                synced = synced or await ClusterLedger.fetch(self, cluster)
                self.views[cluster] = synced
                self._hold_again(cluster)
            else:
                self.views[cluster] = synced
        self.ready_seq, ready = await self.store(
            catalog.ready_tables_since, p.region, self.ready_seq
        )
        if ready is not None:
            self.ready = ready
        self._hardware()

    def _hardware(self) -> None:
        self.gpu_types = {t for v in self.views.values() for t in v.gpu_types}
        self.has_cpu = any(v.has_cpu for v in self.views.values())

    @on(ClusterChanged)
    async def cluster_changed(self, msg: ClusterChanged) -> None:
        """Reload one cluster whose machines RAS changed.

        Like the reload at a scan start, this forgets reservations of plans
        still being started; a bid that counts on their machines is refused
        by the CM (or the store), never executed twice.
        """
        old = self.views.get(msg.cluster)
        if old is not None:
            self.views[msg.cluster] = await ClusterLedger.fetch(self, msg.cluster, old)
            self._hardware()
            self._hold_again(msg.cluster)

    # ---- scans and auctions ------------------------------------------------------------
    @on(ScanStart)
    async def scan_start(self, msg: ScanStart) -> None:
        await self._begin_pass(msg.gms_epoch, msg.scan)

    async def _begin_pass(self, gms_epoch: int, scan: int) -> None:
        """Begin a GMS-scan pass once: on its ScanStart, or on an auction of it that came first.

        An auction of a new pass answered from the last pass's negative cache
        would abstain for capacity freed since; a ScanStart arriving after the
        pass's auctions would empty the cache they filled.
        """
        if not self.leading or (gms_epoch, scan) <= self.pass_begun:
            return
        self.pass_begun = (gms_epoch, scan)
        self.decision(
            "rms.pass", {"region": self.params.region, "gms_epoch": gms_epoch, "scan": scan}
        )
        if self.cache.lookups:
            self.metric(
                "negative_cache_hit_rate", ncache.hit_rate(self.cache), region=self.params.region
            )
        self.cache = ncache.empty()
        await self._refresh()

    @on(ScanEnd)
    def scan_end(self, _: ScanEnd) -> None:
        """Nothing to do: the negative cache lives until the next pass begins."""

    @on(AuctionOpen)
    async def auction(self, msg: AuctionOpen) -> None:
        asked = self.envelope
        await self._begin_pass(msg.gms_epoch, msg.scan)
        self.reply(self._bid(msg), to=asked)

    def _bid(self, msg: AuctionOpen) -> Bid | Abstain:
        region = self.params.region

        def abstain(reason: str) -> Abstain:
            return Abstain(auction_id=msg.auction_id, region=region, reason=reason)  # type: ignore[arg-type]

        if not self.leading:
            return abstain("busy")
        if msg.auction_id in self.tentative:
            # The same AuctionOpen again (a duplicating link): the same bid, one hold.
            return self._bid_for(msg.auction_id)
        # Hardware first: a region that could never run the workload is not one
        # that lacks its data (the GMS asks for data movement only for the latter).
        for job in msg.jobs:
            if job.gpus and job.gpu_type not in self.gpu_types:
                return abstain("no_hardware")
            if job.cpu_machines and not self.has_cpu:
                return abstain("no_hardware")
        tables = {t for job in msg.jobs for t in job.input_tables}
        # Seeded bug `rms-skips-data-check`: bid without the workload's data here.
        if not tables <= self.ready and not self.bug("rms-skips-data-check"):
            return abstain("no_data")
        # Seeded bug `rms-preempts-equal-priority`: plan as one priority level higher
        # than the workload's, so a job of its own priority may be chosen as a victim.
        plan_priority = msg.priority
        if self.bug("rms-preempts-equal-priority"):
            plan_priority = max(0, plan_priority - 1)
        requests = [job_request(msg.workload_id, job, plan_priority) for job in msg.jobs]
        props = [ncache.SchedProps.from_request(r) for r in requests]
        hit = any(ncache.fails_fast(self.cache, p) for p in props)
        self.cache = ncache.count(self.cache, hit)
        if hit:
            return abstain("negative_cache")
        for auction_id in sorted(self.unplaced & self.tentative.keys()):
            self._hold(auction_id)
        self.unplaced.clear()
        snapshots = [self.views[c].snapshot() for c in sorted(self.views)]
        # Wall time of the policy call only goes to metrics: it never steers the run.
        t0 = time.perf_counter()
        plan = self.policy.place(snapshots, requests, self.now_us, self.policy_params)
        latency_ms = (time.perf_counter() - t0) * 1000
        if isinstance(plan, Unschedulable):
            self.metric("rms_decision_ms", latency_ms, region=region, preempts=False, placed=False)
            # Held machines may come free within the pass: a failure found while
            # bids hold some lasts only until a hold ends without a dispatch.
            held = bool(self.tentative)
            for request, prop in zip(requests, props, strict=True):
                alone = self.policy.place(snapshots, [request], self.now_us, self.policy_params)
                if isinstance(alone, Unschedulable):
                    self.cache = ncache.record_failure(self.cache, prop, held)
                    break
            return abstain("unschedulable")
        self.metric(
            "rms_decision_ms", latency_ms, region=region, preempts=plan.preempts, placed=True
        )
        self.tentative[msg.auction_id] = (msg, plan)
        # Seeded bug `rms-forgets-hold`: the hold is announced but never put in
        # the view, so the next pipelined bid promises the same machines.
        if not self.bug("rms-forgets-hold"):
            self.unplaced.add(msg.auction_id)
        self.set_timer(self.params.hold_ttl, _HoldExpired(msg.auction_id))
        self.decision(
            "rms.hold",
            {
                "auction": msg.auction_id,
                "workload": msg.workload_id,
                "region": region,
                "gpus": sorted([h, n] for jp in plan.jobs for h, n in jp.gpus),
                "cpu_hosts": sorted(h for jp in plan.jobs for h in jp.cpu_hosts),
                "victims": len(plan.victims),
            },
        )
        return self._bid_for(msg.auction_id)

    def _bid_for(self, auction_id: int) -> Bid:
        _, plan = self.tentative[auction_id]
        return Bid(
            auction_id=auction_id,
            region=self.params.region,
            score=plan.score,
            preempts=plan.preempts,
            victims=len(plan.victims),
        )

    @on(Release)
    def release(self, msg: Release) -> None:
        self._unhold(msg.auction_id, "released")
        self.tentative.pop(msg.auction_id, None)

    @on(_HoldExpired)
    def hold_expired(self, msg: _HoldExpired) -> None:
        if self._unhold(msg.auction_id, "expired"):
            # Too late for an award to find it: one that comes fails the dispatch.
            del self.tentative[msg.auction_id]

    # ---- holds of pipelined bids (module docstring) -------------------------------------
    def _hold_keys(self, auction_id: int) -> list[tuple[str, tuple[str, str]]]:
        """(cluster, view key) of each job of a tentative plan's hold."""
        opened, plan = self.tentative[auction_id]
        workload = opened.workload_id
        return [(jp.cluster_id, (workload, f"{jp.job}#held-{auction_id}")) for jp in plan.jobs]

    def _hold(self, auction_id: int, only: str | None = None) -> None:
        _, plan = self.tentative[auction_id]
        for jp, (cluster, key) in zip(plan.jobs, self._hold_keys(auction_id), strict=True):
            if only is None or cluster == only:
                # Priority 0 (the highest): no plan may take a hold's machines as a victim's.
                self.views[cluster].allocate(key, 0, self.now_us, jp.gpus, jp.cpu_hosts, jp.victims)

    def _hold_again(self, only: str | None = None) -> None:
        """Views reloaded from the store know no holds: put the open ones back."""
        for auction_id in sorted(self.tentative.keys() - self.unplaced):
            self._hold(auction_id, only)

    def _unhold(self, auction_id: int, why: str) -> bool:
        """End a tentative plan's hold; False if there was none (or holds are off)."""
        if auction_id not in self.tentative:
            return False
        if auction_id in self.unplaced:
            self.unplaced.discard(auction_id)
        else:
            for cluster, key in self._hold_keys(auction_id):
                self.views[cluster].release(key)
        if why != "awarded":  # an award keeps the machines: the dispatch reserves them
            self.cache = ncache.forget_held(self.cache)
        self.decision(
            "rms.unhold", {"auction": auction_id, "region": self.params.region, "why": why}
        )
        return True

    @on(Award)
    async def award(self, msg: Award) -> None:
        live = self.live.get(msg.workload_id)
        if msg.auction_id in self.dispatching or (live and live.auction_id == msg.auction_id):
            return  # a resent award for a dispatch already under way
        for auction_id in superseded(msg.workload_id, msg.auction_id, self.live, self.dispatching):
            self._forget_attempt(msg.workload_id, auction_id, msg.auction_id)
        # The hold gives way to the dispatch's own reservation, made just below.
        self._unhold(msg.auction_id, "awarded")
        tentative = self.tentative.pop(msg.auction_id, None)
        if tentative is None or self.fence is None:
            self.report_dispatch(msg.auction_id, msg.workload_id, False, "no tentative plan")
            return
        opened, plan = tentative
        workload_id, priority = opened.workload_id, opened.priority
        jobs = {job.name: job for job in opened.jobs}
        # Reserve in the view at once, so the next auction's bid sees it. Victims
        # keep their machines in the view until their JobEnded: they hold them
        # until their checkpoint is saved.
        for job_plan in plan.jobs:
            view = self.views[job_plan.cluster_id]
            view.allocate(
                (workload_id, job_plan.job),
                priority,
                self.now_us,
                job_plan.gpus,
                job_plan.cpu_hosts,
                job_plan.victims,
            )
        self.dispatching[msg.auction_id] = Dispatch(workload_id, plan, jobs)
        self.decision(
            "rms.dispatch",
            {
                "auction": msg.auction_id,
                "workload": workload_id,
                "priority": priority,
                "victims": [list(v) for v in plan.victims],
            },
        )
        for job_plan in plan.jobs:
            self.send_reliably(
                f"cm/{job_plan.cluster_id}",
                ExecutePlan(
                    auction_id=msg.auction_id,
                    rms_epoch=self.fence.epoch,
                    workload_id=workload_id,
                    job=jobs[job_plan.job],
                    priority=priority,
                    gpus=job_plan.gpus,
                    cpu_hosts=job_plan.cpu_hosts,
                    victims=job_plan.victims,
                ),
            )
        self.set_timer(self.params.dispatch_timeout, _DispatchTimeout(msg.auction_id))
        if self.bug("rms-reports-preempting-dispatch-early") and plan.preempts:
            # Seeded bug: a preempting dispatch is reported started as soon as its
            # plans go out, while they still wait for the victims' checkpoints.
            self.report_dispatch(msg.auction_id, workload_id, True, "")

    @on(PlanResult)
    def plan_result(self, msg: PlanResult) -> None:
        d = self.dispatching.get(msg.auction_id)
        if d is None:
            live = self.live.get(msg.workload_id)
            if live is not None and live.auction_id == msg.auction_id:
                if msg.job in live.clusters or live.ending is None or not msg.ok:
                    return  # already settled: a report repeated across a restart
                # A straggler of a dispatch being rolled back (after a restart of
                # this RMS): the workload ends only once it has stopped too.
                live.clusters[msg.job] = msg.cluster
            if msg.ok:  # a job started for a dispatch already given up: stop it
                stray = {msg.job: msg.cluster}
                self.stop_jobs(msg.workload_id, msg.auction_id, stray, "aborted", checkpoint=False)
            return
        d.results[msg.job] = msg.ok
        if len(d.results) == len(d.plan.jobs):
            self._settle(msg.auction_id, d)

    @on(_DispatchTimeout)
    async def dispatch_timeout(self, msg: _DispatchTimeout) -> None:
        d = self.dispatching.get(msg.auction_id)
        # A deposed leader's memory is stale: its successor settles the dispatch.
        if d is None or not self.leading:
            return
        # A job whose result has not come may have started all the same (its CM's
        # answer lost, or late: this RMS was paused): the store says. Such a job is
        # stopped like a started one, so that the GMS gets the workload back only
        # once nothing of it runs; the others count as refused. A live row of an
        # earlier attempt (given up while its CM was dark, still running there) is
        # not this dispatch's start.
        for jp in d.plan.jobs:
            if jp.job not in d.results:
                d.results[jp.job] = await self._started_for(msg.auction_id, d.workload_id, jp)
        self._settle(msg.auction_id, d)

    async def _started_for(self, auction_id: int, workload_id: str, jp: JobPlan) -> bool:
        """Whether the store has the job live for this dispatch (no answer came from its CM)."""
        if self.bug("rms-timeout-takes-old-attempt"):
            # Seeded bug: any live row of the job in its cluster, an earlier attempt's too.
            row = await self.store(fleet.job, workload_id, jp.job)
            return (
                row is not None
                and row.state in fleet.LIVE_JOB_STATES
                and row.cluster == jp.cluster_id
            )
        rows = await self.store(
            fleet.dispatches, jp.cluster_id, self.params.region, fleet.LIVE_JOB_STATES, workload_id
        )
        return any(row.job == jp.job and serves == auction_id for row, serves in rows)

    def _settle(self, auction_id: int, d: Dispatch) -> None:
        del self.dispatching[auction_id]
        clusters = {jp.job: jp.cluster_id for jp in d.plan.jobs}
        if all(d.results.values()) and not d.ended:
            self.live[d.workload_id] = Live(auction_id, clusters)
            self.report_dispatch(auction_id, d.workload_id, True, "")
            return
        # Gang: all or nothing. Free what was reserved for refused jobs and stop
        # the started ones; the GMS hears of it only once nothing of it runs.
        started = {job: clusters[job] for job, ok in d.results.items() if ok and job not in d.ended}
        for job, ok in sorted(d.results.items()):
            if not ok:
                self.views[clusters[job]].release((d.workload_id, job))
        if not started:
            failed = ", ".join(sorted(job for job in d.results if job not in started))
            self.report_dispatch(auction_id, d.workload_id, False, f"refused or ended: {failed}")
            return
        self.live[d.workload_id] = Live(auction_id, started, ending="aborted")
        self.stop_jobs(d.workload_id, auction_id, started, "aborted", checkpoint=False)

    def report_dispatch(self, auction_id: int, workload_id: str, ok: bool, reason: str) -> None:
        self.send_reliably(
            "gms",
            Dispatched(
                auction_id=auction_id,
                workload_id=workload_id,
                region=self.params.region,
                ok=ok,
                reason=reason,
            ),
        )

    def stop_jobs(
        self,
        workload_id: str,
        auction_id: int,
        jobs: Mapping[str, str],
        reason: EndReason,
        *,
        checkpoint: bool,
    ) -> None:
        """Order the CMs to stop these jobs (job → cluster) of the workload's dispatch."""
        # Epoch 0 from an instance that does not lead: no CM acts on it.
        epoch = self.fence.epoch if self.fence is not None else 0
        for job, cluster in sorted(jobs.items()):
            order = StopJob(
                workload_id=workload_id,
                job=job,
                reason=reason,
                checkpoint=checkpoint,
                rms_epoch=epoch,
                auction_id=auction_id,
            )
            self.send_reliably(f"cm/{cluster}", order)

    # ---- running workloads -----------------------------------------------------------------
    @on(JobEnded)
    async def job_ended(self, msg: JobEnded) -> None:
        current = current_auction(msg.workload_id, self.live, self.dispatching)
        if msg.auction_id and current is not None and msg.auction_id != current:
            # An earlier dispatch's attempt, its report resent across failovers until
            # this one began (explore: rms-failover): not the current attempt's end.
            self.decision(
                "rms.stale-end",
                {"workload": msg.workload_id, "job": msg.job, "auction": msg.auction_id},
            )
            return
        if msg.reason != "done":
            # A report resent across failovers may come after the job was placed and
            # started again (explore: rms-failover): it is not this attempt's end.
            row = await self.store(fleet.job, msg.workload_id, msg.job)
            if row is not None and row.state in fleet.LIVE_JOB_STATES:
                self.decision("rms.stale-end", {"workload": msg.workload_id, "job": msg.job})
                return
        view = self.views.get(msg.cluster)
        if view is not None:
            view.release((msg.workload_id, msg.job))
        for d in self.dispatching.values():
            if d.workload_id == msg.workload_id and msg.job in d.jobs:
                d.ended.add(msg.job)
                return
        live = self.live.get(msg.workload_id)
        if live is None or msg.job not in live.clusters:
            return
        del live.clusters[msg.job]
        if msg.reason != "done" and live.ending is None:
            # One job of a gang is gone: the rest of the workload stops too.
            live.ending = msg.reason
            ckpt = msg.reason == "preempted"
            self.stop_jobs(
                msg.workload_id, live.auction_id, live.clusters, msg.reason, checkpoint=ckpt
            )
        # Seeded bug `rms-ends-before-gang-stops`: report the workload ended as soon
        # as one job of it did not finish, while the rest of its gang still runs.
        early = live.ending is not None and self.bug("rms-ends-before-gang-stops")
        if not live.clusters or early:
            del self.live[msg.workload_id]
            reason = live.ending or "done"
            if reason == "failed" and self.bug("rms-reports-failed-as-done"):
                # Seeded bug: a gang that lost a job to a failure is reported done.
                reason = "done"
            self.send_reliably(
                "gms",
                WorkloadEnded(
                    workload_id=msg.workload_id,
                    auction_id=live.auction_id,
                    region=self.params.region,
                    reason=reason,
                ),
            )
