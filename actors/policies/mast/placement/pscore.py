"""P_score: the placement quality of one job plan (MAST §4.3), as one summable number.

The preferences, most important first:

1. a plan that preempts nothing beats every plan that preempts;
2. among preempting plans, victims of lower priority are better: what counts
   is the most important victim (the numerically smallest priority);
3. then fewer victims;
4. then longer-running victims (their run times summed), so that jobs that
   just started are left alone;
5. in every case, fewer racks touched (locality of the job's tasks).

A workload's P_score is the sum over its jobs (§4.3), so `value` is a weighted
sum of bounded integer penalties in which each band outweighs everything the
bands below it can add up to over `JOBS_PER_WORKLOAD_MAX` jobs:

    value = W_FREE * [no victims]
          - W_IMPORTANCE * (PRIORITY_LOWEST - victim_priority)   # 0..7; 0 if no victims
          - W_VICTIMS * min(victims, 99)
          - W_RUN * (RUN_CAP_MIN - min(victim run minutes, RUN_CAP_MIN))  # 0 if no victims
          - W_RACK * min(racks, 99)

With 8 jobs the lower bands sum to at most 792 (racks) < W_RUN, 8.0e7 (run)
< W_VICTIMS, 7.9e10 (victims) < W_IMPORTANCE, 5.6e12 (importance) < W_FREE,
so the sum over a workload orders plans exactly like comparing the per-job
preferences band by band. Every term is an integer below 2**53, so the float
sums are exact. Beyond the caps (99 racks, 99 victims, ~6.9 days of victim run
time) differences stop counting; beyond 8 jobs a lower band can, in the worst
case, outweigh one step of the band above it.
"""

from __future__ import annotations

import msgspec

from store.mast.records import PRIORITY_LOWEST

JOBS_PER_WORKLOAD_MAX = 8
RACKS_CAP = 99
VICTIMS_CAP = 99
RUN_CAP_MIN = 9_999

W_RACK = 1.0
W_RUN = 1e3
W_VICTIMS = 1e8
W_IMPORTANCE = 1e11
W_FREE = 1e13


class PScore(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The facts a plan is judged on; `value` is higher-better and summable.

    `victim_priority` is the numerically smallest priority among the victims
    (the most important one), None without victims; `victim_run_s` is the
    victims' run times summed, in seconds; `racks` counts the distinct racks
    of the machines the plan hands to the job.
    """

    victims: int = 0
    victim_priority: int | None = None
    victim_run_s: int = 0
    racks: int = 0

    @property
    def preempts(self) -> bool:
        return self.victims > 0

    @property
    def order_key(self) -> tuple[int, int, int, int, int]:
        """The same order as `value` for one job, as a tuple (larger is better)."""
        if not self.preempts:
            return (1, 0, 0, 0, -self.racks)
        return (
            0,
            -_importance(self),
            -self.victims,
            self.victim_run_s // 60,
            -self.racks,
        )

    @property
    def value(self) -> float:
        racks = min(self.racks, RACKS_CAP)
        if not self.preempts:
            return W_FREE - W_RACK * racks
        run_min = min(self.victim_run_s // 60, RUN_CAP_MIN)
        return -(
            W_IMPORTANCE * _importance(self)
            + W_VICTIMS * min(self.victims, VICTIMS_CAP)
            + W_RUN * (RUN_CAP_MIN - run_min)
            + W_RACK * racks
        )


def _importance(score: PScore) -> int:
    """How important the most important victim is: 0 for lowest-priority victims."""
    if score.victim_priority is None:
        return 0
    return PRIORITY_LOWEST - score.victim_priority
