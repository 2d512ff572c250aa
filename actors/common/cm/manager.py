"""The cluster manager (CM) of one dynamic cluster: executes placement plans.

It takes a plan only while the plan's award stands and its machines fit,
stops the plan's victims with a checkpoint, and once every victim has
stopped and released its machines allocates them (a compare-and-set in the
store) and starts the job's agent (actors/common/cm/plans.py). A machine
failure restarts the jobs on it from their last checkpoint on spare
machines, or reports them failed.

Crash recovery: the CM rebuilds its jobs from the store. A preemption it
ordered is recorded there first (the job goes CHECKPOINTING), so a restarted
CM orders it again and reports the job `preempted` once it has stopped; the
agents' reports reach whichever incarnation leads (they are resent until
acknowledged). Plans waiting for their victims are recorded in the store too
and taken up by the next leader (actors/common/cm/plans.py). A CM that begins
to lead also probes the agents of the jobs it rebuilt, and settles the work
that moved on while it was away (actors/common/cm/recovery.py).

RAS changes the cluster's membership (`MembershipChanged`): the CM re-reads
its machines; a job on a machine that left is treated like one on a failed
machine (unless it is already stopping: it keeps the machine until it has
stopped), and the RMS is told (`ClusterChanged`). A machine that joined while
a job of another cluster holds it is in transit: unused, and re-read every
`transit_recheck` until that job let it go.

The actor keeps the mailbox: every handler and self-timer is here, and
delegates to the collaborators it holds, `Plans` (a new one per led epoch)
and `CMRecovery` (one per incarnation; a subclass may name another class in
`Recovery`). They see this actor through the protocols of their modules and
never import this one. It also keeps the jobs it runs (`running`): starting
their agents, stopping them, releasing them and restarting them.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from actors.common.cm.ledger import ClusterLedger
from actors.common.cm.plans import Plans
from actors.common.cm.recovery import CMRecovery
from actors.common.cm.setup import setup_time_us
from actors.common.cm.state import CMParams, Running
from actors.common.job_agent import JobAgent
from actors.common.leadership import LeaseHolder
from actors.common.membership import ClusterChanged, MembershipChanged
from actors.common.messages import (
    AgentAlive,
    AgentFinished,
    AgentLost,
    AgentRunning,
    AgentStart,
    AgentStop,
    AgentStopped,
    EndReason,
    ExecutePlan,
    JobEnded,
    Pace,
    StopJob,
    agent_address,
)
from actors.policies.mast.placement.place import place_job
from actors.policies.mast.placement.snapshot import JobPlan, JobRequest
from emulator.actor import on
from emulator.sysmsg import HostDown, HostUp
from store.mast import fleet, queue
from store.mast.queue import Fence
from store.mast.records import JobSpec

__all__ = ["CMParams", "ClusterManager"]


# Self-timers. The trace names a timer by its class, so these names stay as they are.
class _Probe(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: probe again the agents that did not answer, or give up on them."""

    round: int
    sent: int


