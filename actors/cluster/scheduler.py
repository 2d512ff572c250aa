"""The cluster scheduler: runs a cluster policy (Tiresias, Dally, Shockwave, …) in the RMS role.

It leads the region's scheduler role (`rms/REGION`, so the cluster manager's
reports reach it as they reach MAST's RMS) over one GPU cluster, keeps the
wait queue, and asks its policy what to do: after every arrival, completion,
preemption and failed start and when the policy asked to be woken
(`event` scheduling), or only at every round boundary (`round`).

A decision is carried out with MAST's machinery. Preemptions are stop
orders to the CM (with a checkpoint when preemption costs are on). A start
is an offer to the job's agent (`actors/cluster/job_agent.py`), which may
turn it down (Dally); an accepted offer is recorded in the job queue like an
award (`queue.award`, so at most one dispatch of a job exists) and sent to
the CM as a plan whose victims are the stopping jobs on its machines: the
CM starts the job only once they have saved their checkpoints. The job's
agent trains at the pace of the performance model (`Pace`).

The policy sees a stopping job as waiting and its GPUs as free, as the
reference engine does (`actors/cluster/engine.py`); an offer to a job that is
still stopping is held until it has stopped.

Crash recovery: job accounts and the policy's state are in the store
(`kv`); a new leader rebuilds from them, the job queue and the fleet.
Reports sent to the old leader are resent to the new one (`send_reliably`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors.cluster.jobs import (
    NAMESPACE,
    JobAccount,
    begin_run,
    claims_for,
    close_run,
    hand_over,
    merged,
    pace_for,
    plan_victims,
    policy_view,
    preempt,
    recovered,
    requeue,
    view_of,
)
from actors.cluster.messages import Offer, OfferReply
from actors.cluster.params import JOB, SchedulerParams, agent_address, job_spec
from actors.cluster.semantics import restart_overhead_us
from actors.common.leadership import LeaseHolder
from actors.common.messages import EndReason, ExecutePlan, JobEnded, PlanResult, StopJob, Submitted
from actors.policies.cluster import perf_model
from actors.policies.cluster.api import ClusterView, Decision, Start, TraceJob
from actors.policies.cluster.decision import check_decision
from actors.policies.cluster.placement import tier_of
from actors.policies.cluster.registry import cluster_policy
from emulator.actor import on
from emulator.errors import PolicyContractError
from store import kv
from store.mast import fleet, queue

SAME_INSTANT_DECISIONS_MAX = 1_000
POLICY_KEY = "policy-state"
POLICY_NAMESPACE = "cluster.policy"


class _Decide(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: call the policy (coalesces the events of one instant)."""


