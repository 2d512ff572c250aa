"""Shockwave's long-term fairness estimator (App. G eq. 9) and what it remembers of a job.

ρ̂ = (L + W + R̂·N) / (P̂·N): L + W is the time since the job's submission,
R̂ and P̂ its remaining and total run time alone under the regimes the
predictor expects (`shockwave_predictor`), and N its contention factor —
jobs present over GPUs (or, with `ftf_contention = "gpus"`, the GPUs they
ask for over GPUs), averaged over the job's life so far and never below 1,
as the report's FTF defines it (`cluster_metrics`). App. G and App. I count
jobs, and so does the artifact's evaluation; the paper's theory (a 1/N
share of the cluster, Corollary 4.0.1) would give a g-GPU gang the factor
g·N instead.
"""

from __future__ import annotations

import msgspec

from actors.policies.cluster.api import JobView
from actors.policies.cluster.perf_model import base_batch_size
from actors.policies.cluster.shockwave import predictor as pred

__all__ = ["Estimate", "JobMemo", "batch_scale", "estimate", "ftf", "rank_rho"]


class JobMemo(msgspec.Struct, frozen=True, kw_only=True):
    """What Shockwave remembers of a job: its regime belief and ∫ jobs-per-GPU dt (µs)."""

    belief: pred.RegimeBelief
    contention_us: float = 0.0


class Estimate(msgspec.Struct, frozen=True, kw_only=True):
    """One job's long-term estimates at a decision (seconds; ρ̂ dimensionless)."""

    remaining_s: float
    total_s: float
    contention: float
    rho: float
    segments: tuple[pred.Segment, ...]


def ftf(age_s: float, remaining_s: float, total_s: float, contention: float) -> float:
    """App. G eq. 9: (L + W + R̂·N) / (P̂·N); 1.0 for a job with no work left to predict."""
    if total_s <= 0:
        return 1.0
    return (age_s + remaining_s * contention) / (total_s * contention)


def batch_scale(job: JobView) -> int:
    """The job's current batch size over its initial one (1 when unknown)."""
    initial = job.initial_batch_size or base_batch_size(job.model)
    return max(1, job.batch_size // initial) if job.batch_size else 1


def estimate(job: JobView, memo: JobMemo, now_us: int, contention_now: float) -> Estimate:
    """ρ̂ and its parts for `job` at `now_us` (`contention_now` for a job just arrived)."""
    duration_s = job.duration_us / 1e6
    segments = pred.trajectory(memo.belief, job.progress)
    remaining = pred.exclusive_s(segments, duration_s)
    total = pred.exclusive_s(pred.history(memo.belief, job.progress), duration_s) + remaining
    age_us = now_us - job.submit_us
    n = max(1.0, memo.contention_us / age_us if age_us > 0 else contention_now)
    return Estimate(
        remaining_s=remaining,
        total_s=total,
        contention=n,
        rho=ftf(age_us / 1e6, remaining, total, n),
        segments=segments,
    )


def rank_rho(est: Estimate) -> float:
    """ρ̂ for ordering jobs: equal up to 1e-6 counts as a tie, broken by submission.

    Jobs that ran since they arrived all sit at ρ̂ = 1 up to float noise; the
    noise (and the milliseconds of control-plane latency in the actors) must
    not pick which of them is preempted.
    """
    return round(est.rho, 6)
