"""Themis as Shockwave §2.1 and Table 1 describe it, on Gavel's round mechanism.

Each round the filter keeps the fraction `filter_fraction` of jobs with the
worst estimated finish-time fairness ρ; among them the allocation maximises
efficiency — here the most GPUs busy, ties to the worse ρ (see
`fullest_subset`) — and GPUs they leave are offered to the others, in ρ
order (Themis's leftover allocation). Shockwave's f is the fraction *kept*;
Themis's own fairness knob is 1 − f (its default 0.8 keeps 0.2). ρ is
reactive: remaining time at the job's *current* batch size and contention,
ρ = (age + R·N) / ((run so far + R)·N), N = max(1, jobs/GPUs) (GPUs asked
per GPU under `ftf_contention = "gpus"`, like the report). ρ values within
`rho_resolution` of each other rank as equal (`ties.near_tie_ranks`), the
older job first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import msgspec

from actors.policies.cluster.api import (
    AcceptsEveryOffer,
    ClusterView,
    Decision,
    JobView,
    contention_now,
)
from actors.policies.cluster.gavel import lease_round, next_round_us, select_by_count
from actors.policies.cluster.perf_model import base_batch_size
from actors.policies.cluster.shockwave import predictor as pred
from actors.policies.cluster.ties import near_tie_ranks

__all__ = ["Themis", "ThemisParams", "fullest_subset", "themis_rho"]


def themis_rho(job: JobView, now_us: int, contention: float) -> float:
    """Themis's reactive finish-time-fairness estimate of one job (see the module docstring)."""
    initial = job.initial_batch_size or base_batch_size(job.model)
    scale = max(1, job.batch_size // initial) if job.batch_size else 1
    remaining_s = (1.0 - job.progress) * job.duration_us / 1e6 / pred.throughput(scale)
    age_s = (now_us - job.submit_us) / 1e6
    ideal_s = (job.executed_us / 1e6 + remaining_s) * contention
    return (age_s + remaining_s * contention) / ideal_s if ideal_s > 0 else 1.0


class ThemisParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """themis: round length and the filter, the fraction of jobs (worst ρ first) offered GPUs."""

    round_s: float = 120.0
    filter_fraction: float = 0.2
    # A job that never waited has ρ = 1 exactly in the engine, and 1 plus its
    # agent's start-up ms over its run time in the actors (1.0000069 for a 4-min
    # job); ranked exactly, those ms chose which of two such jobs lost its lease
    # (average JCT 6.6% apart on a 10-job trace, 2026-11-29; with 1e-4, +0.0007%).
    # 0 (the default) ranks exactly, the paper's rule: on `shockwave-fairness`
    # the actors then match the engine exactly (average JCT 22,611 s, 3,313
    # preemptions, both), and 0.02-0.16% apart with 1e-5 to 1e-3.
    rho_resolution: float = 0.0

    def __post_init__(self) -> None:
        if not self.round_s > 0:
            raise ValueError(f"themis.round_s must be > 0, got {self.round_s}")
        if not 0 < self.filter_fraction <= 1:
            raise ValueError(
                f"themis.filter_fraction must be in (0, 1], got {self.filter_fraction}"
            )
        if not 0 <= self.rho_resolution <= 1:
            raise ValueError(f"themis.rho_resolution must be in [0, 1], got {self.rho_resolution}")


class Themis(AcceptsEveryOffer):
    """Themis's filter over finish-time fairness, with leftover GPUs offered to the rest."""

    name: ClassVar[str] = "themis"
    Params: ClassVar[type] = ThemisParams

    def initial_state(self, params: ThemisParams) -> None:
        return None

    def decide(self, view: ClusterView, state: None, params: ThemisParams) -> tuple[Decision, None]:
        wake, boundary = next_round_us(view, params.round_s)
        total = sum(s.gpus_total for s in view.machines)
        contention = max(1.0, contention_now(view))
        rhos = {j.job_id: themis_rho(j, view.now_us, contention) for j in view.jobs}
        level = near_tie_ranks(rhos, params.rho_resolution)
        ranked = sorted(view.jobs, key=lambda j: (-level[j.job_id], j.submit_us, j.job_id))
        kept = math.ceil(params.filter_fraction * len(ranked) - 1e-9)
        order = [j.job_id for j in ranked]
        filtered = fullest_subset([j.gpus for j in ranked[:kept]], total)
        leased = tuple(order[i] for i in filtered)
        rest = [k for k in order if k not in set(leased)]
        leased += select_by_count(_without(view, leased), rest)
        decision = lease_round(view, order, leased, boundary=boundary)
        return msgspec.structs.replace(decision, wake_at_us=wake), None


def fullest_subset(gpus: Sequence[int], capacity: int) -> tuple[int, ...]:
    """Indices of the gangs that fill the most of `capacity`; among those, earlier ones first.

    Themis's filtered jobs are allocated for efficiency: here, as many GPUs
    busy as their gangs allow (subset sum, O(jobs × GPUs)). Among the
    fullest subsets the lexicographically first in the given order (worst ρ
    first) wins, so fairness breaks the ties.
    """
    n = len(gpus)
    # reach[i] = the GPU totals the gangs i.. can make exactly.
    reach: list[set[int]] = [set() for _ in range(n + 1)]
    reach[n] = {0}
    for i in range(n - 1, -1, -1):
        reach[i] = reach[i + 1] | {c + gpus[i] for c in reach[i + 1] if c + gpus[i] <= capacity}
    left = max(reach[0])
    chosen = []
    for i in range(n):
        if left - gpus[i] in reach[i + 1]:
            chosen.append(i)
            left -= gpus[i]
    return tuple(chosen)


def _without(view: ClusterView, leased: Sequence[str]) -> ClusterView:
    """The view with the GPUs of `leased` jobs taken out of the count (for leftover leases)."""
    gpus = sum(j.gpus for j in view.jobs if j.job_id in set(leased))
    machines = list(view.machines)
    for i, s in enumerate(machines):
        cut = min(gpus, s.gpus_total)
        machines[i] = msgspec.structs.replace(
            s, gpus_total=s.gpus_total - cut, gpus_free=max(0, s.gpus_free - cut)
        )
        gpus -= cut
    return msgspec.structs.replace(view, machines=tuple(machines))
