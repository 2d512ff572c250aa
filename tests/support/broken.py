"""Deliberately broken components, shared by the tests that must see each one caught.

Each one breaks one rule on purpose (its docstring says which) and is run by
a test next to the real component: the invariant checkers must flag it, online
and in `mastemu check`. `broken_system` registers a MAST system whose parts
are replaced by broken ones, under its own kind.

Nothing here registers itself: a test that runs `UnfencedCandidate` calls
`register_actor(UnfencedCandidate)` (registering it twice is harmless).
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors.cluster.scheduler import ClusterScheduler
from actors.cluster.system import ClusterSystem
from actors.common.cm.manager import ClusterManager
from actors.common.messages import ExecutePlan, JobEnded, PlanResult
from actors.demo.lease import Ack, LeaseCandidate
from actors.mast.gms import GlobalScheduler
from actors.mast.messages import DataRequest
from actors.mast.migration import MigrationService
from actors.mast.rms import RegionalScheduler
from actors.mast.system import MastSystem
from actors.policies.mast.on_demand import plan_on_demand
from emulator.registry import register_system
from emulator.units import Duration
from store import Store
from store.events import store_event
from store.mast import catalog, fleet
from store.mast import copies as copies_repo
from store.mast.queue import FENCE, Fence


def broken_system(kind: str, **classes: Any) -> str:
    """Register MAST under `kind` with the given parts (`gms=`, `rms=`, `cm=`, …) replaced."""
    register_system(MastSystem(kind, **classes))
    return kind


# ---- lease-safety ------------------------------------------------------------------------------
@store_event("lease.effect")
async def unfenced_effect(
    store: Store, role: str, holder: str, epoch: int, now_us: int, payload: bytes
) -> bool:
    """BROKEN: writes whatever epoch the caller claims (no fencing)."""
    await store.write(
        "INSERT INTO lease_effects (role, epoch, holder, t_us, payload) VALUES (?, ?, ?, ?, ?)",
        (role, epoch, holder, now_us, payload),
    )
    return True


class UnfencedCandidate(LeaseCandidate):
    """Serves requests with whatever epoch it last believed it had.

    Its store layer writes that epoch unfenced, so a deposed leader's effects
    land: the lease-safety checker must flag them.
    """

    kind = "test-unfenced-candidate"

    async def serve(self, req: Any) -> None:  # type: ignore[override]
        payload = msgspec.msgpack.encode(req.op)
        role, epoch = self.params.role, self.epoch or 1
        ok = await self.store(unfenced_effect, role, self.address, epoch, self.now_us, payload)
        self.reply(Ack(req.op, self.epoch, ok))


# ---- auction -------------------------------------------------------------------------------------
@store_event("queue.award")
async def award_twice(
    store: Store,
    fence: Fence,
    now_us: int,
    workload_id: str,
    auction_id: int,
    region: str,
    fenced: bool = True,
) -> bool:
    """BROKEN: no compare-and-set on the workload's state (`fenced` as in `queue.award`)."""
    del fenced
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


# ---- gang ----------------------------------------------------------------------------------------
class GangBreakingRMS(RegionalScheduler):
    """Reports a workload dispatched as soon as its first job started."""

    def plan_result(self, msg: PlanResult) -> None:
        d = self.dispatching.get(msg.auction_id)
        if d is not None and msg.ok and not d.results:
            self.report_dispatch(msg.auction_id, msg.workload_id, True, "")
        super().plan_result(msg)


# ---- preemption ----------------------------------------------------------------------------------
class EagerCM(ClusterManager):
    """Frees a plan's victims at once instead of waiting for their checkpoint."""

    async def execute(self, msg: ExecutePlan) -> None:
        for victim in msg.victims:
            if victim in self.running and self.fence is not None:
                await self.release(victim, "preempted", "STOPPED")
        await super().execute(msg)


# ---- colocation ----------------------------------------------------------------------------------
class DataBlindRMS(RegionalScheduler):
    """Bids without checking that its region holds the workload's data."""

    async def _refresh(self) -> None:
        await super()._refresh()
        self.ready = _Everything()


