"""What a cluster manager does when it begins to lead, beyond rebuilding its jobs.

Part of `ClusterManager` (actors/common/cm/manager.py, whose module docstring tells why):
probing the agents of the jobs it rebuilt (agents that died unseen), and
settling work that moved on while it was away (jobs whose dispatch is gone,
ends nobody heard of, allocations left by attempts that are over).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from actors.common.cm.ledger import ClusterView
from actors.common.leadership import LeaseHolder
from actors.common.messages import AgentAlive, AgentProbe, AgentStop, EndReason, JobEnded
from emulator.actor import on
from store.mast import fleet

if TYPE_CHECKING:
    from actors.common.cm.manager import CMParams, Pending, Running


class _Probe(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: probe again the agents that did not answer, or give up on them."""

    round: int
    sent: int


class CMRecovery(LeaseHolder):
    """The recovery half of a cluster manager; `ClusterManager` is the other."""

    params: CMParams
    rms: str
    view: ClusterView
    running: dict[tuple[str, str], Running]
    pending: list[Pending]
    # Agents probed by the current round and not heard from: key → attempt.
    unanswered: dict[tuple[str, str], int]
    probe_round: int

    async def _start_ready(self) -> None:
        raise NotImplementedError

    async def _release(self, key: tuple[str, str], reason: EndReason, state: str) -> None:
        raise NotImplementedError

    async def _replace(self, key: tuple[str, str]) -> None:
        raise NotImplementedError

    # ---- work that moved on, ends nobody heard of (module docstring) --------------------
    async def _dispatch_stands(self, key: tuple[str, str], attempt: int) -> bool:
        """Whether the job's attempt still serves a standing dispatch of its workload."""
        p = self.params
        rows = await self.store(
            fleet.dispatches, p.cluster, p.region, fleet.LIVE_JOB_STATES, key[0]
        )
        return any(r.job == key[1] and r.attempt == attempt and a is not None for r, a in rows)

    async def _drop_gone(self, key: tuple[str, str]) -> None:
        """Release a job whose dispatch is gone: no restart, no report (module docstring)."""
        job = self.running.get(key)
        fence = await self.current_fence()
        if job is None or fence is None:
            return
        self.decision(
            "cm.dispatch-gone", {"workload": key[0], "job": key[1], "attempt": job.attempt}
        )
        self.send(job.agent, AgentStop(checkpoint=False))
        # Refused only if the job has started anew elsewhere meanwhile: then what
        # this attempt holds here is a left-over, for `_free_leftovers`.
        await self.store(
            fleet.release_job, fence, self.now_us, key[0], key[1], "STOPPED", job.attempt
        )
        self.running.pop(key, None)
        self.unanswered.pop(key, None)
        self.view.release(key)
        for plan in self.pending:
            plan.waiting.discard(key)
        await self._start_ready()

    async def _report_unheard_ends(self) -> None:
        """Report the jobs STOPPED while their dispatch stands (module docstring)."""
        p = self.params
        stopped = await self.store(fleet.dispatches, p.cluster, p.region, ("STOPPED",))
        for row, auction_id in stopped:
            if auction_id is None:
                continue
            self.decision("cm.end-reported", {"workload": row.workload_id, "job": row.job})
            self.send_reliably(
                self.rms,
                JobEnded(
                    workload_id=row.workload_id, job=row.job, cluster=p.cluster, reason="failed"
                ),
            )

    async def _free_leftovers(self) -> None:
        """Free what attempts that are over left on this cluster's machines (`store.mast.fleet`)."""
        fence = await self.current_fence()
        if fence is None:
            return
        freed = await self.store(fleet.free_leftovers, fence, self.now_us, self.params.cluster)
        if freed:
            self.decision("cm.leftovers-freed", {"allocations": [list(f) for f in freed]})
            self.view = await ClusterView.fetch(self, self.params.cluster, previous=self.view)

    # ---- agents that died unseen (module docstring) --------------------------------------
    def _probe_agents(self) -> None:
        """Begin a probe round over the agents of every job rebuilt from the store."""
        self.probe_round += 1
        self.unanswered = {key: job.attempt for key, job in self.running.items()}
        if self.unanswered:
            self._send_probes(_Probe(self.probe_round, 0))

    def _send_probes(self, tick: _Probe) -> None:
        for key in sorted(self.unanswered):
            job = self.running.get(key)
            if job is not None:
                probe = AgentProbe(workload_id=key[0], job=key[1], attempt=job.attempt)
                self.send(job.agent, probe)
        self.set_timer(self.params.probe_every, _Probe(tick.round, tick.sent + 1))

    @on(AgentAlive)
    def alive(self, msg: AgentAlive) -> None:
        key = (msg.workload_id, msg.job)
        if self.unanswered.get(key) == msg.attempt:
            del self.unanswered[key]

    @on(_Probe)
    async def probe_tick(self, tick: _Probe) -> None:
        if tick.round != self.probe_round or not self.unanswered or self.fence is None:
            return  # a later round replaced this one, all answered, or no longer leading
        # Jobs that ended, or restarted as a new attempt, meanwhile need no answer.
        for key, attempt in list(self.unanswered.items()):
            job = self.running.get(key)
            if job is None or job.attempt != attempt:
                del self.unanswered[key]
        if tick.sent < self.params.probes_max:
            if self.unanswered:
                self._send_probes(tick)
            return
        lost, self.unanswered = sorted(self.unanswered), {}
        if await self.current_fence() is None:
            return  # deposed meanwhile: the next leader probes for itself
        for key in lost:
            job = self.running.get(key)
            if job is None:
                continue
            self.decision(
                "cm.agent-lost", {"workload": key[0], "job": key[1], "attempt": job.attempt}
            )
            if job.stopping is not None:
                # Its checkpoint died with it: what it saved before is what remains.
                await self._release(key, job.stopping, "STOPPED")
            else:
                await self._replace(key)
