"""Gavel's round mechanism and its max-min fairness policy (`themis` reuses the mechanism).

Round-based policies lease GPUs for one round at a time, as Gavel's
mechanism does (Shockwave, built atop Gavel, reuses it: see `lease_round`).
Each round a policy ranks the jobs; jobs get leases in rank order while their whole
gang fits in the cluster's GPU count. A running job that keeps its lease
stays where it is; one that loses it is preempted only when a leased job
needs its GPUs (until then it runs on, which wastes nothing). A decision
between round boundaries (event-driven scheduling) only fills idle GPUs.

**gavel-maxmin** (Gavel, "max-min fairness over normalized throughput";
Shockwave §8.2's fairness baseline). On one GPU type a job's normalized
throughput is its share of time running, relative to an equal 1/N split of
the GPUs. The max-min allocation x_j is computed by water-filling (every job
the same multiple of its equal share, capped at running all the time), and
Gavel's round mechanism realises it: the jobs whose received share (time run
over time present) lags furthest behind x_j go first. Stateless: the
received share is read from the view.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import ClassVar

import msgspec

from actors.policies.cluster import placement as cp
from actors.policies.cluster.api import (
    AcceptsEveryOffer,
    ClusterView,
    Decision,
    JobView,
    Start,
)

__all__ = [
    "GavelMaxMin",
    "MaxMinParams",
    "lease_round",
    "maxmin_shares",
    "next_round_us",
    "select_by_count",
]


def next_round_us(view: ClusterView, round_s: float) -> tuple[int, bool]:
    """The next round boundary after `view.now_us`, and whether now is a boundary."""
    step = view.round_us or round(round_s * 1_000_000)
    return (view.now_us // step + 1) * step, view.now_us % step == 0


def select_by_count(view: ClusterView, order: Sequence[str]) -> tuple[str, ...]:
    """Lease holders of a round: jobs in `order` whose gang still fits in the cluster's GPUs."""
    gpus = {j.job_id: j.gpus for j in view.jobs}
    left = sum(s.gpus_total for s in view.machines)
    chosen = []
    for job_id in order:
        if gpus[job_id] <= left:
            chosen.append(job_id)
            left -= gpus[job_id]
    return tuple(chosen)


def lease_round(
    view: ClusterView, order: Sequence[str], leased: Collection[str], *, boundary: bool
) -> Decision:
    """Preemptions and offers that give this round's leases to `leased`, ranked by `order`.

    At a boundary, leased waiting jobs are placed in rank order at the most
    consolidated tier free; if their GPUs are held by running jobs without a
    lease, those are preempted, lowest rank first, until the gang fits (a
    gang that fragmentation still keeps out is skipped this round). Then any
    GPUs left idle go to the other waiting jobs in rank order. Between
    boundaries only that last step runs.
    """
    rank = {job_id: i for i, job_id in enumerate(order)}
    jobs = {j.job_id: j for j in view.jobs}
    machines = view.machines
    victims: list[str] = []
    starts: list[Start] = []
    if boundary:
        losers = sorted(
            (j for j in view.jobs if j.running and j.job_id not in leased),
            key=lambda j: -rank.get(j.job_id, len(rank)),
        )
        for job_id in sorted(leased, key=lambda k: rank.get(k, len(rank))):
            job = jobs[job_id]
            if job.running:
                continue
            got = cp.best_tier(machines, job.gpus)
            while got is None and losers:
                loser = losers.pop(0)
                victims.append(loser.job_id)
                machines = cp.give_back(machines, loser.placement)
                got = cp.best_tier(machines, job.gpus)
            if got is not None:
                machines = cp.take(machines, got[1])
                starts.append(Start(job_id=job_id, placement=got[1], tier=got[0]))
    begun = {s.job_id for s in starts}
    for job_id in order:
        job = jobs[job_id]
        if job.running or job_id in begun:
            continue
        got = cp.best_tier(machines, job.gpus)
        if got is not None:
            machines = cp.take(machines, got[1])
            starts.append(Start(job_id=job_id, placement=got[1], tier=got[0]))
    return Decision(preempt=tuple(victims), start=tuple(starts))


def maxmin_shares(gpus: Sequence[int], gpus_total: int) -> tuple[float, ...]:
    """Max-min fair time shares x_j: the same multiple c of each job's equal share, capped at 1.

    A job's equal share is min(1, M / (N·g_j)) of the time (1/N of the
    GPUs); c is the largest value with Σ g_j·min(1, c·e_j) ≤ M.
    """
    n = len(gpus)
    if n == 0:
        return ()
    equal = [min(1.0, gpus_total / (n * g)) for g in gpus]
    if sum(gpus) <= gpus_total:
        return (1.0,) * n
    # Water-filling: raise c through the breakpoints 1/e_j where jobs cap at 1.
    capped, c = 0.0, 1.0
    free_rate = sum(g * e for g, e in zip(gpus, equal, strict=True))
    for brk, g, e in sorted((1.0 / e, g, e) for g, e in zip(gpus, equal, strict=True)):
        if capped + brk * free_rate >= gpus_total:
            break
        capped += g
        free_rate -= g * e
        c = brk
    if free_rate > 0:
        c = (gpus_total - capped) / free_rate
    return tuple(min(1.0, c * e) for e in equal)


class MaxMinParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """gavel-maxmin: the round length (Gavel's and Shockwave's 2 minutes)."""

    round_s: float = 120.0

    def __post_init__(self) -> None:
        if not self.round_s > 0:
            raise ValueError(f"gavel-maxmin.round_s must be > 0, got {self.round_s}")


class GavelMaxMin(AcceptsEveryOffer):
    """Gavel's max-min fairness, realised round by round by received-share deficit."""

    name: ClassVar[str] = "gavel-maxmin"
    Params: ClassVar[type] = MaxMinParams

    def initial_state(self, params: MaxMinParams) -> None:
        return None

    def decide(self, view: ClusterView, state: None, params: MaxMinParams) -> tuple[Decision, None]:
        wake, boundary = next_round_us(view, params.round_s)
        total = sum(s.gpus_total for s in view.machines)
        shares = maxmin_shares([j.gpus for j in view.jobs], total)

        def lag(job: JobView, share: float) -> tuple[float, float, int, str]:
            age = view.now_us - job.submit_us
            received = job.executed_us / age if age > 0 else 0.0
            # Gavel's priority is allocation / share received; a job that has
            # received nothing yet comes first, oldest first.
            deficit = share / received if received > 0 else math.inf
            return (-deficit, -share, job.submit_us, job.job_id)

        order = [
            j.job_id
            for j, _ in sorted(zip(view.jobs, shares, strict=True), key=lambda js: lag(*js))
        ]
        decision = lease_round(view, order, select_by_count(view, order), boundary=boundary)
        return msgspec.structs.replace(decision, wake_at_us=wake), None