class _Everything(set):  # type: ignore[type-arg]
    """A set of ready tables that holds every table."""

    def __ge__(self, other: object) -> bool:
        return True

    def __contains__(self, item: object) -> bool:
        return True


# ---- quota ---------------------------------------------------------------------------------------
class GenerousGMS(GlobalScheduler):
    """Believes every tenant's quota is a hundred times larger than it is."""

    async def on_start(self) -> None:
        await super().on_start()
        self.tenants = {
            n: msgspec.structs.replace(t, gpu_quota=t.gpu_quota * 100, cpu_quota=t.cpu_quota * 100)
            for n, t in self.tenants.items()
        }
        self.quotas = {n: (t.priority, t.gpu_quota, t.cpu_quota) for n, t in self.tenants.items()}


# ---- no-lost-workload ----------------------------------------------------------------------------
class ForgetfulGMS(GlobalScheduler):
    """Drops the news that a workload was preempted (it never re-enters the queue)."""

    async def ended(self, msg: Any) -> None:
        if msg.reason != "preempted":
            await super().ended(msg)


class LossBlindRMS(RegionalScheduler):
    """BROKEN: takes every job's end for a finished job, so a gang never stops as a whole."""

    async def job_ended(self, msg: JobEnded) -> None:
        await super().job_ended(msgspec.structs.replace(msg, reason="done"))


# ---- storage and migration-cap (the lake story of tests/support/stories.py) --------------------
class CapBlindService(MigrationService):
    """Plans as if there were no daily cap."""

    async def _replan(self) -> None:
        settings = self.params.settings
        self.params = msgspec.structs.replace(
            self.params, settings=msgspec.structs.replace(settings, daily_cap_bytes=None)
        )
        try:
            await super()._replan()
        finally:
            self.params = msgspec.structs.replace(self.params, settings=settings)


class RoomBlindService(MigrationService):
    """Chooses the on-demand region as if every region had unlimited storage."""

    async def data_request(self, msg: DataRequest) -> None:
        placement = await self.store(catalog.placement)
        plan = plan_on_demand(
            placement,
            list(msg.tables),
            await self.store(fleet.region_hardware),
            list(msg.hardware),
            {r: (0, 1 << 62) for r in self.params.regions},
        )
        assert plan is not None
        for table, src in plan.copies:
            await self.store(
                copies_repo.order, self.now_us, table, src, plan.region, 1, None, "on-demand", "W"
            )
        await self._replan()


class RaisingRMS(RegionalScheduler):
    """Dies on an exception of its own at every scan start (a bug, not a fault)."""

    async def scan_start(self, msg: Any) -> None:
        raise RuntimeError("broken on purpose")


# ---- liveness ----------------------------------------------------------------------------------
class IdleAfterTimeoutScheduler(ClusterScheduler):
    """An offer its agent never answers leaves the job waiting for an arrival or an end.

    The cluster scheduler before it decided again on a timed-out offer: a lone
    job whose agent was paused across its offer then waited forever.
    """

    async def offer_timeout(self, msg: Any) -> None:
        if self.offers.get(msg.job_id) == msg.offer_id:
            del self.offers[msg.job_id]
            a = self.accounts[msg.job_id]
            if a.state == "offered" and await self._leading():
                self._turned_down(a)


def broken_cluster(kind: str, **classes: Any) -> str:
    """Register the cluster system under `kind` with `scheduler=` or `cm=` replaced."""
    register_system(ClusterSystem(kind, **classes))
    return kind


# Cluster jobs on four 4-GPU machines for an hour (format `kind`, `policy`, `jobs`):
# the small world where a broken scheduler or CM of a test meets its peer.
SMALL_CLUSTER_TEMPLATE = """name = "small-cluster"
duration = "1h"
[system]
kind = "{kind}"
policy = "{policy}"
machines = 4
gpus_per_machine = 4
[system.workload]
generator = "philly"
philly = {{{{ arrivals = {{{{ rate_per_s = 0.01, num_jobs = {jobs} }}}} }}}}
[invariants]
enabled = ["allocation", "gang", "auction", "no-lost-workload", "progress"]
stop_on_violation = true
"""
# Ten fifo jobs (format `kind`).
SMALL_CLUSTER = SMALL_CLUSTER_TEMPLATE.format(kind="{kind}", policy="fifo", jobs=10)


