"""What a cluster manager does when it begins to lead, beyond rebuilding its jobs.

A collaborator of `ClusterManager` (actors/common/cm/manager.py), which holds
one `CMRecovery` per incarnation and sees it through `RecoveryHost`:
probing the agents of the jobs it rebuilt (agents that died unseen), and
settling work that moved on while it was away (jobs whose dispatch is gone,
ends nobody heard of, allocations left by attempts that are over).

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
tells the RMS (or, after a machine failure, before it restarts the job), and
its report is resent until the RMS acknowledges it. One that dies in between,
or before an unreachable RMS (paused, cut off) heard the report, leaves the
job ended in the store while its dispatch stands, and no one would ever
report it again: the workload would stay RUNNING for good. So the rebuild
reports every such job ended, DONE ones `done` and STOPPED ones `failed` (the
store does not say why), and the RMS settles the workload; a report it
already had is ignored there.
"""

from __future__ import annotations

from typing import Protocol

from actors.common.cm.ledger import ClusterLedger
from actors.common.cm.plans import Plans
from actors.common.cm.state import CMCore
from actors.common.messages import AgentAlive, AgentProbe, AgentStop, EndReason
from store.mast import fleet


class RecoveryHost(CMCore, Protocol):
    """What recovery needs of its cluster manager besides `CMCore`."""

    plans: Plans

    async def release(self, key: tuple[str, str], reason: EndReason, state: str) -> None:
        """Free a job's machines and report its end to the RMS."""
        ...

    async def replace(self, key: tuple[str, str]) -> None:
        """Restart a job as if its machine had failed."""
        ...

    async def agent_lost(self, key: tuple[str, str]) -> None:
        """Restart a running job, or end a stopping one, whose agent is gone."""
        ...

    def probe_later(self, round_: int, sent: int) -> None:
        """Call `probe_tick(round_, sent)` back after `probe_every`."""
        ...


class CMRecovery:
    """The recovery half of a cluster manager; `ClusterManager` holds one and is the rest.

    Its own state is the probe round in progress: the agents probed and not
    heard from (key → attempt). What must stay true: a job is restarted only
    while its dispatch stands, and an agent is given up on only after
    `probes_max` unanswered probes by a CM that still leads.
    """

    def __init__(self, cm: RecoveryHost) -> None:
        self.cm = cm
        # Agents probed by the current round and not heard from: key → attempt.
        self.unanswered: dict[tuple[str, str], int] = {}
        self.probe_round = 0

    # ---- work that moved on, ends nobody heard of (module docstring) --------------------
    async def dispatch_stands(self, key: tuple[str, str], attempt: int) -> bool:
        """Whether the job's attempt still serves a standing dispatch of its workload."""
        p = self.cm.params
        rows = await self.cm.store(
            fleet.dispatches, p.cluster, p.region, fleet.LIVE_JOB_STATES, key[0]
        )
        return any(r.job == key[1] and r.attempt == attempt and a is not None for r, a in rows)

    async def drop_gone(self, key: tuple[str, str]) -> None:
        """Release a job whose dispatch is gone: no restart, no report (module docstring)."""
        cm = self.cm
        job = cm.running.get(key)
        fence = await cm.current_fence()
        if job is None or fence is None:
            return
        cm.decision("cm.dispatch-gone", {"workload": key[0], "job": key[1], "attempt": job.attempt})
        cm.send(job.agent, AgentStop(checkpoint=False))
        # Refused only if the job has started anew elsewhere meanwhile: then what
        # this attempt holds here is a left-over, for `free_leftovers`.
        await cm.store(fleet.release_job, fence, cm.now_us, key[0], key[1], "STOPPED", job.attempt)
        cm.running.pop(key, None)
        self.unanswered.pop(key, None)
        cm.ledger.release(key)
        await cm.plans.job_released(key)

    async def report_unheard_ends(self) -> None:
        """Report the jobs that ended while their dispatch stands (module docstring)."""
        cm = self.cm
        p = cm.params
        ended = await cm.store(fleet.dispatches, p.cluster, p.region, ("STOPPED", "DONE"))
        for row, auction_id in ended:
            if auction_id is None:
                continue
            reason: EndReason = "done" if row.state == "DONE" else "failed"
            cm.decision(
                "cm.end-reported", {"workload": row.workload_id, "job": row.job, "reason": reason}
            )
            cm.report_end((row.workload_id, row.job), reason, auction_id)

    async def free_leftovers(self) -> None:
        """Free what attempts that are over left on this cluster's machines (`store.mast.fleet`)."""
        cm = self.cm
        fence = await cm.current_fence()
        if fence is None:
            return
        freed = await cm.store(fleet.free_leftovers, fence, cm.now_us, cm.params.cluster)
        if freed:
            cm.decision("cm.leftovers-freed", {"allocations": [list(f) for f in freed]})
            cm.ledger = await ClusterLedger.fetch(cm, cm.params.cluster, previous=cm.ledger)

    # ---- agents that died unseen (module docstring) --------------------------------------
    def probe_agents(self) -> None:
        """Begin a probe round over the agents of every job rebuilt from the store."""
        self.probe_round += 1
        self.unanswered = {key: job.attempt for key, job in self.cm.running.items()}
        if self.unanswered:
            self._send_probes(self.probe_round, 0)

    def _send_probes(self, round_: int, sent: int) -> None:
        cm = self.cm
        for key in sorted(self.unanswered):
            job = cm.running.get(key)
            if job is not None:
                probe = AgentProbe(workload_id=key[0], job=key[1], attempt=job.attempt)
                cm.send(job.agent, probe)
        cm.probe_later(round_, sent + 1)

    def alive(self, msg: AgentAlive) -> None:
        """An agent answered: it is not lost."""
        key = (msg.workload_id, msg.job)
        if self.unanswered.get(key) == msg.attempt:
            del self.unanswered[key]

    async def probe_tick(self, round_: int, sent: int) -> None:
        """`sent` probes of round `round_` are out: probe again, or give up on the silent."""
        cm = self.cm
        if round_ != self.probe_round or not self.unanswered or cm.fence is None:
            return  # a later round replaced this one, all answered, or no longer leading
        # Jobs that ended, or restarted as a new attempt, meanwhile need no answer.
        for key, attempt in list(self.unanswered.items()):
            job = cm.running.get(key)
            if job is None or job.attempt != attempt:
                del self.unanswered[key]
        if sent < cm.params.probes_max:
            if self.unanswered:
                self._send_probes(round_, sent)
            return
        lost, self.unanswered = sorted(self.unanswered), {}
        if await cm.current_fence() is None:
            return  # deposed meanwhile: the next leader probes for itself
        for key in lost:
            if key in cm.running:
                await cm.agent_lost(key)
