"""AlloX (Le et al., EuroSys '20) as Shockwave §2.1 and §8.2 describe it: filtered min-JCT.

"AlloX minimizes average job completion time with maximal bipartite
matching" (§8.2); each round "a fixed fraction (f) of jobs that have
attained the least resource share in the past" is selected, and among them
the scheduler maximises efficiency (§2.1). AlloX's matching assigns jobs to
(worker, position) slots at cost position × processing time; with one GPU
type every worker is alike and the optimal matching is shortest processing
time first (the assignment form of P||ΣC_j, which AlloX generalises to
mixed CPU/GPU workers). So, whenever it decides:

1. running jobs keep their GPUs: AlloX does not preempt (nor does the
   Shockwave artifact's AlloX, which keeps every job it allocated);
2. the waiting jobs are ranked by the share of time they have run since
   submission, least first, then oldest first, and the first ⌈α·m⌉ of the
   m waiting jobs pass the filter — more if their gangs could not fill the
   free GPUs (the artifact keeps max(α·m, free workers));
3. the filtered jobs start shortest remaining time first (`speed.py`,
   reactive, as the artifact's steps left over measured throughput) where
   their gangs fit; GPUs they leave are offered to the other waiting jobs
   in filter order (work conservation).

Choices where the paper is silent: α = `filter_fraction` 0.2 is the
artifact's default (the same 0.2 as Themis's filter); AlloX has no gangs,
so processing time is the job's remaining time, not its GPU-time. Decisions
are made on arrivals and completions (each round in round scheduling).
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar

import msgspec
from msgspec import Meta

from actors.policies.cluster import placement as cp
from actors.policies.cluster.api import AcceptsEveryOffer, ClusterView, Decision, JobView, Start
from actors.policies.cluster.shockwave_baselines.speed import remaining_now_s

__all__ = ["AlloX", "AlloxParams", "filtered"]


class AlloxParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """allox: `filter_fraction` α, the share of waiting jobs (least served first) considered."""

    filter_fraction: Annotated[float, Meta(gt=0, le=1)] = 0.2


def _share(job: JobView, now_us: int) -> float:
    age = now_us - job.submit_us
    return job.executed_us / age if age > 0 else 0.0


def filtered(waiting: list[JobView], free_gpus: int, fraction: float) -> int:
    """How many of `waiting` (already in filter order) pass: ⌈α·m⌉, or enough to fill the GPUs."""
    kept = min(len(waiting), max(1, math.ceil(fraction * len(waiting) - 1e-9)))
    gpus = sum(j.gpus for j in waiting[:kept])
    while kept < len(waiting) and gpus < free_gpus:
        gpus += waiting[kept].gpus
        kept += 1
    return kept


class AlloX(AcceptsEveryOffer):
    """Non-preemptive shortest-remaining-time among the least-served fraction of waiting jobs."""

    name: ClassVar[str] = "allox"
    Params: ClassVar[type] = AlloxParams

    def initial_state(self, params: AlloxParams) -> None:
        del params

    def decide(self, view: ClusterView, state: None, params: AlloxParams) -> tuple[Decision, None]:
        now = view.now_us
        waiting = sorted(
            (j for j in view.jobs if not j.running),
            key=lambda j: (_share(j, now), j.submit_us, j.job_id),
        )
        free = sum(s.gpus_free for s in view.machines)
        kept = filtered(waiting, free, params.filter_fraction)
        chosen = sorted(waiting[:kept], key=lambda j: (remaining_now_s(j), j.submit_us, j.job_id))
        machines = view.machines
        starts: list[Start] = []
        for job in [*chosen, *waiting[kept:]]:
            got = cp.best_tier(machines, job.gpus)
            if got is not None:
                machines = cp.take(machines, got[1])
                starts.append(Start(job_id=job.job_id, placement=got[1], tier=got[0]))
        return Decision(start=tuple(starts)), state
