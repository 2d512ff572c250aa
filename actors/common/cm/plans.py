"""How a cluster manager executes placement plans: checks, waiting for victims, starting.

For a plan the CM first checks that the plan's award still stands (the
workload is DISPATCHING under the plan's auction: a resent plan may outlive
its dispatch) and that the machines are still there (healthy, and free or
held by the plan's victims), and refuses a stale plan outright. Then it
stops the victims with a checkpoint, and only once every victim has stopped
and released its machines does it allocate (a compare-and-set in the store)
and start the job's agent.

A plan that has to wait for its victims is recorded in the store (`kv`,
namespace `cm-plans/CLUSTER`) before they are told to stop, and dropped once
it started or was refused: the CM that leads next takes the waiting plans up
again (the award must still stand and the machines still fit), so the RMS
gets its answer as soon as the victims have stopped, not after its dispatch
timeout.

A stop order may overtake its plan: the RMS preempts a job whose start it has
not heard of while the plan is still being resent to a CM that was paused or
partitioned away. The CM, not running the job, has nothing to stop; the plan
would then start a job its RMS counts as stopped, on machines it has given
to others, and every plan counting on them would be refused until that run
ended by itself. So a stop order for a dispatch this CM has neither started
nor holds, while that dispatch's award still stands, is recorded (`kv`,
namespace `cm-stopped/CLUSTER`), and its plan, when it comes, is refused.

`Plans` is a collaborator of `ClusterManager` (actors/common/cm/manager.py),
which hands it the plans and the news of jobs that released their machines;
it sees the manager through `PlansHost`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from actors.common.cm.state import CMCore
from actors.common.messages import EndReason, ExecutePlan, Pace, PlanResult
from store import kv, leases
from store.mast import fleet, queue
from store.mast.records import JobSpec


class Stopped(msgspec.Struct, frozen=True):
    """A dispatch stopped by its RMS before its plan reached this cluster."""

    workload_id: str
    job: str
    auction_id: int


@dataclass
class Pending:
    """A plan waiting for its victims to stop."""

    msg: ExecutePlan
    waiting: set[tuple[str, str]] = field(default_factory=set)
    recorded: bool = False  # in the store (module docstring): drop it there when done


class PlansHost(CMCore, Protocol):
    """What plan execution needs of its cluster manager besides `CMCore`."""

    async def reload(self) -> None:
        """Re-read the cluster's machines (some in transit may be free now)."""
        ...

    async def stop(self, key: tuple[str, str], reason: EndReason, *, checkpoint: bool) -> None:
        """Order a running job to stop; its end comes back as a release."""
        ...

    def launch(
        self,
        key: tuple[str, str],
        job: JobSpec,
        priority: int,
        attempt: int,
        saved_us: int,
        auction_id: int,
        gpus: tuple[tuple[str, int], ...],
        cpu_hosts: tuple[str, ...],
        pace: Pace | None,
    ) -> None:
        """Start the agent of a job whose machines the store has just given it."""
        ...


