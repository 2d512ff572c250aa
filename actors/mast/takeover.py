"""What a new leader of a region's RMS makes of the workloads the store says run there.

The RMS (`actors/mast/rms.py`) keeps its dispatches and running gangs in
memory only; a leader taking over rebuilds them here, from the queue and the
job rows of the region's clusters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

from actors.common.messages import EndReason
from actors.mast.dispatches import Live
from actors.mast.messages import WorkloadEnded
from store.mast import fleet, queue

T = TypeVar("T")


class _Params(Protocol):
    @property
    def region(self) -> str: ...

    @property
    def clusters(self) -> list[str]: ...


class TakeoverHost(Protocol):
    """What the rebuild uses of the RMS: its memory of running gangs and its effects."""

    live: dict[str, Live]

    @property
    def params(self) -> _Params: ...

    async def store(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T: ...

    def send_reliably(self, dst: str, msg: Any) -> None: ...

    def bug(self, name: str) -> bool: ...

    def report_dispatch(self, auction_id: int, workload_id: str, ok: bool, reason: str) -> None: ...

    def stop_jobs(
        self,
        workload_id: str,
        auction_id: int,
        jobs: Mapping[str, str],
        reason: EndReason,
        *,
        checkpoint: bool,
    ) -> None: ...


async def rebuild(rms: TakeoverHost) -> None:
    """Which workloads run here, from the store; report those that ended unseen.

    A workload the queue holds as RUNNING or DISPATCHING in this region but
    none of whose jobs still holds machines ended while no RMS was leading
    (or its report was lost with a crashed RMS): report it now.

    A dispatch this RMS was running when it went down is settled from what
    the store shows: if every job of the workload holds machines, the gang
    started whole and is reported so; if only some do, the plans of the
    others died with the old RMS, so the started jobs are rolled back.

    Only the current dispatch counts: a workload the GMS gave up while
    this region was dark (`actors/mast/gms.py`) runs elsewhere or waits in the
    queue, and is not adopted; and job rows in this region's clusters
    that were started before the workload last went back to the queue
    are what an earlier dispatch left (their CMs release them), not jobs
    of the current one.
    """
    p = rms.params
    by_workload: dict[str, dict[str, tuple[str, str, int]]] = {}
    for cluster in p.clusters:
        for row in await rms.store(fleet.jobs, cluster):
            started = row.started_us if row.started_us is not None else 0
            by_workload.setdefault(row.workload_id, {})[row.job] = (cluster, row.state, started)
    for entry in await rms.store(queue.in_states, ("DISPATCHING", "RUNNING")):
        if entry.region != p.region or entry.auction_id is None:
            continue
        jobs = {
            job: (cluster, state)
            for job, (cluster, state, started) in by_workload.get(entry.id, {}).items()
            if started >= entry.queued_us
        }
        live = {job: c for job, (c, state) in jobs.items() if state in fleet.LIVE_JOB_STATES}
        if live and entry.state == "DISPATCHING":
            spec = await rms.store(queue.spec, entry.id)
            names = {j.name for j in spec.jobs} if spec is not None else set()
            # Seeded bug `rms-takeover-adopts-partial-dispatch`: a new leader takes a
            # dispatch with any job started for one whose whole gang started.
            if names <= live.keys() or rms.bug("rms-takeover-adopts-partial-dispatch"):
                rms.live[entry.id] = Live(entry.auction_id, live)
                rms.report_dispatch(entry.auction_id, entry.id, True, "")
            else:
                rms.live[entry.id] = Live(entry.auction_id, live, ending="aborted")
                rms.stop_jobs(entry.id, entry.auction_id, live, "aborted", checkpoint=False)
        elif live and any(state == "STOPPED" for _, state in jobs.values()):
            # A job of the running gang ended unseen, or its end was heard by a
            # leader whose stop orders for the rest died with it (or are now
            # stale): stop the rest. Why it ended is not in the store; saving
            # the others' progress costs a checkpoint and loses nothing.
            rms.live[entry.id] = Live(entry.auction_id, live, ending="failed")
            rms.stop_jobs(entry.id, entry.auction_id, live, "failed", checkpoint=True)
        elif live:
            # Seeded bug `rms-rebuild-forgets-running`: a new leader adopts no
            # running workload, so their ends go unheard.
            if not rms.bug("rms-rebuild-forgets-running"):
                rms.live[entry.id] = Live(entry.auction_id, live)
        elif entry.state == "DISPATCHING":
            rms.report_dispatch(entry.auction_id, entry.id, False, "RMS restarted mid-dispatch")
        else:
            done = jobs and all(state == "DONE" for _, state in jobs.values())
            rms.send_reliably(
                "gms",
                WorkloadEnded(
                    workload_id=entry.id,
                    auction_id=entry.auction_id,
                    region=p.region,
                    reason="done" if done else "failed",
                ),
            )