class _Wake(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: the policy asked to be called at this time."""

    at_us: int


class _Retry(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: decide again after a refused plan (`refused_retry`)."""


class _Round(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: a round boundary (round scheduling)."""


class _OfferTimeout(msgspec.Struct, frozen=True, tag=True):
    job_id: str
    offer_id: int


class _DispatchTimeout(msgspec.Struct, frozen=True, tag=True):
    job_id: str
    dispatch: int


class ClusterScheduler(LeaseHolder):
    kind = "cluster-scheduler"
    Params = SchedulerParams
    params: SchedulerParams

    async def on_start(self) -> None:
        p = self.params
        self.policy = cluster_policy(p.policy)
        self.trace = {t.job_id: t for t in p.jobs}
        self.cm = f"cm/{p.cluster}"
        self.round_us = (
            round(p.semantics.round_s * 1e6) if p.semantics.scheduling == "round" else None
        )
        self.built_epoch: int | None = None
        self.accounts: dict[str, JobAccount] = {}
        self.finished: list[Any] = []
        self.offers: dict[str, int] = {}  # job → outstanding offer id
        self.next_offer = 0
        self.decide_armed = False
        self.retry_armed = False
        self.wake_timer: int | None = None
        self.last_decision_us = -1
        self.same_instant = 0
        await self.lead(f"rms/{p.region}")
        machines = await self.store(fleet.machines, p.cluster)
        self.rack_of = {m.host: m.rack for m, _ in machines}
        self.gpus_of = {m.host: m.gpus for m, _ in machines}
        self.gpus_total = sum(m.gpus for m, _ in machines)
        await self._leading()
        if self.round_us is not None:
            # The next boundary, this instant included: the engine decides at t = 0 too.
            self.set_timer(-self.now_us % self.round_us, _Round())

    # ---- leadership and rebuild ------------------------------------------------------
    async def _leading(self) -> bool:
        """Whether this instance leads now; a new epoch rebuilds the state from the store."""
        fence = await self.current_fence()
        if fence is None:
            return False
        if fence.epoch != self.built_epoch:
            await self._rebuild(fence.epoch)
            self.built_epoch = fence.epoch
        return True

    async def _rebuild(self, epoch: int) -> None:
        p = self.params
        saved = dict(await self.store(kv.items, NAMESPACE, JobAccount))
        entries = {e.id: e for e in await self.store(queue.in_states, queue.STATES)}
        rows = {r.workload_id: r for r in await self.store(fleet.jobs, p.cluster)}
        self.accounts = {}
        self.offers = {}
        self.policy_state = self.policy.initial_state(p.policy_params)
        if self.policy_state is not None:
            stored = await self.store(kv.get, POLICY_NAMESPACE, POLICY_KEY, type(self.policy_state))
            self.policy_state = stored if stored is not None else self.policy_state
        unheard: list[tuple[str, EndReason]] = []
        for job_id, t in self.trace.items():
            a = saved.get(job_id) or JobAccount(job_id=job_id)
            self.accounts[job_id] = a
            entry, row = entries.get(job_id), rows.get(job_id)
            step = recovered(a, t, entry.state if entry else None, row)
            if step == "began" and row is not None:
                await self._began(a, row.started_us or self.now_us)
            if step in ("stop", "stop-unheard"):
                self._stop(a, "preempted", checkpoint=True)
            if step in ("unheard", "stop-unheard"):
                self.set_timer(p.dispatch_timeout, _DispatchTimeout(job_id, a.dispatch))
            if step in ("done", "failed"):
                # Its end was reported to the last leader, which died before
                # recording it: the fleet has the outcome.
                unheard.append((job_id, step))
        # Once every account is back: an end judged over a part of them would take
        # the trace's first jobs for all of them and end the run (explore: a run of
        # tiresias-philly stopped as "done" after 8 of its 480 jobs).
        for job_id, reason in unheard:
            await self._ended(job_id, reason)
        self.decision("cluster.rebuilt", {"jobs": len(self.accounts), "epoch": epoch})
        self._kick()
        self._end_if_all_ended()

    # ---- events ---------------------------------------------------------------------
    @on(Submitted)
    async def submitted(self, msg: Submitted) -> None:
        if not await self._leading():
            return
        a = self.accounts.get(msg.workload_id)
        if a is None or a.state != "future":
            return
        t = self.trace[msg.workload_id]
        a.state, a.queued_since_us, a.ready_us = "waiting", t.submit_us, t.submit_us
        # Wider than the whole cluster: it can never run (the engine fails it too).
        if t.gpus > self.gpus_total and await self.store(
            queue.transition, t.job_id, queue.QUEUED, "FAILED", self.now_us
        ):
            a.state = "failed"
        await self._save(a)
        if a.state == "waiting":  # a job failed at arrival changes nothing to decide on
            self._kick()
        self._end_if_all_ended()

    @on(OfferReply)
    async def offer_reply(self, msg: OfferReply) -> None:
        # Leadership first: a new epoch rebuilds the offers (explore: tiresias-philly).
        if not await self._leading() or self.offers.get(msg.job_id) != msg.offer_id:
            return
        del self.offers[msg.job_id]
        a = self.accounts[msg.job_id]
        if a.state != "offered":
            return
        if msg.accept:
            await self._dispatch(a)
        else:
            self._turned_down(a)

    @on(_OfferTimeout)
    async def offer_timeout(self, msg: _OfferTimeout) -> None:
        if await self._leading() and self.offers.get(msg.job_id) == msg.offer_id:
            del self.offers[msg.job_id]
            a = self.accounts[msg.job_id]
            if a.state == "offered":
                self._turned_down(a)
                # An agent that does not answer is not a policy's answer: nothing else
                # may happen for the job to be decided on again (a lone job waited
                # forever), so its wait is an event of its own, as a failed dispatch is.
                self._kick()

    @on(PlanResult)
    async def plan_result(self, msg: PlanResult) -> None:
        if not await self._leading():
            return
        a = self.accounts.get(msg.workload_id)
        if a is None or a.dispatch != msg.auction_id:
            return
        if a.state == "stopping":
            # Preempted before this answer: started, its stop brings its end. Refused,
            # perhaps by a new CM leader while its old one had started it: the store says.
            if not msg.ok:
                await self._end_if_unstarted(a)
            return
        if a.state != "dispatching":
            return
        if msg.ok:
            await self._began(a, self.now_us)
            return
        if (started := await self._started_row(a)) is not None:
            # A refusal does not prove it never started: its CM's ok may have been
            # lost, a later leader refusing the resent plan (`gang` otherwise).
            self.decision("cluster.started-unheard", {"job": a.job_id})
            await self._began(a, started.started_us or self.now_us)
            return
        self.decision("cluster.plan-refused", {"job": a.job_id, "why": msg.reason})
        await self._back_to_queue(a, kick=False)
        if not self.retry_armed:
            # One retry for all refusals: a timer per refusal, each retry refused
            # again, kept a population of timers deciding many times a second.
            self.retry_armed = True
            self.set_timer(self.params.refused_retry, _Retry())

    async def _began(self, a: JobAccount, begin_us: int) -> None:
        """Its CM started the dispatched job at `begin_us`: it runs."""
        if not await self.store(
            queue.transition, a.job_id, ("DISPATCHING",), "RUNNING", self.now_us, a.dispatch
        ):
            return
        begin_run(a, begin_us)
        await self._save(a)

    @on(_DispatchTimeout)
    async def dispatch_timeout(self, msg: _DispatchTimeout) -> None:
        # Leadership first: a new epoch rebuilds the accounts from the store.
        if not await self._leading():
            return
        a = self.accounts.get(msg.job_id)
        if a is None or a.state not in ("dispatching", "stopping") or a.dispatch != msg.dispatch:
            return
        # Its CM may have started it all the same, its answer lost or late: the
        # store says. Sent back to the queue, it would be dispatched again while
        # it runs (`gang`).
        if a.state == "stopping":
            await self._end_if_unstarted(a)
        elif (started := await self._started_row(a)) is not None:
            self.decision("cluster.started-unheard", {"job": a.job_id})
            await self._began(a, started.started_us or self.now_us)
        else:
            self._stop(a, "aborted", checkpoint=False)
            await self._back_to_queue(a)

    async def _started_row(self, a: JobAccount) -> fleet.JobRow | None:
        """The job's row in the fleet if its CM started it under its current dispatch."""
        p = self.params
        rows = await self.store(
            fleet.dispatches, p.cluster, p.region, fleet.LIVE_JOB_STATES, a.job_id
        )
        return next((row for row, auction in rows if auction == a.dispatch), None)

    async def _end_if_unstarted(self, a: JobAccount) -> None:
        """A job preempted before its start was heard: its run ends now if its CM never
        started it (its plan refused, or lost with a leader), as no stop will bring an end."""
        entry = await self.store(queue.get, a.job_id)
        if entry is None or entry.state != "DISPATCHING" or await self._started_row(a):
            return  # started: its stop brings its end
        self.decision("cluster.stop-unstarted", {"job": a.job_id})
        a.begin_us = None  # it held no GPU: no run to count
        await self._ended(a.job_id, "preempted")

    @on(JobEnded)
    async def job_ended(self, msg: JobEnded) -> None:
        if not await self._leading():
            return
        a = self.accounts.get(msg.workload_id)
        if a is not None and msg.auction_id and msg.auction_id != a.dispatch:
            # An earlier dispatch's attempt (its report resent across a failover):
            # the job was dispatched again since.
            self.decision("cluster.stale-end", {"job": msg.workload_id, "auction": msg.auction_id})
            return
        await self._ended(msg.workload_id, msg.reason)

    async def _ended(self, job_id: str, reason: EndReason) -> None:
        a = self.accounts.get(job_id)
        if a is None or a.state not in ("dispatching", "running", "stopping"):
            return
        now = self.now_us
        row = await self.store(fleet.job, job_id, JOB)
        saved = float(row.checkpoint_us) if row is not None else a.work_us
        t = self.trace[job_id]
        if reason == "done":
            if not await self.store(
                queue.transition, job_id, ("DISPATCHING", "RUNNING"), "DONE", now, a.dispatch
            ):
                return
            await self._hand_over(a, now)
            close_run(a, now, float(t.duration_us), preempted=False)
            a.state, a.finish_us = "done", now
            self.finished.append(view_of(a, t, now, ()))
            self.decision("cluster.job-done", {"job": job_id, "jct_s": (now - t.submit_us) / 1e6})
        else:
            preempted = reason == "preempted"
            if not await self.store(
                queue.transition,
                job_id,
                ("DISPATCHING", "RUNNING"),
                "PENDING",
                now,
                a.dispatch,
                preempted,
            ):
                return
            await self._hand_over(a, now)
            held_offer = (a.claims, a.begins_us)  # of the deferred start, if any
            stop_us = a.stop_us
            close_run(a, now, saved, preempted=preempted)
            requeue(a, now, preempted=preempted, stop_us=stop_us)
            if a.deferred is not None:
                start, a.deferred = a.deferred, None
                a.claims, a.begins_us = held_offer
                self._offer(a, start)
        await self._save(a)
        self._end_if_all_ended()
        if reason != "preempted":
            # The policy saw a preempted job waiting and its GPUs free from the
            # order on: its stop changes nothing to decide on (nor does it in
            # the engine, which decides on arrivals, ends and wake-ups only).
            self._kick()

    async def _hand_over(self, a: JobAccount, now: int) -> None:
        """Its run ended: what others counted on of its GPUs passes on, saved (`hand_over`)."""
        for b in hand_over(self.accounts, a, now):
            await self._save(b)

    @on(_Decide)
    async def decide_now(self, _: _Decide) -> None:
        self.decide_armed = False
        await self._decide()

    @on(_Wake)
    def wake(self, msg: _Wake) -> None:
        self.wake_timer = None
        self._decide_soon()

    @on(_Retry)
    def retry(self, _: _Retry) -> None:
        self.retry_armed = False
        self._kick()

    @on(_Round)
    def round_boundary(self, _: _Round) -> None:
        assert self.round_us is not None
        self.set_timer(self.round_us, _Round())
        self._decide_soon()

    def _kick(self) -> None:
        """An arrival or an end: decide on it (event scheduling; rounds decide on their own)."""
        if self.round_us is None:
            self._decide_soon()

    def _decide_soon(self) -> None:
        """Decide once, after every event of this instant (`last`), as the engine does.

        Two jobs ending at one instant, or an arrival at a wake-up, make one
        decision that sees both, whatever order the kernel hands them over in.
        """
        if not self.decide_armed:
            self.decide_armed = True
            self.set_timer(0, _Decide(), last=True)

    # ---- deciding ----------------------------------------------------------------------
    async def _decide(self) -> None:
        if not await self._leading():
            return
        p = self.params
        now = self.now_us
        self.same_instant = self.same_instant + 1 if now == self.last_decision_us else 0
        self.last_decision_us = now
        if self.same_instant > SAME_INSTANT_DECISIONS_MAX:
            raise PolicyContractError(
                f"policy {p.policy!r} asked to decide {self.same_instant} times at t={now} µs"
            )
        view = await self._view()
        if self.round_us is not None and not view.jobs:
            # A round with no job present is no decision, as in the engine,
            # which skips empty rounds: a policy whose state moves with time
            # (Shockwave's contention integral under ftf_contention "trace")
            # would otherwise see one decision more than there. The jobs that
            # finished since the last one are kept for the next.
            return
        self.finished = []
        decision, state = self.policy.decide(view, self.policy_state, p.policy_params)
        check_decision(p.policy, view, decision, self.rack_of)
        if state is not None and state != self.policy_state:
            await self.store(kv.put, POLICY_NAMESPACE, POLICY_KEY, state)
        self.policy_state = state
        if decision.preempt or decision.start:
            self.decision(
                "cluster.decision",
                {"preempt": list(decision.preempt), "start": [s.job_id for s in decision.start]},
            )
        for job_id in decision.preempt:
            await self._preempt(self.accounts[job_id])
        for start in decision.start:
            a = self.accounts[start.job_id]
            # In decision order, as the engine allocates: what each start counts on.
            placement = merged(start.placement)
            a.claims, a.begins_us = claims_for(self.accounts, placement, now, self.gpus_of)
            a.next_slowdown = self._slowdown(self.trace[a.job_id], placement)
            if a.state == "stopping":
                a.deferred = start  # offered once its checkpoint is saved
            else:
                self._offer(a, start)
        self._arm_wake(decision)

    async def _view(self) -> ClusterView:
        p = self.params
        machines = await self.store(fleet.machines, p.cluster)
        return policy_view(
            self.accounts,
            self.trace,
            machines,
            self.now_us,
            p.gpu_type,
            self.round_us,
            self.finished,
            conventions=p.semantics.view_fields(),
        )

    def _arm_wake(self, decision: Decision) -> None:
        if self.round_us is not None:
            return
        if self.wake_timer is not None:
            self.cancel_timer(self.wake_timer)
            self.wake_timer = None
        if decision.wake_at_us is not None:
            at = max(self.now_us, decision.wake_at_us)
            self.wake_timer = self.set_timer(at - self.now_us, _Wake(at))

    async def _preempt(self, a: JobAccount) -> None:
        order = preempt(a, self.now_us)
        # Saved whatever the order: a withdrawn deferred start left in the store
        # would come back with a new leader, holding GPUs given to another job
        # (explore: dally-racks, a host overbooked after failovers).
        await self._save(a)
        if order == "withdraw":
            self.offers.pop(a.job_id, None)
        elif order == "stop":
            # Always with a checkpoint: without preemption costs it is free (the
            # run's pace has `checkpoint_us` 0), not skipped. A stop without one
            # would send the job back to its last checkpoint, and a preempted job
            # keeps its progress in the engine and in the peers' simulators.
            self._stop(a, "preempted", checkpoint=True)

    def _stop(self, a: JobAccount, reason: EndReason, *, checkpoint: bool) -> None:
        self.send_reliably(
            self.cm,
            StopJob(
                workload_id=a.job_id,
                job=JOB,
                reason=reason,
                checkpoint=checkpoint,
                rms_epoch=self._epoch(),
                auction_id=a.dispatch,
            ),
        )

    def _offer(self, a: JobAccount, start: Start) -> None:
        t = self.trace[a.job_id]
        self.next_offer += 1
        a.state, a.placement = "offered", merged(start.placement)
        self.offers[a.job_id] = self.next_offer
        self.send(
            agent_address(a.job_id),
            Offer(
                offer_id=self.next_offer,
                start=start,
                job=view_of(a, t, self.now_us, ()),
            ),
        )
        self.set_timer(self.params.offer_timeout, _OfferTimeout(a.job_id, self.next_offer))

    def _turned_down(self, a: JobAccount) -> None:
        a.state, a.placement = "waiting", ()
        a.claims, a.begins_us = (), None
        self.decision("cluster.offer-declined", {"job": a.job_id})

    async def _dispatch(self, a: JobAccount) -> None:
        p = self.params
        fence = await self.current_fence()
        now = self.now_us
        auction = await self.store(queue.open_auction, fence, now, a.job_id) if fence else None
        if (
            fence is None
            or auction is None
            or not await self.store(queue.award, fence, now, a.job_id, auction, p.region)
        ):
            self._turned_down(a)
            return
        t = self.trace[a.job_id]
        slowdown = self._slowdown(t, a.placement)
        a.state, a.dispatch = "dispatching", auction
        a.pace = pace_for(
            t,
            slowdown,
            preemption_cost=p.semantics.preemption_cost,
            overhead_us=restart_overhead_us(p.semantics, t, a.work_us, slowdown),
        )
        await self._save(a)
        # Only the stopping jobs whose GPUs it counts on (`claims_for`), still stopping.
        victims = tuple((job_id, JOB) for job_id in plan_victims(self.accounts, a.claims))
        self.send_reliably(
            self.cm,
            ExecutePlan(
                auction_id=auction,
                rms_epoch=fence.epoch,
                workload_id=a.job_id,
                job=job_spec(t, p.gpu_type, int(p.checkpoint_every)),
                priority=0,
                gpus=a.placement,
                cpu_hosts=(),
                victims=victims,
                pace=a.pace,
            ),
        )
        self.set_timer(p.dispatch_timeout, _DispatchTimeout(a.job_id, auction))

    async def _back_to_queue(self, a: JobAccount, *, kick: bool = True) -> None:
        """A dispatch that did not start: back to the queue, no preemption."""
        await self.store(
            queue.transition, a.job_id, ("DISPATCHING",), "PENDING", self.now_us, a.dispatch
        )
        close_run(a, self.now_us, a.work_us, preempted=False)
        a.state, a.ready_us = "waiting", self.now_us
        await self._save(a)
        if kick:
            self._kick()

    def _slowdown(self, t: TraceJob, placement: tuple[tuple[str, int], ...]) -> float:
        """What placing `t` there costs it (its tier's slowdown, with the communication model)."""
        if not self.params.semantics.comm_model:
            return 1.0
        return perf_model.slowdown(t.model, tier_of(placement, self.rack_of), t.gpus)

    def _end_if_all_ended(self) -> None:
        """The trace's last job ended (done or failed): the run ends with this instant.

        The scenario's `duration` is only an upper bound for a cluster run; a
        run that reaches it with jobs left is cut short (`Kernel.cut_short`).
        """
        if all(a.state in ("done", "failed") for a in self.accounts.values()):
            self.end_run()

    def _epoch(self) -> int:
        """The epoch this instance's orders carry (0 if it does not lead: no CM obeys)."""
        return self.fence.epoch if self.fence is not None else 0

    async def _save(self, a: JobAccount) -> None:
        await self.store(kv.put, NAMESPACE, a.job_id, a)