class Plans:
    """The plans one leader of a cluster executes, and those waiting for their victims.

    Made anew for every led epoch: a new leader knows only the waiting plans
    the store recorded (`take_up`). What must stay true: a plan starts only
    while its award stands and its machines fit, and every plan taken is
    answered (`PlanResult`) once, started or refused.
    """

    def __init__(self, cm: PlansHost) -> None:
        self.cm = cm
        self.namespace = f"cm-plans/{cm.params.cluster}"
        self.stopped_namespace = f"cm-stopped/{cm.params.cluster}"
        self.pending: list[Pending] = []
        self.stopped: set[Stopped] = set()

    async def execute(self, msg: ExecutePlan) -> None:
        """Check a plan from the RMS, stop its victims, and start it once they have stopped."""
        cm = self.cm
        key = (msg.workload_id, msg.job.name)
        if await cm.current_fence() is None:
            self._result(msg, False, "not the cluster's leader")
            return
        if any(p.msg == msg for p in self.pending):
            return  # resent to a CM that took it up from the store: it waits already
        if key in cm.running:
            if cm.running[key].auction_id == msg.auction_id:
                # This very plan, resent (its ack lost) to a CM that started it,
                # perhaps a new leader: it started, whatever became of that answer.
                self._result(msg, True, "")
                return
            self._result(msg, False, "job already running here")
            return
        if not cm.ledger.transit.isdisjoint([*(h for h, _ in msg.gpus), *msg.cpu_hosts]):
            # The RMS may know first that another cluster's job let a machine go.
            await cm.reload()
        victims = {v for v in msg.victims if v in cm.running}
        problem = (
            await self._stopped_first(msg)
            or await self._award_gone(msg)
            or self._stale(msg, victims)
        )
        if problem:
            cm.decision(
                "cm.reject", {"workload": msg.workload_id, "job": msg.job.name, "why": problem}
            )
            self._result(msg, False, problem)
            return
        plan = Pending(msg, victims, recorded=bool(victims))
        if plan.recorded:
            # Before the first stop order: whoever leads next finds what it waits for.
            await cm.store(kv.put, self.namespace, _plan_key(msg), msg)
        for victim in sorted(victims):
            await cm.stop(victim, "preempted", checkpoint=True)
        self.pending.append(plan)
        await self.start_ready()

    async def take_up(self) -> None:
        """Wait again for the victims of the plans the last leader recorded (module docstring)."""
        cm = self.cm
        self.stopped = set()
        for name, stopped in await cm.store(kv.items, self.stopped_namespace, Stopped):
            if await self._award_stands(stopped.workload_id, stopped.auction_id):
                self.stopped.add(stopped)
            else:  # its plan can no longer start anyway: nothing to keep
                await cm.store(kv.delete, self.stopped_namespace, name)
        stored = await cm.store(kv.items, self.namespace, ExecutePlan)
        for name, msg in stored:
            key = (msg.workload_id, msg.job.name)
            victims = {v for v in msg.victims if v in cm.running}
            if key in cm.running:
                # Started, and answered, by the leader that recorded it.
                await cm.store(kv.delete, self.namespace, name)
                continue
            problem = await self._award_gone(msg) or self._stale(msg, victims)
            if problem:
                await cm.store(kv.delete, self.namespace, name)
                cm.decision("cm.reject", {"workload": key[0], "job": key[1], "why": problem})
                self._result(msg, False, problem)
                continue
            taken = {"workload": key[0], "job": key[1], "auction": msg.auction_id}
            cm.decision("cm.plan-taken-up", {**taken, "victims": len(victims)})
            for victim in sorted(victims):
                await cm.stop(victim, "preempted", checkpoint=True)
            self.pending.append(Pending(msg, victims, recorded=True))
        if stored:
            await self.start_ready()

    async def withdraw(self, key: tuple[str, str], reason: EndReason, auction_id: int = 0) -> int:
        """Drop the waiting plans of a job its RMS stopped (those of `auction_id`, if
        given), and report it ended; how many there were."""
        cm = self.cm
        withdrawn = [
            p
            for p in self.pending
            if (p.msg.workload_id, p.msg.job.name) == key and auction_id in (0, p.msg.auction_id)
        ]
        for plan in withdrawn:
            self.pending.remove(plan)
            await self._forget(plan)
            cm.report_end(key, reason, plan.msg.auction_id)
        return len(withdrawn)

    async def stop_before_plan(self, key: tuple[str, str], auction_id: int) -> None:
        """The RMS stopped dispatch `auction_id` of a job this CM has not started:
        its plan, still on its way, is refused when it comes (module docstring)."""
        stopped = Stopped(key[0], key[1], auction_id)
        if stopped in self.stopped or not await self._award_stands(key[0], auction_id):
            return  # recorded already, or its plan would be refused anyway
        self.stopped.add(stopped)
        await self.cm.store(kv.put, self.stopped_namespace, _stopped_key(stopped), stopped)
        self.cm.decision(
            "cm.stop-before-plan", {"workload": key[0], "job": key[1], "auction": auction_id}
        )

    async def _stopped_first(self, msg: ExecutePlan) -> str:
        """Why a plan whose stop order came first may not start ('' if none did)."""
        stopped = Stopped(msg.workload_id, msg.job.name, msg.auction_id)
        if stopped not in self.stopped:
            return ""
        self.stopped.discard(stopped)
        await self.cm.store(kv.delete, self.stopped_namespace, _stopped_key(stopped))
        return "its dispatch was stopped before the plan came"

    async def refuse_on(self, dead: set[str]) -> None:
        """Refuse now the waiting plans that count on a machine that just failed.

        They could never start, and their victims' ends may not come back here
        (a victim on the failed machine is restarted elsewhere): answered only
        at start, the RMS would learn it at its dispatch timeout, many minutes on.
        """
        for plan in list(self.pending):
            msg = plan.msg
            if dead.isdisjoint([*(h for h, _ in msg.gpus), *msg.cpu_hosts]):
                continue
            self.pending.remove(plan)
            await self._forget(plan)
            why = "a machine of the plan failed"
            key = {"workload": msg.workload_id, "job": msg.job.name}
            self.cm.decision("cm.reject", {**key, "why": why})
            self._result(msg, False, why)

    async def job_released(self, key: tuple[str, str]) -> None:
        """A job of this cluster let its machines go: the plans that waited for it may start."""
        for plan in self.pending:
            plan.waiting.discard(key)
        await self.start_ready()

    async def start_ready(self) -> None:
        """Start, in the order they came, the plans no longer waiting for any victim."""
        for plan in [p for p in self.pending if not p.waiting]:
            self.pending.remove(plan)
            await self._start(plan.msg)
            await self._forget(plan)

    async def stale_rms_epoch(self, epoch: int, what: str) -> str:
        """Why a command from RMS epoch `epoch` must have no effect ('' if it may).

        Stale once another instance has led the RMS role since: that one
        rebuilt from the store and settles what the sender's memory held. The
        sender itself taking the lease again after a lapse nobody else used
        keeps its memory (`LeaseHolder.acquire`), and its orders stand.
        """
        cm = self.cm
        lease = await cm.store(leases.get, cm.rms)
        if lease is None or lease.epoch <= epoch:
            return ""
        grants = await cm.store(leases.history, cm.rms)
        if len({g.holder for g in grants if g.epoch >= epoch}) <= 1:
            return ""
        return f"the {what}'s RMS epoch {epoch} is stale (now {lease.epoch})"

    async def _forget(self, plan: Pending) -> None:
        if plan.recorded:
            await self.cm.store(kv.delete, self.namespace, _plan_key(plan.msg))

    async def _award_gone(self, msg: ExecutePlan) -> str:
        """Why the plan's award no longer stands ('' if it does).

        A plan is resent until this CM acknowledges it, so it may arrive long
        after its RMS gave up on the dispatch (or died with it) and the
        workload went back to the queue, or to another region. Such a plan
        must neither preempt anyone nor start a second copy of a job.
        """
        if not await self._award_stands(msg.workload_id, msg.auction_id):
            return "the award of this plan no longer stands"
        # A deposed RMS's plan: its successor has settled (or will) the dispatch.
        return await self.stale_rms_epoch(msg.rms_epoch, "plan")

    async def _award_stands(self, workload_id: str, auction_id: int) -> bool:
        """Whether the workload is DISPATCHING under `auction_id` in the job queue."""
        entry = await self.cm.store(queue.get, workload_id)
        return entry is not None and (entry.state, entry.auction_id) == ("DISPATCHING", auction_id)

    def _stale(self, msg: ExecutePlan, victims: set[tuple[str, str]]) -> str:
        """Why the plan can no longer run as planned ('' if it can)."""
        ledger = self.cm.ledger
        freed: dict[str, int] = {}
        freed_cpu: dict[str, int] = {}
        for victim in victims:
            held = ledger.jobs.get(victim)
            if held is not None:
                for host, n in held.gpus.items():
                    freed[host] = freed.get(host, 0) + n
                for host in held.cpu_hosts:
                    freed_cpu[host] = freed_cpu.get(host, 0) + 1
        for host, n in msg.gpus:
            machine = ledger.machines.get(host)
            if machine is None or not ledger.healthy[host]:
                return f"machine {host} unknown or unhealthy"
            if host in ledger.transit:
                return f"machine {host} still held by another cluster's job"
            free = machine.gpus - ledger.gpus_used_on(host) + freed.get(host, 0)
            if n > free:
                return f"machine {host} has {free} GPUs free, plan needs {n}"
        for host in msg.cpu_hosts:
            if host not in ledger.machines or not ledger.healthy[host]:
                return f"machine {host} unknown or unhealthy"
            if host in ledger.transit:
                return f"machine {host} still held by another cluster's job"
            if ledger.cpu_holders(host) > freed_cpu.get(host, 0):
                return f"CPU machine {host} is busy"
        return ""

    async def _start(self, msg: ExecutePlan) -> None:
        cm = self.cm
        job = msg.job
        started = None
        # The victims' checkpoints took a while: look again at the award too.
        fence = await cm.current_fence()
        problem = await self._award_gone(msg) if fence is not None else "lease lost"
        if fence is not None and not problem and not self._stale(msg, set()):
            started = await cm.store(
                fleet.start_job,
                fence,
                cm.now_us,
                msg.workload_id,
                job.name,
                cm.params.cluster,
                msg.priority,
                msg.gpus,
                msg.cpu_hosts,
            )
        if started is None:
            self._result(msg, False, problem or "machines taken or lease lost")
            return
        attempt, saved_us = started
        key = (msg.workload_id, job.name)
        cm.ledger.allocate(key, msg.priority, cm.now_us, msg.gpus, msg.cpu_hosts)
        cm.launch(
            key,
            job,
            msg.priority,
            attempt,
            saved_us,
            msg.auction_id,
            msg.gpus,
            msg.cpu_hosts,
            msg.pace,
        )
        self._result(msg, True, "")

    def _result(self, msg: ExecutePlan, ok: bool, reason: str) -> None:
        self.cm.send_reliably(
            self.cm.rms,
            PlanResult(
                auction_id=msg.auction_id,
                workload_id=msg.workload_id,
                job=msg.job.name,
                cluster=self.cm.params.cluster,
                ok=ok,
                reason=reason,
            ),
        )


def _stopped_key(stopped: Stopped) -> str:
    return f"{stopped.auction_id:012d}/{stopped.workload_id}/{stopped.job}"


def _plan_key(msg: ExecutePlan) -> str:
    # Zero-padded: a new leader takes plans up in the order they were awarded.
    return f"{msg.auction_id:012d}/{msg.workload_id}/{msg.job.name}"
