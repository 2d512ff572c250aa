"""What an RMS remembers of the workloads it dispatched: plans being started, and gangs running.

Both live only in the leading RMS's memory; a new leader rebuilds them from
the store and its CMs' records (`actors/mast/takeover.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.common.messages import EndReason
from actors.policies.mast.placement.snapshot import JobRequest, WorkloadPlan
from store.mast.records import JobSpec


@dataclass
class Dispatch:
    """An awarded workload whose jobs are being started by their CMs."""

    workload_id: str
    plan: WorkloadPlan
    jobs: dict[str, JobSpec]
    results: dict[str, bool] = field(default_factory=dict)
    # Jobs that ended before the dispatch settled: they no longer run, whatever
    # their plan result says, so the gang did not start whole.
    ended: set[str] = field(default_factory=set)


@dataclass
class Live:
    """A workload this region runs: where each of its jobs is."""

    auction_id: int
    clusters: dict[str, str]  # job → cluster
    ending: EndReason | None = None


def current_auction(
    workload_id: str, live: dict[str, Live], dispatching: dict[int, Dispatch]
) -> int | None:
    """The auction of the workload's dispatch an RMS serves now, if any."""
    if workload_id in live:
        return live[workload_id].auction_id
    return next((a for a, d in dispatching.items() if d.workload_id == workload_id), None)


def remembered(live: dict[str, Live], dispatching: dict[int, Dispatch]) -> list[tuple[str, int]]:
    """(workload, auction) of every attempt an RMS remembers: running gangs and dispatches."""
    attempts = [(w, g.auction_id) for w, g in live.items()]
    attempts += [(d.workload_id, a) for a, d in dispatching.items()]
    return sorted(attempts)


def superseded(
    workload_id: str, auction_id: int, live: dict[str, Live], dispatching: dict[int, Dispatch]
) -> list[int]:
    """The auctions before `auction_id` (awarded now) under which the workload is remembered.

    The GMS awards a workload again only once it has given up the attempt
    before (its region went dark: `actors/mast/gms.py`); an RMS that was the
    region's leader through the dark spell, its memory kept across a lease
    lapse nobody else led in, may still remember that attempt.

    Only earlier auctions (ids grow): an award resent by a deposed GMS leader
    can arrive after a later attempt began, and supersedes nothing (explore:
    power-domain, where it stopped the running gang).
    """
    # A lookup, not a filter of `remembered`: an award comes for each dispatch, and
    # sorting every gang the region runs for each one was ~2% of a late meta-day hour.
    gang = live.get(workload_id)
    found = [gang.auction_id] if gang is not None and gang.auction_id < auction_id else []
    found += [a for a, d in dispatching.items() if d.workload_id == workload_id and a < auction_id]
    return sorted(found)


def job_request(workload_id: str, job: JobSpec, priority: int) -> JobRequest:
    """What placement is asked for one job of a workload, at `priority`."""
    return JobRequest(
        workload_id=workload_id,
        job=job.name,
        gpu_type=job.gpu_type,
        gpus=job.gpus,
        cpu_machines=job.cpu_machines,
        priority=priority,
    )
