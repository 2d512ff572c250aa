"""A greedy heuristic for Shockwave's planning problem, with a measured gap to the MILP.

The heuristic (documented here, measured in tests/unit/policies/test_shockwave.py):

1. Two greedy passes add one round at a time to the job whose objective
   gain is largest — per GPU-round in one pass (small gangs pack well),
   absolute in the other (a big gang's gain is not lost to crumbs) — in
   the earliest round where its gang fits, until no job gains.
2. The better pass is improved by local search: hand one round of a job to
   another job that fits there (or to nobody) while the objective rises,
   at most `passes_max` sweeps.

Every candidate's objective is evaluated for all jobs at once with numpy
(`_Value`), using exactly the arithmetic of a one-candidate-at-a-time
evaluation, so the plan does not depend on the vectorisation: a plan for
120 jobs × 20 rounds takes tens of milliseconds. On small random instances
it is optimal on ~96% and loses at most 2.7% of the achievable improvement.
"""

from __future__ import annotations

import numpy as np

from actors.policies.cluster.shockwave.plan import (
    PlanProblem,
    RoundSchedule,
    log_utility,
    objective,
    schedule,
)

__all__ = ["solve_greedy"]


class _Value:
    """Program 11's objective for the current counts, and its value after changing them.

    Welfare and load are sums; the longest remaining job is read from the
    three largest remaining times, enough when at most two of them change.
    `log[i, n]` and `rem_at[i, n]` tabulate job i after n rounds (padded past
    its last count). Each job's change of welfare and of load for one more
    round is kept up to date (`d_welfare`, `d_load`), so a trial of every job
    at once is a handful of vector operations; each repeats the scalar
    formula operation by operation, so vectorised and scalar evaluations
    agree to the last bit.
    """

    def __init__(self, p: PlanProblem, counts: list[int]) -> None:
        scale = 1.0 / (len(p.jobs) * p.gpus_total)
        width = max(len(j.utility) for j in p.jobs) + 1
        self.p, self.n = p, len(p.jobs)
        self.size = np.array([len(j.utility) for j in p.jobs])
        self.gpus = np.array([j.gpus for j in p.jobs])
        self.log = np.zeros((self.n, width))
        self.rem_at = np.zeros((self.n, width))
        for i, j in enumerate(p.jobs):
            self.log[i, : len(j.utility)] = [
                scale * j.weight * log_utility(p, j, n) for n in range(len(j.utility))
            ]
            self.rem_at[i, : len(j.utility)] = j.remaining_s
        self.counts = np.array(counts)
        self.rem = self.rem_at[np.arange(self.n), self.counts]
        self.welfare = sum(float(self.log[i, n]) for i, n in enumerate(counts))
        load = sum(j.gpus * float(r) for j, r in zip(p.jobs, self.rem, strict=True))
        self.load = load / p.gpus_total
        self.can_add = self.counts + 1 < self.size
        idx, nxt = np.arange(self.n), np.minimum(self.counts + 1, self.size - 1)
        self.rem_next = self.rem_at[idx, nxt]
        self.d_welfare = self.log[idx, nxt] - self.log[idx, self.counts]
        self.d_load = self.gpus * (self.rem_next - self.rem) / p.gpus_total
        self._rank()

    def _rank(self) -> None:
        # A stable sort by -remaining, as sorted(range(n), key=...) would give.
        self.top = [int(k) for k in np.argsort(-self.rem, kind="stable")[:3]]
        self.top_rem = [float(self.rem[k]) for k in self.top]

    def _longest_without(self, *skip: int) -> float:
        # top is sorted by remaining time, so the first job not skipped is the longest.
        for k, r in zip(self.top, self.top_rem, strict=True):
            if k not in skip:
                return r
        return 0.0

    def _finish(
        self, welfare: np.ndarray | float, load: np.ndarray | float, longest: np.ndarray | float
    ) -> np.ndarray | float:
        p = self.p
        return welfare - p.makespan_weight * np.maximum(load, longest) / p.z0

    def value(self) -> float:
        return float(self._finish(self.welfare, self.load, self._longest_without()))

    def _longest_with_next(self, base: float, *skip: int) -> np.ndarray:
        """max(longest of the others, job b's remaining after one more round), for every b."""
        longest = np.full(self.n, base)
        for k in self.top:
            longest[k] = self._longest_without(*skip, k)
        return longest

    def one_more(self) -> np.ndarray:
        """The objective if each job got one more round (-inf where it cannot)."""
        longest = self._longest_with_next(self._longest_without())
        out = self._finish(
            self.welfare + self.d_welfare,
            self.load + self.d_load,
            np.maximum(longest, self.rem_next),
        )
        return np.where(self.can_add, out, -np.inf)

    def hand_over(self, a: int) -> tuple[float, np.ndarray]:
        """The objective if job a gave up one round: kept by nobody, and given to each job b."""
        n = int(self.counts[a]) - 1
        welfare = self.welfare + float(self.log[a, n] - self.log[a, n + 1])
        m = self.p.gpus_total
        load = self.load + float(self.gpus[a] * (self.rem_at[a, n] - self.rem[a])) / m
        rem_a = float(self.rem_at[a, n])
        base = self._longest_without(a)
        alone = float(self._finish(welfare, load, max(base, rem_a)))
        longest = np.maximum(self._longest_with_next(base, a), rem_a)
        given = self._finish(
            welfare + self.d_welfare, load + self.d_load, np.maximum(longest, self.rem_next)
        )
        return alone, given

    def apply(self, changes: dict[int, int]) -> None:
        p = self.p
        for i, n in changes.items():
            self.welfare += float(self.log[i, n] - self.log[i, self.counts[i]])
            self.load += float(self.gpus[i] * (self.rem_at[i, n] - self.rem[i])) / p.gpus_total
            self.counts[i], self.rem[i] = n, self.rem_at[i, n]
            self.can_add[i] = n + 1 < self.size[i]
            nxt = min(n + 1, int(self.size[i]) - 1)
            self.rem_next[i] = self.rem_at[i, nxt]
            self.d_welfare[i] = self.log[i, nxt] - self.log[i, n]
            self.d_load[i] = self.gpus[i] * (self.rem_next[i] - self.rem[i]) / p.gpus_total
        self._rank()


