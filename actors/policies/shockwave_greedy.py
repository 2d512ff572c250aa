"""A greedy heuristic for Shockwave's planning problem, with a measured gap to the MILP.

The heuristic (documented here, measured in tests/policies/test_shockwave.py):

1. Two greedy passes add one round at a time to the job whose objective
   gain is largest — per GPU-round in one pass (small gangs pack well),
   absolute in the other (a big gang's gain is not lost to crumbs) — in
   the earliest round where its gang fits, until no job gains.
2. The better pass is improved by local search: hand one round of a job to
   another job that fits there (or to nobody) while the objective rises,
   at most `passes_max` sweeps.

Every gain is an O(1) update of the objective (`_Value`), so a plan for 30
jobs × 20 rounds takes tens of milliseconds. On small random instances it
is optimal on ~96% and loses at most 2.7% of the achievable improvement.
"""

from __future__ import annotations

from actors.policies.shockwave_plan import Plan, PlanProblem, log_utility, objective, schedule

__all__ = ["solve_greedy"]


class _Value:
    """Program 11's objective, kept up to date for changes of one or two jobs' counts.

    Welfare and load are sums; the longest remaining job is read from the
    three largest remaining times, enough when at most two of them change.
    A trial costs O(1), so the heuristic stays cheap at 30 jobs × 20 rounds.
    """

    def __init__(self, p: PlanProblem, counts: list[int]) -> None:
        scale = 1.0 / (len(p.jobs) * p.gpus_total)
        self.p, self.counts = p, list(counts)
        self.log = [[scale * j.weight * log_utility(p, j, n) for n in range(len(j.utility))]
                    for j in p.jobs]
        self.rem = [j.remaining_s[n] for j, n in zip(p.jobs, counts, strict=True)]
        self.welfare = sum(row[n] for row, n in zip(self.log, counts, strict=True))
        self.load = sum(j.gpus * r for j, r in zip(p.jobs, self.rem, strict=True)) / p.gpus_total
        self.top = sorted(range(len(p.jobs)), key=lambda i: -self.rem[i])[:3]

    def trial(self, changes: dict[int, int]) -> float:
        p, welfare, load = self.p, self.welfare, self.load
        longest = max((self.rem[k] for k in self.top if k not in changes), default=0.0)
        for i, n in changes.items():
            j = p.jobs[i]
            welfare += self.log[i][n] - self.log[i][self.counts[i]]
            load += j.gpus * (j.remaining_s[n] - self.rem[i]) / p.gpus_total
            longest = max(longest, j.remaining_s[n])
        return welfare - p.makespan_weight * max(load, longest) / p.z0

    def value(self) -> float:
        return self.trial({})

    def apply(self, changes: dict[int, int]) -> None:
        for i, n in changes.items():
            j = self.p.jobs[i]
            self.welfare += self.log[i][n] - self.log[i][self.counts[i]]
            self.load += j.gpus * (j.remaining_s[n] - self.rem[i]) / self.p.gpus_total
            self.counts[i], self.rem[i] = n, j.remaining_s[n]
        self.top = sorted(range(len(self.p.jobs)), key=lambda i: -self.rem[i])[:3]


def _greedy_counts(p: PlanProblem, per_gpu: bool) -> list[list[bool]]:
    """One greedy pass: which rounds each job holds, ranking gains per GPU-round or absolute."""
    val = _Value(p, [0] * len(p.jobs))
    free = [p.gpus_total] * p.rounds
    held = [[False] * p.rounds for _ in p.jobs]
    while True:
        now = val.value()
        best: tuple[float, float, int, int] | None = None
        for i, j in enumerate(p.jobs):
            n = val.counts[i]
            if n + 1 >= len(j.utility):
                continue
            t = next((t for t in range(p.rounds) if not held[i][t] and free[t] >= j.gpus), None)
            if t is None:
                continue
            gain = val.trial({i: n + 1}) - now
            key = (gain / j.gpus if per_gpu else gain, j.priority, i, t)
            if gain > 0 and (best is None or key[:2] > best[:2]):
                best = key
        if best is None:
            return held
        _, _, i, t = best
        val.apply({i: val.counts[i] + 1})
        held[i][t] = True
        free[t] -= p.jobs[i].gpus


def _improve(p: PlanProblem, held: list[list[bool]], passes_max: int) -> list[list[bool]]:
    """Local search: hand one round of a job to another job (or to nobody) while it pays."""
    n_jobs = len(p.jobs)
    val = _Value(p, [sum(h) for h in held])
    free = [p.gpus_total - sum(j.gpus for j, h in zip(p.jobs, held, strict=True) if h[t])
            for t in range(p.rounds)]
    for _ in range(passes_max):
        improved = False
        for t in range(p.rounds):
            for a in range(n_jobs):
                if not held[a][t]:
                    continue
                now = val.value()
                for b in [None, *range(n_jobs)]:
                    change = {a: val.counts[a] - 1}
                    if b is not None:
                        if (held[b][t] or val.counts[b] + 1 >= len(p.jobs[b].utility)
                                or p.jobs[b].gpus > free[t] + p.jobs[a].gpus):
                            continue
                        change[b] = val.counts[b] + 1
                    if val.trial(change) > now + 1e-12:
                        val.apply(change)
                        improved = True
                        held[a][t] = False
                        free[t] += p.jobs[a].gpus
                        if b is not None:
                            held[b][t] = True
                            free[t] -= p.jobs[b].gpus
                        break
        if not improved:
            break
    return held


def solve_greedy(p: PlanProblem, *, passes_max: int = 20) -> Plan:
    """The heuristic: greedy by marginal gain, then one-round exchanges.

    Two greedy passes add one round at a time to the job with the largest
    gain, per GPU-round in one (small gangs pack well) and absolute in the
    other (a big gang's gain is not lost to crumbs); the better start is
    improved by moving single rounds between jobs, at most `passes_max`
    sweeps. Every gain is an O(1) update (`_Value`).
    """
    if not p.jobs:
        return Plan(rounds=((),) * p.rounds, counts=(), objective=0.0, method="greedy")
    starts = [_greedy_counts(p, per_gpu) for per_gpu in (True, False)]
    held = max(starts, key=lambda h: objective(p, [sum(r) for r in h]))
    held = _improve(p, held, passes_max)
    counts = [sum(h) for h in held]
    return Plan(rounds=schedule(p, held), counts=tuple(counts),
                objective=objective(p, counts), method="greedy")
