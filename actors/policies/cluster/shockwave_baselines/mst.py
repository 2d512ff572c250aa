"""MST (max-sum-throughput), Shockwave §8.2's instantaneous efficiency baseline.

"MST maximizes the cluster-level throughput at each instant, which is the
sum of throughput across all training jobs." Gavel's max-sum-throughput
policy, which the Shockwave artifact runs, solves max Σ_j T_j·x_j subject
to Σ_j g_j·x_j ≤ M, 0 ≤ x_j ≤ 1 and realises x with round leases. On one
GPU type a round's lease set is then a 0/1 knapsack: the jobs whose gangs
fit the M GPUs with the largest Σ T_j. `max_throughput_set` solves it
exactly (dynamic programming over GPU counts).

What the paper leaves open, and what we chose:
- Throughput units. Gavel's T_j is the job's steps per second, which
  compares the step lengths of different models; the traces here give no
  such numbers. A job's throughput is its GPUs times its speed-up over its
  initial batch size (`speed.speedup`, reactive like the artifact's
  measured throughputs): every GPU does one unit of work per second at the
  initial batch size, more once the batch has grown (GNS, Accordion).
  MST so prefers jobs that have scaled their batch, and otherwise just
  fills the GPUs.
- Ties (every static job has the same throughput per GPU): the running
  jobs first — preempting one for an equal one only loses its checkpoint
  and restore — then the oldest. Leftover GPUs, between rounds too, go to
  waiting jobs in that order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar

import msgspec
import numpy as np
from msgspec import Meta

from actors.policies.cluster.api import AcceptsEveryOffer, ClusterView, Decision, JobView
from actors.policies.cluster.gavel import lease_round, next_round_us
from actors.policies.cluster.shockwave_baselines.speed import speedup

__all__ = ["MaxSumThroughput", "MstParams", "max_throughput_set"]

# Totals closer than this (relative) count as equal, so float noise cannot pick a job.
TIE_TOLERANCE = 1e-9


def max_throughput_set(
    gpus: Sequence[int], throughputs: Sequence[float], capacity: int
) -> tuple[int, ...]:
    """Indices of the gangs of most total throughput within `capacity` GPUs, earlier ones on ties.

    best[i][c] is the most throughput jobs i.. can reach with c GPUs; job i
    is taken if taking it still reaches best[i][c], so among optimal sets
    the lexicographically first in the given order wins. O(jobs × GPUs).
    """
    n = len(gpus)
    best = np.zeros((n + 1, capacity + 1))
    for i in range(n - 1, -1, -1):
        g, t = gpus[i], throughputs[i]
        best[i] = best[i + 1]
        if g <= capacity:
            best[i, g:] = np.maximum(best[i + 1, g:], best[i + 1, : capacity + 1 - g] + t)
    chosen = []
    left = capacity
    for i in range(n):
        g, t = gpus[i], throughputs[i]
        if g <= left and best[i + 1, left - g] + t >= best[i, left] * (1 - TIE_TOLERANCE):
            chosen.append(i)
            left -= g
    return tuple(chosen)


class MstParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """mst: the round length (Gavel's and Shockwave's 2 minutes)."""

    round_s: Annotated[float, Meta(gt=0)] = 120.0


class MaxSumThroughput(AcceptsEveryOffer):
    """Each round, the lease set of the largest total throughput (see the module docstring)."""

    name: ClassVar[str] = "mst"
    Params: ClassVar[type] = MstParams

    def initial_state(self, params: MstParams) -> None:
        del params

    def decide(self, view: ClusterView, state: None, params: MstParams) -> tuple[Decision, None]:
        wake, boundary = next_round_us(view, params.round_s)

        def rank(job: JobView) -> tuple[bool, float, int, str]:
            return (not job.running, -speedup(job), job.submit_us, job.job_id)

        jobs = sorted(view.jobs, key=rank)
        total = sum(s.gpus_total for s in view.machines)
        chosen = max_throughput_set(
            [j.gpus for j in jobs], [j.gpus * speedup(j) for j in jobs], total
        )
        leased = tuple(jobs[i].job_id for i in chosen)
        decision = lease_round(view, [j.job_id for j in jobs], leased, boundary=boundary)
        return msgspec.structs.replace(decision, wake_at_us=wake), state
