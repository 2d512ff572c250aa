"""The cluster manager (CM) of one dynamic cluster: executes placement plans.

For a plan it first checks that the plan's award still stands (the workload
is DISPATCHING under the plan's auction: a resent plan may outlive its
dispatch) and that the machines are still there (healthy, and free or held
by the plan's victims), and refuses a stale plan outright. Then it
stops the victims with a checkpoint, and only once every victim has stopped
and released its machines does it allocate (a compare-and-set in the store)
and start the job's agent. A machine failure restarts the jobs on it from
their last checkpoint on spare machines, or reports them failed.

Crash recovery: the CM rebuilds its jobs from the store. A preemption it
ordered is recorded there first (the job goes CHECKPOINTING), so a restarted
CM orders it again and reports the job `preempted` once it has stopped; the
agents' reports reach whichever incarnation leads (they are resent until
acknowledged). A plan that has to wait for its victims is recorded in the
store too (`kv`, namespace `cm-plans/CLUSTER`) before they are told to stop,
and dropped once it started or was refused: the CM that leads next takes the
waiting plans up again (the award must still stand and the machines still
fit), so the RMS gets its answer as soon as the victims have stopped, not
after its dispatch timeout.

Agents that died unseen: an agent dies with its first machine, and every
agent dies with the emulator process (`mastemu resume`). A leading CM hears
of a failed machine (`HostDown`) and restarts the jobs on it; a CM that was
down or following then did not, and the kernel's replay of the hardware state
tells it only of machines still down, not of one that failed and came back
meanwhile. So a CM that begins to lead (`on_lead`, also after a restart)
probes the agents of the jobs it rebuilt (`AgentProbe`, sent `probes_max`
times, `probe_every` apart, against message loss) and treats one that
answered none like a job on a failed machine: a running job restarts from its
last checkpoint, a stopping one is released. That costs one message per job
and probe round, and only at a change of leader: a run without CM failover
sends none.

Work that moved on while this CM was away: the GMS gives up a region whose
control plane has been dark too long and queues its work again, which may
then start elsewhere (`actors/mast/gms.py`). A job is restarted here only while
its dispatch still stands: its workload DISPATCHING or RUNNING in this
region under the dispatch the attempt was started for (`fleet.dispatches`).
One whose dispatch is gone is released, its agent told to stop, and nobody
told (its RMS has forgotten it; a late `JobEnded` could only confuse a new
dispatch of the same workload): at the rebuild, and again before any
restart. What its dead attempt left on this cluster's machines after the
job started elsewhere is freed at the rebuild too (`fleet.free_leftovers`).

Ends nobody heard of: a CM frees a job's machines in the store before it
tells the RMS (or, after a machine failure, before it restarts the job). One
that dies in between leaves the job STOPPED while its dispatch stands, and no
one would ever report it: so the rebuild reports every such job ended
(`failed`, as the store does not say why) and the RMS settles the workload;
a report it already had is ignored there.

RAS changes the cluster's membership (`MembershipChanged`): the CM re-reads
its machines; a job on a machine that left is treated like one on a failed
machine (unless it is already stopping: it keeps the machine until it has
stopped), and the RMS is told (`ClusterChanged`). A machine that joined while
a job of another cluster holds it is in transit: unused, and re-read every
`transit_recheck` until that job let it go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import msgspec

from actors.common.cm.ledger import ClusterView
from actors.common.cm.recovery import CMRecovery
from actors.common.job_agent import JobAgent
from actors.common.leadership import LeaseTiming
from actors.common.membership import ClusterChanged, MembershipChanged
from actors.common.messages import (
    AgentFinished,
    AgentRunning,
    AgentStart,
    AgentStop,
    AgentStopped,
    EndReason,
    ExecutePlan,
    JobEnded,
    Pace,
    PlanResult,
    StopJob,
)
from actors.mast.workload.generator import setup_time_us
from actors.policies.mast.placement.place import place_job
from actors.policies.mast.placement.snapshot import JobPlan, JobRequest
from emulator.actor import on
from emulator.sysmsg import HostDown, HostUp
from emulator.units import Duration
from store import kv, leases
from store.mast import fleet, queue
from store.mast.queue import Fence
from store.mast.records import JobSpec


class CMParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    cluster: str
    region: str
    checkpoint_cost: Duration = Duration(30_000_000)
    stop_timeout: Duration = Duration(300_000_000)
    # Probes of the agents by a CM that begins to lead (module docstring): how
    # often, and how many unanswered ones make an agent dead.
    probe_every: Duration = Duration(5_000_000)
    probes_max: Annotated[int, msgspec.Meta(ge=1, le=100)] = 3
    # Machines in transit (see the module docstring): how often, and how many
    # times after a membership change, to re-read the cluster until they are free.
    transit_recheck: Duration = Duration(10_000_000)
    transit_rechecks_max: int = 90
    lease: LeaseTiming = LeaseTiming()
    # A job on a machine that fails: "restart" it on spare machines here (MAST),
    # or "report" it failed to the scheduler, whose policy places it again (the
    # cluster policies own placement).
    on_host_failure: Literal["restart", "report"] = "restart"


@dataclass
class Running:
    """A job this CM runs: its spec, attempt and agent, and a pending stop."""

    spec: JobSpec
    priority: int
    attempt: int
    agent: str
    auction_id: int  # 0 for a job rebuilt while its dispatch no longer stands
    stopping: EndReason | None = None
    pace: Pace | None = None


@dataclass
class Pending:
    """A plan waiting for its victims to stop."""

    msg: ExecutePlan
    waiting: set[tuple[str, str]] = field(default_factory=set)
    recorded: bool = False  # in the store (module docstring): drop it there when done


class _StopTimeout(msgspec.Struct, frozen=True, tag=True):
    key: tuple[str, str]
    attempt: int


class _TransitRecheck(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: re-read the cluster, machines in transit may be free now."""


