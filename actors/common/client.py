"""The client: submits the scenario's workloads to the global queue on time.

Submitting is a write to the job-queue database (so a submitted workload is
never lost, whatever happens to the GMS) followed by a nudge to the GMS (or,
in a cluster-policy run, to the cluster scheduler). The
client keeps one timer, for the next submission; after a crash it resumes
from the first workload the queue does not hold yet.
"""

from __future__ import annotations

import msgspec

from actors.common.messages import Submitted
from emulator.actor import Actor, on
from store.mast import queue
from store.mast.records import PRIORITY_LOWEST, WorkloadSpec


class ClientParams(msgspec.Struct, frozen=True, kw_only=True):
    workloads: tuple[WorkloadSpec, ...]
    # Who hears of a submission: MAST's GMS, or a cluster-policy run's scheduler.
    notify: str = "gms"


class _Next(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: submit what is due."""


class Client(Actor):
    kind = "mast-client"
    params: ClientParams

    async def on_start(self) -> None:
        self.priority = {t.name: t.priority for t in await self.store(queue.get_tenants)}
        known = {e.id for e in await self.store(queue.in_states, queue.STATES)}
        self.todo = [w for w in self.params.workloads if w.id not in known]
        self.next = 0
        self._arm()

    def _arm(self) -> None:
        if self.next < len(self.todo):
            self.set_timer(max(0, self.todo[self.next].submit_at_us - self.now_us), _Next())

    @on(_Next)
    async def submit_due(self, _: _Next) -> None:
        while self.next < len(self.todo) and self.todo[self.next].submit_at_us <= self.now_us:
            spec = self.todo[self.next]
            self.next += 1
            priority = self.priority.get(spec.tenant, PRIORITY_LOWEST)
            if await self.store(queue.submit, spec, priority, self.now_us):
                self.send(self.params.notify, Submitted(workload_id=spec.id))
        self._arm()