# One cluster job whose agent is paused across its offers (format `kind`): a
# scheduler that waits for an arrival or an end after a timed-out offer never
# runs it.
STALLING = """name = "stall"
duration = "2h"
[system]
kind = "{kind}"
policy = "fifo"
machines = 4
gpus_per_machine = 4
[system.workload]
generator = "philly"
philly = {{ arrivals = {{ rate_per_s = 0.1, num_jobs = 1 }} }}
[[faults]]
at = "0s"
action = "pause"
target = "a live cluster-job-agent"
duration = "30s"
"""


class LateEndsCM(ClusterManager):
    """Every end report of a preempted attempt comes once more, after the job runs again.

    A resend delayed across a failover, made certain: the report names the
    auction of its attempt, which a scheduler must tell from the running one's.
    """

    def __init__(self, address: str, params: Any = None) -> None:
        super().__init__(address, params)
        self.late_ends: dict[str, JobEnded] = {}

    def send_reliably(self, dst: str, msg: Any) -> None:
        super().send_reliably(dst, msg)
        if isinstance(msg, JobEnded) and msg.reason == "preempted":
            self.late_ends[msg.workload_id] = msg
        elif isinstance(msg, PlanResult) and msg.ok and msg.workload_id in self.late_ends:
            super().send_reliably(dst, self.late_ends.pop(msg.workload_id))


class RefusingCM(ClusterManager):
    """Refuses every plan for `REFUSE_US` after the first: a CM whose machines the
    scheduler's accounts misjudge for a while (a plan re-sent at once is refused again)."""

    REFUSE_US = 2_000_000

    def __init__(self, address: str, params: Any = None) -> None:
        super().__init__(address, params)
        self.refuse_until: int | None = None

    async def execute(self, msg: ExecutePlan) -> None:
        if self.refuse_until is None:
            self.refuse_until = self.now_us + self.REFUSE_US
        if self.now_us >= self.refuse_until:
            await super().execute(msg)
            return
        why = "refused by a test"
        self.decision("cm.reject", {"workload": msg.workload_id, "job": msg.job.name, "why": why})
        result = PlanResult(
            auction_id=msg.auction_id,
            workload_id=msg.workload_id,
            job=msg.job.name,
            cluster=self.params.cluster,
            ok=False,
            reason=why,
        )
        self.send_reliably(self.rms, result)


class LongRefusingCM(RefusingCM):
    """Refuses every plan for a minute: refusals long enough to pile retries up."""

    REFUSE_US = 60_000_000


class AlwaysRefusingCM(RefusingCM):
    """Refuses every plan, all run long: a planner whose view never converges."""

    REFUSE_US = 10**15


class HastyScheduler(ClusterScheduler):
    """Decides again at once after a refused plan (`refused_retry` 0), as the
    scheduler did before: against a CM that keeps refusing, a loop."""

    async def on_start(self) -> None:
        self.params = msgspec.structs.replace(self.params, refused_retry=Duration(0))
        await super().on_start()


class TwicePlanningScheduler(ClusterScheduler):
    """Sends every plan twice: a resend whose first copy's ack was lost."""

    def send_reliably(self, dst: str, msg: Any) -> None:
        super().send_reliably(dst, msg)
        if isinstance(msg, ExecutePlan):
            super().send_reliably(dst, msg)


class LostOkCM(ClusterManager):
    """Answers every plan it started with a refusal: its ok lost, and a later leader
    refusing the resent plan (as CMs did) as a job already running there."""

    def send_reliably(self, dst: str, msg: Any) -> None:
        if isinstance(msg, PlanResult) and msg.ok:
            msg = msgspec.structs.replace(msg, ok=False, reason="job already running here")
        super().send_reliably(dst, msg)