def _greedy_counts(p: PlanProblem, per_gpu: bool) -> np.ndarray:
    """One greedy pass: which rounds each job holds, ranking gains per GPU-round or absolute.

    Seated jobs start with the first round (the policy keeps their gangs
    within the cluster); every other job starts with none.
    """
    seated = np.array([j.seated for j in p.jobs])
    val = _Value(p, [int(x) for x in seated])
    held = np.zeros((len(p.jobs), p.rounds), dtype=bool)
    held[:, 0] = seated
    free = np.full(p.rounds, p.gpus_total)
    free[0] -= int((val.gpus * seated).sum())
    priority = np.array([j.priority for j in p.jobs])
    while True:
        fits = ~held & (free[None, :] >= val.gpus[:, None])
        gain = val.one_more() - val.value()
        ok = fits.any(axis=1) & (gain > 0)
        if not ok.any():
            return held
        key = gain / val.gpus if per_gpu else gain
        # The lexicographically largest (key, priority); the lowest index among equals.
        ok &= key == key[ok].max()
        ok &= priority == priority[ok].max()
        i = int(np.argmax(ok))
        t = int(np.argmax(fits[i]))
        val.apply({i: int(val.counts[i]) + 1})
        held[i, t] = True
        free[t] -= val.gpus[i]


def _improve(p: PlanProblem, held: np.ndarray, passes_max: int) -> np.ndarray:
    """Local search: hand one round of a job to another job (or to nobody) while it pays.

    For each round and each job a holding it, the first of (nobody, job 0,
    job 1, …) whose taking a's round raises the objective gets it. A seated
    job keeps its round.
    """
    seated = [j.seated for j in p.jobs]
    val = _Value(p, [int(h) for h in held.sum(axis=1)])
    free = p.gpus_total - (held * val.gpus[:, None]).sum(axis=0)
    for _ in range(passes_max):
        improved = False
        for t in range(p.rounds):
            for a in range(len(p.jobs)):
                if not held[a, t] or seated[a]:
                    continue
                now = val.value() + 1e-12
                alone, given = val.hand_over(a)
                b = None
                if not alone > now:
                    ok = (
                        ~held[:, t]
                        & (val.counts + 1 < val.size)
                        & (val.gpus <= free[t] + val.gpus[a])
                        & (given > now)
                    )
                    if not ok.any():
                        continue
                    b = int(np.argmax(ok))
                change = {a: int(val.counts[a]) - 1}
                if b is not None:
                    change[b] = int(val.counts[b]) + 1
                val.apply(change)
                improved = True
                held[a, t] = False
                free[t] += val.gpus[a]
                if b is not None:
                    held[b, t] = True
                    free[t] -= val.gpus[b]
        if not improved:
            break
    return held


def solve_greedy(p: PlanProblem, *, passes_max: int = 20) -> RoundSchedule:
    """The heuristic: greedy by marginal gain, then one-round exchanges (module docstring)."""
    if not p.jobs:
        return RoundSchedule(rounds=((),) * p.rounds, counts=(), objective=0.0, method="greedy")
    starts = [_greedy_counts(p, per_gpu) for per_gpu in (True, False)]
    held = max(starts, key=lambda h: objective(p, [int(n) for n in h.sum(axis=1)]))
    held = _improve(p, held, passes_max)
    counts = [int(n) for n in held.sum(axis=1)]
    return RoundSchedule(
        rounds=schedule(p, [[bool(x) for x in row] for row in held]),
        counts=tuple(counts),
        objective=objective(p, counts),
        method="greedy",
    )