class _StopTimeout(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: stop waiting for a stopping job's agent, which may be dead."""

    key: tuple[str, str]
    attempt: int


class _TransitRecheck(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: re-read the cluster, machines in transit may be free now."""


class ClusterManager(LeaseHolder):
    """One instance of a cluster's CM role (`cm/CLUSTER`); the one holding its lease acts.

    What must stay true: a job's machines are freed in the store before
    anyone is told it ended, and a job starts or restarts here only while its
    dispatch stands.
    """

    kind = "mast-cm"
    Params = CMParams
    params: CMParams
    # What a new leader settles (actors/common/cm/recovery.py); a test may name a broken one.
    Recovery: ClassVar[type[CMRecovery]] = CMRecovery

    async def on_start(self) -> None:
        p = self.params
        self.rms = f"rms/{p.region}"
        # A follower keeps no leader state: `on_lead` builds it once this instance leads.
        self.ledger = ClusterLedger(p.cluster, ())
        self.running: dict[tuple[str, str], Running] = {}
        self.plans = Plans(self)
        self.recovery = self.Recovery(self)
        self.rechecks = 0
        self.recheck_armed = False
        await self.lead(f"cm/{p.cluster}")

    async def on_lead(self) -> None:
        """A newly led epoch (also after a restart): rebuild from the store."""
        p = self.params
        self.ledger = await ClusterLedger.fetch(self, p.cluster)
        self.running = {}
        self.plans = Plans(self)
        gone: list[tuple[str, str]] = []
        early: list[tuple[str, str]] = []
        rows = await self.store(fleet.dispatches, p.cluster, p.region, fleet.LIVE_JOB_STATES)
        for row, auction_id in rows:
            spec = await self.store(queue.spec, row.workload_id)
            job = next((j for j in spec.jobs if j.name == row.job), None) if spec else None
            if job is not None:
                key = (row.workload_id, row.job)
                agent = agent_address(row.workload_id, row.job, row.attempt)
                running = Running(job, row.priority, row.attempt, agent, auction_id or 0)
                self.running[key] = running
                if auction_id is None:
                    gone.append(key)
                elif row.state == "CHECKPOINTING" and self.fence is not None:
                    # A preemption the last incarnation began: order the stop again
                    # (the agent ignores a second order) and wait for it as before.
                    running.stopping = "preempted"
                    self._order_stop(key, running, checkpoint=True)
                    if self.bug("cm-takeover-frees-checkpointing"):
                        early.append(key)
        if self.fence is not None:
            for key in gone:
                await self.recovery.drop_gone(key)
            await self.recovery.report_unheard_ends()
            await self.recovery.free_leftovers()
        self.recovery.probe_agents()
        # A membership change may have been half handled when this CM went down.
        self.rechecks = 0
        self.recheck_armed = False
        await self._drop_strays()
        self._watch_transit()
        await self.plans.take_up()
        for key in early:
            # Seeded bug `cm-takeover-frees-checkpointing`: a new leader frees a
            # victim caught mid-checkpoint at once instead of waiting for its stop.
            await self.release(key, "preempted", "STOPPED")

    # ---- plans (actors/common/cm/plans.py) -----------------------------------------------
    @on(ExecutePlan)
    async def execute(self, msg: ExecutePlan) -> None:
        await self.plans.execute(msg)

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
        """Start the job's agent on its first machine (it dies if that machine does)."""
        agent = agent_address(key[0], key[1], attempt)
        host = min([h for h, _ in gpus] + list(cpu_hosts))
        if pace is None:
            setup_us, checkpoint_us = setup_time_us(self.rng("setup")), self.params.checkpoint_cost
        else:
            # The performance model's costs: a resumed job restores its checkpoint
            # first; a run that restarts (the first too) pays the flat overhead.
            setup_us = (pace.restore_us if saved_us > 0 else 0) + pace.overhead_us
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

    # ---- stopping ----------------------------------------------------------------------
    async def stop(self, key: tuple[str, str], reason: EndReason, *, checkpoint: bool) -> None:
        """Order a running job to stop; its end comes back as `AgentStopped` or a timeout."""
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
        if reason == "preempted" and checkpoint and self.bug("cm-frees-victim-before-checkpoint"):
            # Seeded bug: the victim's machines are freed when the stop is ordered,
            # not once its checkpoint is saved.
            await self.release(key, reason, "STOPPED")

    def _order_stop(self, key: tuple[str, str], job: Running, *, checkpoint: bool) -> None:
        self.send(job.agent, AgentStop(checkpoint=checkpoint))
        # The agent may be dead (its machine failed): do not wait for it forever.
        self.set_timer(self.params.stop_timeout, _StopTimeout(key, job.attempt))

    @on(StopJob)
    async def stop_job(self, msg: StopJob) -> None:
        key = (msg.workload_id, msg.job)
        stale = await self.plans.stale_rms_epoch(msg.rms_epoch, "stop order")
        if stale:
            self.decision("cm.ignore", {"workload": key[0], "job": key[1], "why": stale})
            return
        withdrawn = await self.plans.withdraw(key, msg.reason, msg.auction_id)
        job = self.running.get(key)
        if job is None:
            if not withdrawn and msg.auction_id:
                await self.plans.stop_before_plan(key, msg.auction_id)
            return
        if msg.auction_id and job.auction_id and job.auction_id != msg.auction_id:
            why = f"stop order for dispatch {msg.auction_id}, running {job.auction_id}"
            self.decision("cm.ignore", {"workload": key[0], "job": key[1], "why": why})
            return
        await self.stop(key, msg.reason, checkpoint=msg.checkpoint)

    @on(AgentStopped)
    async def stopped(self, msg: AgentStopped) -> None:
        key = (msg.workload_id, msg.job)
        job = self.running.get(key)
        if job is None or job.attempt != msg.attempt:
            return
        await self.release(key, job.stopping or "failed", "STOPPED")

    @on(_StopTimeout)
    async def stop_timeout(self, msg: _StopTimeout) -> None:
        job = self.running.get(msg.key)
        if job is not None and job.attempt == msg.attempt and job.stopping is not None:
            await self.release(msg.key, job.stopping, "STOPPED")

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

    @on(AgentLost)
    async def agent_crashed(self, msg: AgentLost) -> None:
        job = self.running.get((msg.workload_id, msg.job))
        if job is not None and job.attempt == msg.attempt:
            await self.agent_lost((msg.workload_id, msg.job))

    async def agent_lost(self, key: tuple[str, str]) -> None:
        """The job's agent is gone with its state (it crashed, or answers no probe)."""
        job = self.running[key]
        self.decision("cm.agent-lost", {"workload": key[0], "job": key[1], "attempt": job.attempt})
        if job.stopping is not None:
            # Its checkpoint died with it: what it saved before is what remains.
            await self.release(key, job.stopping, "STOPPED")
        else:
            await self.replace(key)

    @on(AgentFinished)
    async def finished(self, msg: AgentFinished) -> None:
        key = (msg.workload_id, msg.job)
        job = self.running.get(key)
        if job is not None and job.attempt == msg.attempt:
            await self.release(key, "done", "DONE")

    def report_end(self, key: tuple[str, str], reason: EndReason, auction_id: int) -> None:
        """Tell the RMS a job of the dispatch `auction_id` ended (resent until acknowledged)."""
        self.send_reliably(
            self.rms,
            JobEnded(
                workload_id=key[0],
                job=key[1],
                cluster=self.params.cluster,
                reason=reason,
                auction_id=auction_id,
            ),
        )

    async def release(self, key: tuple[str, str], reason: EndReason, state: str) -> None:
        """Free a job's machines, report its end to the RMS, start the plans it held up."""
        if await self._release_in_store(key, state) is None:
            return
        job = self.running.pop(key, None)
        self.ledger.release(key)
        self.report_end(key, reason, job.auction_id if job is not None else 0)
        await self.plans.job_released(key)

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

    # ---- agents that died unseen (actors/common/cm/recovery.py) ---------------------------
    @on(AgentAlive)
    def alive(self, msg: AgentAlive) -> None:
        self.recovery.alive(msg)

    def probe_later(self, round_: int, sent: int) -> None:
        self.set_timer(self.params.probe_every, _Probe(round_, sent))

    @on(_Probe)
    async def probe_tick(self, tick: _Probe) -> None:
        await self.recovery.probe_tick(tick.round, tick.sent)

    # ---- hardware -----------------------------------------------------------------------
    @on(HostDown)
    async def host_down(self, msg: HostDown) -> None:
        if await self.current_fence() is None:
            return  # every instance watches; the leader acts (the kernel retells a new one)
        hosts = self.ledger.hosts_under(msg.node)
        if not hosts:
            return
        await self.store(fleet.set_health, hosts, False)
        self.ledger.set_health(hosts, False)
        await self.plans.refuse_on(set(hosts))
        for key in self.ledger.jobs_on(hosts):
            await self.replace(key)

    @on(HostUp)
    async def host_up(self, msg: HostUp) -> None:
        if await self.current_fence() is None:
            return
        hosts = self.ledger.hosts_under(msg.node)
        if hosts:
            await self.store(fleet.set_health, hosts, True)
            self.ledger.set_health(hosts, True)

    async def replace(self, key: tuple[str, str]) -> None:
        """Restart a job hit by a machine failure on spare machines, from its checkpoint.

        Only while its dispatch stands: one that moved on is released instead.
        """
        job = self.running.get(key)
        if job is None:
            return
        if not await self.recovery.dispatch_stands(key, job.attempt):
            await self.recovery.drop_gone(key)
            await self.recovery.free_leftovers()
            return
        if self.bug("cm-restart-keeps-old-allocation"):
            # Seeded bug: the failed attempt's machines are not freed in the store
            # before the job starts again elsewhere.
            fence = await self.current_fence()
        else:
            fence = await self._release_in_store(key, "STOPPED")
        if fence is None:
            return
        self.send(job.agent, AgentStop(checkpoint=False))
        self.running.pop(key, None)
        self.ledger.release(key)
        if self.params.on_host_failure == "report":
            self.report_end(key, "failed", job.auction_id)
            return
        request = JobRequest(
            workload_id=key[0],
            job=key[1],
            gpu_type=job.spec.gpu_type,
            gpus=job.spec.gpus,
            cpu_machines=job.spec.cpu_machines,
            priority=job.priority,
        )
        plan = place_job(self.ledger.snapshot(), request, self.now_us, allow_preemption=False)
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
            self.report_end(key, "failed", job.auction_id)
            return
        attempt, saved_us = started
        if self.bug("cm-restart-from-zero"):
            # Seeded bug: a job moved off a failed machine restarts from scratch,
            # not from its last checkpoint.
            saved_us = 0
        self.decision(
            "cm.job-moved",
            {"workload": key[0], "job": key[1], "attempt": attempt, "from_us": saved_us},
        )
        self.ledger.allocate(key, job.priority, self.now_us, plan.gpus, plan.cpu_hosts)
        self.launch(
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

    # ---- membership (RAS) -----------------------------------------------------------
    @on(MembershipChanged)
    async def membership(self, _: MembershipChanged) -> None:
        self.rechecks = 0
        await self.reload()

    @on(_TransitRecheck)
    async def transit_recheck(self, _: _TransitRecheck) -> None:
        self.recheck_armed = False
        await self.reload()

    async def reload(self) -> None:
        """Re-read the cluster's machines; restart jobs on machines that left; tell the RMS."""
        old = self.ledger
        self.ledger = await ClusterLedger.fetch(self, self.params.cluster, previous=old)
        await self._drop_strays()
        ledger = self.ledger
        if self.fence is not None and (
            old.machines.keys() != ledger.machines.keys() or old.transit != ledger.transit
        ):
            self.send_reliably(
                self.rms,
                ClusterChanged(
                    cm_epoch=self.fence.epoch,
                    cluster=self.params.cluster,
                    machines=len(ledger.machines),
                ),
            )
        self._watch_transit()

    async def _drop_strays(self) -> None:
        """Restart the jobs that hold a machine RAS moved out of this cluster.

        Like a machine failure (`replace`), except for a job already stopping
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
            await self.replace(key)

    def _watch_transit(self) -> None:
        p = self.params
        due = not self.recheck_armed and self.rechecks < p.transit_rechecks_max
        if self.ledger.transit and due:
            self.rechecks += 1
            self.recheck_armed = True
            self.set_timer(p.transit_recheck, _TransitRecheck())
