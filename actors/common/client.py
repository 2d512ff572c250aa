"""The client: submits the scenario's workloads to the global queue on time.

Submitting is a write to the job-queue database (so a submitted workload is
never lost, whatever happens to the GMS) followed by a nudge to the GMS (or,
in a cluster-policy run, to the cluster scheduler), sent reliably. The
client keeps one timer, for the next submission; after a crash it resumes
from the first workload the queue does not hold yet, and nudges again about
those still queued (a nudge being resent when it crashed died with it).

With a `patience`, the client also stands for owners who give up: a
workload queued at the lowest priority (opportunistic: over quota, or of a
tenant without one) more than `patience` after its submission, and never
started, is withdrawn. Without it a load above what the fleet runs grows the
queue for as long as the run lasts; with it the queue settles where
withdrawals match the excess. A second timer walks the deadlines in order; a
workload still waiting at its deadline but within quota then is judged again
every `RECHECK_US` until it starts or leaves the queue (its tenant's usage may
push it over quota later: judged only once, it would wait forever at the
lowest priority). A restarted client judges at once every deadline that
passed before it started.
"""

from __future__ import annotations

import msgspec

from actors.common.messages import Submitted
from emulator.actor import Actor, on
from emulator.units import MIN
from store.mast import queue
from store.mast.records import PRIORITY_LOWEST, WorkloadSpec

# How often a workload past its deadline but within quota is judged again: a
# few GMS passes (its priority changes only when a pass ranks the queue).
RECHECK_US = 10 * MIN


class ClientParams(msgspec.Struct, frozen=True, kw_only=True):
    workloads: tuple[WorkloadSpec, ...]
    # Who hears of a submission: MAST's GMS, or a cluster-policy run's scheduler.
    notify: str = "gms"
    # µs an owner waits for opportunistic work to start before withdrawing it
    # (None: never withdrawn).
    patience_us: int | None = None


class _Next(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: submit what is due."""


class _GiveUp(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: withdraw what waited past its owner's patience."""


class Client(Actor):
    kind = "mast-client"
    params: ClientParams

    async def on_start(self) -> None:
        self.priority = {t.name: t.priority for t in await self.store(queue.get_tenants)}
        entries = await self.store(queue.in_states, queue.STATES)
        known = {e.id for e in entries}
        mine = {w.id for w in self.params.workloads}
        # Restarted: the last incarnation's nudges still being resent died with it.
        for e in entries:
            if e.id in mine and e.state in queue.QUEUED:
                self.send_reliably(self.params.notify, Submitted(workload_id=e.id))
        self.todo = [w for w in self.params.workloads if w.id not in known]
        self.next = 0
        self._arm()
        patience = self.params.patience_us
        self.deadlines = (
            sorted((w.submit_at_us + patience, w.id) for w in self.params.workloads)
            if patience is not None
            else []
        )
        self.due = 0
        # Past their deadline, still queued and never started, within quota when last
        # judged (the module docstring).
        self.overdue: list[str] = []
        self._arm_give_up()

    def _arm(self) -> None:
        if self.next < len(self.todo):
            self.set_timer(max(0, self.todo[self.next].submit_at_us - self.now_us), _Next())

    def _arm_give_up(self) -> None:
        at = self.deadlines[self.due][0] if self.due < len(self.deadlines) else None
        if self.overdue:
            again = self.now_us + RECHECK_US
            at = again if at is None else min(at, again)
        if at is not None:
            self.set_timer(max(0, at - self.now_us), _GiveUp())

    @on(_Next)
    async def submit_due(self, _: _Next) -> None:
        while self.next < len(self.todo) and self.todo[self.next].submit_at_us <= self.now_us:
            spec = self.todo[self.next]
            self.next += 1
            priority = self.priority.get(spec.tenant, PRIORITY_LOWEST)
            if await self.store(queue.submit, spec, priority, self.now_us):
                # Reliably: a cluster scheduler learns of a workload from this
                # nudge alone (MAST's GMS would find it at its next scan).
                self.send_reliably(self.params.notify, Submitted(workload_id=spec.id))
        self._arm()

    @on(_GiveUp)
    async def give_up(self, _: _GiveUp) -> None:
        due = list(self.overdue)
        while self.due < len(self.deadlines) and self.deadlines[self.due][0] <= self.now_us:
            due.append(self.deadlines[self.due][1])
            self.due += 1
        waiting: list[str] = []
        for entry in await self.store(queue.entries, due):
            if entry.state not in queue.QUEUED or entry.started_us is not None:
                continue  # it ran, or left the queue: nothing to give up on any more
            if entry.priority != PRIORITY_LOWEST:
                waiting.append(entry.id)
                continue
            # Compare-and-set: an award since the read leaves the workload be.
            await self.store(queue.transition, entry.id, queue.QUEUED, "WITHDRAWN", self.now_us)
        self.overdue = waiting
        self._arm_give_up()
