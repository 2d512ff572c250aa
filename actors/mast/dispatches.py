"""What an RMS remembers of the workloads it dispatched: plans being started, and gangs running.

Both live only in the leading RMS's memory; a new leader rebuilds them from
the store and its CMs' records (`RegionalScheduler._rebuild`).
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