class ClusterManager(CMRecovery):
    kind = "mast-cm"
    Params = CMParams
    params: CMParams

    async def on_start(self) -> None:
        p = self.params
        self.rms = f"rms/{p.region}"
        # A follower keeps no leader state: `on_lead` builds it once this instance leads.
        self.view = ClusterView(p.cluster, ())
        self.running: dict[tuple[str, str], Running] = {}
        self.pending: list[Pending] = []
        self.rechecks = 0
        self.recheck_armed = False
        # Agents probed by the current round and not heard from: key → attempt.
        self.unanswered: dict[tuple[str, str], int] = {}
        self.probe_round = 0
        self.plans_namespace = f"cm-plans/{p.cluster}"
        await self.lead(f"cm/{p.cluster}")

    async def on_lead(self) -> None:
        """A newly led epoch (also after a restart): rebuild from the store."""
        p = self.params
        self.view = await ClusterView.fetch(self, p.cluster)
        self.running = {}
        self.pending = []
        gone: list[tuple[str, str]] = []
        rows = await self.store(fleet.dispatches, p.cluster, p.region, fleet.LIVE_JOB_STATES)
        for row, auction_id in rows:
            spec = await self.store(queue.spec, row.workload_id)
            job = next((j for j in spec.jobs if j.name == row.job), None) if spec else None
            if job is not None:
                key = (row.workload_id, row.job)
                agent = _agent(row.workload_id, row.job, row.attempt)
                running = Running(job, row.priority, row.attempt, agent, auction_id or 0)
                self.running[key] = running
                if auction_id is None:
                    gone.append(key)
                elif row.state == "CHECKPOINTING" and self.fence is not None:
                    # A preemption the last incarnation began: order the stop again
                    # (the agent ignores a second order) and wait for it as before.
                    running.stopping = "preempted"
                    self._order_stop(key, running, checkpoint=True)
        if self.fence is not None:
            for key in gone:
                await self._drop_gone(key)
            await self._report_unheard_ends()
            await self._free_leftovers()
        self._probe_agents()
        # A membership change may have been half handled when this CM went down.
        self.rechecks = 0
        self.recheck_armed = False
        await self._drop_strays()
        self._watch_transit()
        await self._take_up_plans()

    # ---- plans ---------------------------------------------------------------------
    @on(ExecutePlan)
    async def execute(self, msg: ExecutePlan) -> None:
        key = (msg.workload_id, msg.job.name)
        if await self.current_fence() is None:
            self._result(msg, False, "not the cluster's leader")
            return
        if any(p.msg == msg for p in self.pending):
            return  # resent to a CM that took it up from the store: it waits already
        if key in self.running:
            self._result(msg, False, "job already running here")
            return
        if not self.view.transit.isdisjoint([*(h for h, _ in msg.gpus), *msg.cpu_hosts]):
            # The RMS may know first that another cluster's job let a machine go.
            await self._reload()
        victims = {v for v in msg.victims if v in self.running}
        problem = await self._award_gone(msg) or self._stale(msg, victims)
        if problem:
            self.decision(
                "cm.reject", {"workload": msg.workload_id, "job": msg.job.name, "why": problem}
            )
            self._result(msg, False, problem)
            return
        plan = Pending(msg, victims, recorded=bool(victims))
        if plan.recorded:
            # Before the first stop order: whoever leads next finds what it waits for.
            await self.store(kv.put, self.plans_namespace, _plan_key(msg), msg)
        for victim in sorted(victims):
            await self._stop(victim, "preempted", checkpoint=True)
        self.pending.append(plan)
        await self._start_ready()

    async def _take_up_plans(self) -> None:
        """Wait again for the victims of the plans the last leader recorded (module docstring)."""
        stored = await self.store(kv.items, self.plans_namespace, ExecutePlan)
        for name, msg in stored:
            key = (msg.workload_id, msg.job.name)
            victims = {v for v in msg.victims if v in self.running}
            if key in self.running:
                # Started, and answered, by the leader that recorded it.
                await self.store(kv.delete, self.plans_namespace, name)
                continue
            problem = await self._award_gone(msg) or self._stale(msg, victims)
            if problem:
                await self.store(kv.delete, self.plans_namespace, name)
                self.decision("cm.reject", {"workload": key[0], "job": key[1], "why": problem})
                self._result(msg, False, problem)
                continue
            taken = {"workload": key[0], "job": key[1], "auction": msg.auction_id}
            self.decision("cm.plan-taken-up", {**taken, "victims": len(victims)})
            for victim in sorted(victims):
                await self._stop(victim, "preempted", checkpoint=True)
            self.pending.append(Pending(msg, victims, recorded=True))
        if stored:
            await self._start_ready()

    async def _forget_plan(self, plan: Pending) -> None:
        if plan.recorded:
            await self.store(kv.delete, self.plans_namespace, _plan_key(plan.msg))

    async def _award_gone(self, msg: ExecutePlan) -> str:
        """Why the plan's award no longer stands ('' if it does).

        A plan is resent until this CM acknowledges it, so it may arrive long
        after its RMS gave up on the dispatch (or died with it) and the
        workload went back to the queue, or to another region. Such a plan
        must neither preempt anyone nor start a second copy of a job.
        """
        entry = await self.store(queue.get, msg.workload_id)
        if entry is None or entry.state != "DISPATCHING" or entry.auction_id != msg.auction_id:
            return "the award of this plan no longer stands"
        # A deposed RMS's plan: its successor has settled (or will) the dispatch.
        return await self._stale_rms_epoch(msg.rms_epoch, "plan")

    async def _stale_rms_epoch(self, epoch: int, what: str) -> str:
        """Why a command from RMS epoch `epoch` must have no effect ('' if it may).

        Stale once another instance has led the RMS role since: that one
        rebuilt from the store and settles what the sender's memory held. The
        sender itself taking the lease again after a lapse nobody else used
        keeps its memory (`LeaseHolder.acquire`), and its orders stand.
        """
        lease = await self.store(leases.get, self.rms)
        if lease is None or lease.epoch <= epoch:
            return ""
        grants = await self.store(leases.history, self.rms)
        if len({g.holder for g in grants if g.epoch >= epoch}) <= 1:
            return ""
        return f"the {what}'s RMS epoch {epoch} is stale (now {lease.epoch})"

    def _stale(self, msg: ExecutePlan, victims: set[tuple[str, str]]) -> str:
        """Why the plan can no longer run as planned ('' if it can)."""
        view = self.view
        freed: dict[str, int] = {}
        freed_cpu: set[str] = set()
        for victim in victims:
            held = view.jobs.get(victim)
            if held is not None:
                for host, n in held.gpus.items():
                    freed[host] = freed.get(host, 0) + n
                freed_cpu.update(held.cpu_hosts)
        for host, n in msg.gpus:
            machine = view.machines.get(host)
            if machine is None or not view.healthy[host]:
                return f"machine {host} unknown or unhealthy"
            if host in view.transit:
                return f"machine {host} still held by another cluster's job"
            free = machine.gpus - view.gpus_used.get(host, 0) + freed.get(host, 0)
            if n > free:
                return f"machine {host} has {free} GPUs free, plan needs {n}"
        for host in msg.cpu_hosts:
            if host not in view.machines or not view.healthy[host]:
                return f"machine {host} unknown or unhealthy"
            if host in view.transit:
                return f"machine {host} still held by another cluster's job"
            if host in view.cpu_busy and host not in freed_cpu:
                return f"CPU machine {host} is busy"
        return ""

    async def _start_ready(self) -> None:
        for plan in [p for p in self.pending if not p.waiting]:
            self.pending.remove(plan)
            await self._start(plan.msg)
            await self._forget_plan(plan)

    async def _start(self, msg: ExecutePlan) -> None:
        p = self.params
        job = msg.job
        started = None
        # The victims' checkpoints took a while: look again at the award too.
        fence = await self.current_fence()
        problem = await self._award_gone(msg) if fence is not None else "lease lost"
        if fence is not None and not problem and not self._stale(msg, set()):
            started = await self.store(
                fleet.start_job,
                fence,
                self.now_us,
                msg.workload_id,
                job.name,
                p.cluster,
                msg.priority,
                msg.gpus,
                msg.cpu_hosts,
            )
        if started is None:
            self._result(msg, False, problem or "machines taken or lease lost")
            return
        attempt, saved_us = started
        key = (msg.workload_id, job.name)
        self.view.allocate(key, msg.priority, self.now_us, msg.gpus, msg.cpu_hosts)
        self._launch(
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

    def _launch(
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
        """Start the job's agent on its first machine (it dies if that machine does)."""
        agent = _agent(key[0], key[1], attempt)
        host = min([h for h, _ in gpus] + list(cpu_hosts))
        if pace is None:
            setup_us, checkpoint_us = setup_time_us(self.rng("setup")), self.params.checkpoint_cost
        else:
            # The performance model's costs: a resumed job restores its checkpoint first.
            setup_us = pace.restore_us if saved_us > 0 else 0
            checkpoint_us = pace.checkpoint_us
        start = AgentStart(
            workload_id=key[0],
            job=key[1],
            attempt=attempt,
            work_us=job.work_us,
            progress_us=saved_us,
            setup_us=setup_us,
            checkpoint_every_us=job.checkpoint_every_us,
            checkpoint_cost_us=checkpoint_us,
            cm=self.role,
            pace=pace,
        )
        # Traced: where each attempt starts from is judged (`progress`) against the store.
        self.decision(
            "cm.agent-start",
            {"workload": key[0], "job": key[1], "attempt": attempt, "progress_us": saved_us},
        )
        self.spawn(agent, host, JobAgent, start)
        self.running[key] = Running(job, priority, attempt, agent, auction_id, pace=pace)

    def _result(self, msg: ExecutePlan, ok: bool, reason: str) -> None:
        self.send_reliably(
            self.rms,
            PlanResult(
                auction_id=msg.auction_id,
                workload_id=msg.workload_id,
                job=msg.job.name,
                cluster=self.params.cluster,
                ok=ok,
                reason=reason,
            ),
        )

    # ---- stopping ----------------------------------------------------------------------
    async def _stop(self, key: tuple[str, str], reason: EndReason, *, checkpoint: bool) -> None:
        job = self.running.get(key)
        if job is None or job.stopping is not None:
            return
        job.stopping = reason
        fence = await self.current_fence() if checkpoint else None
        if fence is not None:
            # Recorded before the order goes out: a CM that restarts meanwhile
            # finishes the preemption (module docstring), and the checkpoint the
            # agent saves from now on is the one its machines wait for.
            await self.store(
                fleet.set_job_state,
                fence,
                self.now_us,
                key[0],
                key[1],
                "CHECKPOINTING",
                job.attempt,
            )
        self._order_stop(key, job, checkpoint=checkpoint)

    def _order_stop(self, key: tuple[str, str], job: Running, *, checkpoint: bool) -> None:
        self.send(job.agent, AgentStop(checkpoint=checkpoint))
        # The agent may be dead (its machine failed): do not wait for it forever.
        self.set_timer(self.params.stop_timeout, _StopTimeout(key, job.attempt))

    @on(StopJob)
    async def stop_job(self, msg: StopJob) -> None:
        key = (msg.workload_id, msg.job)
        stale = await self._stale_rms_epoch(msg.rms_epoch, "stop order")
        if stale:
            self.decision("cm.ignore", {"workload": key[0], "job": key[1], "why": stale})
            return
        for plan in [p for p in self.pending if (p.msg.workload_id, p.msg.job.name) == key]:
            self.pending.remove(plan)
            await self._forget_plan(plan)
            self.send_reliably(
                self.rms,
                JobEnded(
                    workload_id=key[0], job=key[1], cluster=self.params.cluster, reason=msg.reason
                ),
            )
        if key in self.running:
            await self._stop(key, msg.reason, checkpoint=msg.checkpoint)

    @on(AgentStopped)
    async def stopped(self, msg: AgentStopped) -> None:
        key = (msg.workload_id, msg.job)
        job = self.running.get(key)
        if job is None or job.attempt != msg.attempt:
            return
        await self._release(key, job.stopping or "failed", "STOPPED")

    @on(_StopTimeout)
    async def stop_timeout(self, msg: _StopTimeout) -> None:
        job = self.running.get(msg.key)
        if job is not None and job.attempt == msg.attempt and job.stopping is not None:
            await self._release(msg.key, job.stopping, "STOPPED")

    @on(AgentRunning)
    async def job_running(self, msg: AgentRunning) -> None:
        job = self.running.get((msg.workload_id, msg.job))
        # A report delayed past a stop order must not make a stopping job look running.
        if job is None or job.attempt != msg.attempt or job.stopping is not None:
            return
        fence = await self.current_fence()
        if fence is not None:
            await self.store(
                fleet.set_job_state,
                fence,
                self.now_us,
                msg.workload_id,
                msg.job,
                "RUNNING",
                msg.attempt,
            )

    @on(AgentFinished)
    async def finished(self, msg: AgentFinished) -> None:
        key = (msg.workload_id, msg.job)
        job = self.running.get(key)
        if job is not None and job.attempt == msg.attempt:
            await self._release(key, "done", "DONE")

    async def _release(self, key: tuple[str, str], reason: EndReason, state: str) -> None:
        if await self._release_in_store(key, state) is None:
            return
        self.running.pop(key, None)
        self.view.release(key)
        self.send_reliably(
            self.rms,
            JobEnded(workload_id=key[0], job=key[1], cluster=self.params.cluster, reason=reason),
        )
        for plan in self.pending:
            plan.waiting.discard(key)
        await self._start_ready()

    # ---- hardware -----------------------------------------------------------------------
    @on(HostDown)
    async def host_down(self, msg: HostDown) -> None:
        if await self.current_fence() is None:
            return  # every instance watches; the leader acts (the kernel retells a new one)
        hosts = self.view.hosts_under(msg.node)
        if not hosts:
            return
        await self.store(fleet.set_health, hosts, False)
        self.view.set_health(hosts, False)
        await self._refuse_plans_on(set(hosts))
        for key in self.view.jobs_on(hosts):
            await self._replace(key)

    async def _refuse_plans_on(self, dead: set[str]) -> None:
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
            await self._forget_plan(plan)
            why = "a machine of the plan failed"
            key = {"workload": msg.workload_id, "job": msg.job.name}
            self.decision("cm.reject", {**key, "why": why})
            self._result(msg, False, why)

    @on(HostUp)
    async def host_up(self, msg: HostUp) -> None:
        if await self.current_fence() is None:
            return
        hosts = self.view.hosts_under(msg.node)
        if hosts:
            await self.store(fleet.set_health, hosts, True)
            self.view.set_health(hosts, True)

    # ---- membership (RAS) -----------------------------------------------------------
    @on(MembershipChanged)
    async def membership(self, _: MembershipChanged) -> None:
        self.rechecks = 0
        await self._reload()

    @on(_TransitRecheck)
    async def transit_recheck(self, _: _TransitRecheck) -> None:
        self.recheck_armed = False
        await self._reload()

    async def _reload(self) -> None:
        """Re-read the cluster's machines; restart jobs on machines that left; tell the RMS."""
        old = self.view
        self.view = await ClusterView.fetch(self, self.params.cluster, previous=old)
        await self._drop_strays()
        view = self.view
        if self.fence is not None and (
            old.machines.keys() != view.machines.keys() or old.transit != view.transit
        ):
            self.send_reliably(
                self.rms,
                ClusterChanged(
                    cm_epoch=self.fence.epoch,
                    cluster=self.params.cluster,
                    machines=len(view.machines),
                ),
            )
        self._watch_transit()

    async def _drop_strays(self) -> None:
        """Restart the jobs that hold a machine RAS moved out of this cluster.

        Like a machine failure (`_replace`), except for a job already stopping
        (e.g. a preemption victim saving its checkpoint): it keeps the machine
        until it has stopped, and the machine's new cluster waits for it.
        """
        if self.fence is None:
            return
        for key in await self.store(fleet.strays, self.params.cluster):
            job = self.running.get(key)
            if job is None or job.stopping is not None:
                continue
            self.decision("cm.machine-left", {"workload": key[0], "job": key[1]})
            await self._replace(key)

    def _watch_transit(self) -> None:
        p = self.params
        if self.view.transit and not self.recheck_armed and self.rechecks < p.transit_rechecks_max:
            self.rechecks += 1
            self.recheck_armed = True
            self.set_timer(p.transit_recheck, _TransitRecheck())

    async def _release_in_store(self, key: tuple[str, str], state: str) -> Fence | None:
        """Free a job's machines in the store; returns the fence it was done under.

        None (and a trace) if this CM may not: one that does not lead the
        cluster keeps the job as it is, since telling the RMS it ended while
        the store still gives it its machines would leave them held by a job
        that nobody runs. Fenced by the attempt too: an attempt that another
        cluster replaced is not this CM's to end.
        """
        fence = await self.current_fence()
        job = self.running.get(key)
        attempt = job.attempt if job is not None else None
        if fence is not None and await self.store(
            fleet.release_job, fence, self.now_us, key[0], key[1], state, attempt
        ):
            return fence
        self.decision("cm.release-refused", {"workload": key[0], "job": key[1], "state": state})
        return None

    async def _replace(self, key: tuple[str, str]) -> None:
        """Restart a job hit by a machine failure on spare machines, from its checkpoint.

        Only while its dispatch stands: one that moved on is released instead.
        """
        job = self.running.get(key)
        if job is None:
            return
        if not await self._dispatch_stands(key, job.attempt):
            await self._drop_gone(key)
            await self._free_leftovers()
            return
        fence = await self._release_in_store(key, "STOPPED")
        if fence is None:
            return
        self.send(job.agent, AgentStop(checkpoint=False))
        self.running.pop(key, None)
        self.view.release(key)
        if self.params.on_host_failure == "report":
            self.send_reliably(
                self.rms,
                JobEnded(
                    workload_id=key[0], job=key[1], cluster=self.params.cluster, reason="failed"
                ),
            )
            return
        request = JobRequest(
            workload_id=key[0],
            job=key[1],
            gpu_type=job.spec.gpu_type,
            gpus=job.spec.gpus,
            cpu_machines=job.spec.cpu_machines,
            priority=job.priority,
        )
        plan = place_job(self.view.snapshot(), request, self.now_us, allow_preemption=False)
        started = None
        if isinstance(plan, JobPlan):
            started = await self.store(
                fleet.start_job,
                fence,
                self.now_us,
                key[0],
                key[1],
                self.params.cluster,
                job.priority,
                plan.gpus,
                plan.cpu_hosts,
            )
        if started is None or not isinstance(plan, JobPlan):
            self.decision("cm.job-lost", {"workload": key[0], "job": key[1]})
            self.send_reliably(
                self.rms,
                JobEnded(
                    workload_id=key[0], job=key[1], cluster=self.params.cluster, reason="failed"
                ),
            )
            return
        attempt, saved_us = started
        self.decision(
            "cm.job-moved",
            {"workload": key[0], "job": key[1], "attempt": attempt, "from_us": saved_us},
        )
        self.view.allocate(key, job.priority, self.now_us, plan.gpus, plan.cpu_hosts)
        self._launch(
            key,
            job.spec,
            job.priority,
            attempt,
            saved_us,
            job.auction_id,
            plan.gpus,
            plan.cpu_hosts,
            job.pace,
        )


def _agent(workload_id: str, job: str, attempt: int) -> str:
    return f"agent/{workload_id}/{job}/{attempt}"


def _plan_key(msg: ExecutePlan) -> str:
    # Zero-padded: a new leader takes plans up in the order they were awarded.
    return f"{msg.auction_id:012d}/{msg.workload_id}/{msg.job.name}"
