"""The plan of Shockwave's next T rounds: the problem, its objective, and the round order.

Shared by the two solvers (`shockwave_solver` for the MILP, `shockwave_greedy`
for the heuristic). `PlanProblem` is program 11 of Shockwave's App. G for one
decision, already reduced to rounds-per-job tables (see `shockwave_solver`);
`objective` is its value for given counts; `schedule` turns a solver's
feasible rounds into the order the policy runs them: jobs `seated` in the
first round (they finish there, see `PlanJob`), then the most unfairly
treated jobs (highest `priority`, ρ̂) earliest, each job's rounds contiguous
where they can be (Shockwave prefers continuous rounds to restarts, §7).
"""

from __future__ import annotations

import math
from typing import Literal

import msgspec

__all__ = [
    "Method",
    "PlanJob",
    "PlanProblem",
    "RoundSchedule",
    "log_utility",
    "objective",
    "ranked",
    "schedule",
]

Method = Literal["milp", "greedy"]


class PlanJob(msgspec.Struct, frozen=True, kw_only=True):
    """One job of the window: its gang, budget, and outcome for each number of rounds.

    `utility[n]` is its progress fraction (UTIL, 0..1) after n rounds of the
    window, `remaining_s[n]` its remaining run time alone after them; both
    have n_max + 1 entries (n_max ≤ T: a job about to finish needs fewer).
    A `seated` job holds the first round whatever the objective says: it
    finishes within one round (n_max = 1), and the policy decides to run it
    now (see `shockwave.Shockwave`); the solvers plan the others around it.
    """

    job_id: str
    gpus: int
    weight: float
    utility: tuple[float, ...]
    remaining_s: tuple[float, ...]
    priority: float = 0.0
    seated: bool = False
    running: bool = False  # holds GPUs now (`PlanProblem.running_first`)

    def __post_init__(self) -> None:
        if not self.utility or len(self.utility) != len(self.remaining_s):
            raise ValueError(
                f"plan job {self.job_id}: utility and remaining_s must be non-empty, equal length"
            )
        if self.seated and len(self.utility) != 2:
            raise ValueError(f"plan job {self.job_id}: only a job finishing in one round is seated")


class PlanProblem(msgspec.Struct, frozen=True, kw_only=True):
    """Program 11 for one decision: jobs, M GPUs, T rounds, λ, Z0 and the log floor."""

    jobs: tuple[PlanJob, ...]
    gpus_total: int
    rounds: int
    makespan_weight: float = 1e-3
    z0: float = 1.0
    utility_floor: float = 1e-6
    # Seat the running jobs the plan gives rounds to before the others (`ranked`).
    running_first: bool = False

    def __post_init__(self) -> None:
        if sum(j.gpus for j in self.jobs if j.seated) > self.gpus_total:
            raise ValueError("plan problem: the seated jobs' gangs exceed the cluster's GPUs")


class RoundSchedule(msgspec.Struct, frozen=True, kw_only=True):
    """The schedule: job ids per round, rounds per job, its objective and how it was found."""

    rounds: tuple[tuple[str, ...], ...]
    counts: tuple[int, ...]
    objective: float
    method: Method
    note: str = ""


def log_utility(p: PlanProblem, j: PlanJob, n: int) -> float:
    """log UTIL_j after n rounds, floored so a job with no progress yet stays finite."""
    return math.log(max(j.utility[n], p.utility_floor))


def objective(p: PlanProblem, counts: tuple[int, ...] | list[int]) -> float:
    """Program 11's value for `counts[j]` rounds per job (rounds assumed packable)."""
    if not p.jobs:
        return 0.0
    welfare = sum(j.weight * log_utility(p, j, n) for j, n in zip(p.jobs, counts, strict=True))
    rem = [j.remaining_s[n] for j, n in zip(p.jobs, counts, strict=True)]
    load = sum(j.gpus * r for j, r in zip(p.jobs, rem, strict=True)) / p.gpus_total
    h = max(load, max(rem))
    return welfare / (len(p.jobs) * p.gpus_total) - p.makespan_weight * h / p.z0


def ranked(p: PlanProblem) -> list[int]:
    """Job indices in schedule order: seated jobs, then by priority (ρ̂) and job id.

    With `running_first`, the running jobs come right after the seated ones:
    a job the plan gives rounds to keeps its GPUs through its first rounds
    instead of giving them up to a more unfairly treated one and restarting
    later. The counts, hence the objective, are the same either way; only
    which rounds each job holds changes.
    """
    first = p.running_first
    return sorted(
        range(len(p.jobs)),
        key=lambda i: (
            not p.jobs[i].seated,
            first and not p.jobs[i].running,
            -p.jobs[i].priority,
            p.jobs[i].job_id,
        ),
    )


def _rounds(p: PlanProblem, held: list[list[bool]]) -> tuple[tuple[str, ...], ...]:
    """The job ids of every round, highest priority first within a round."""
    order = ranked(p)
    return tuple(tuple(p.jobs[i].job_id for i in order if held[i][t]) for t in range(p.rounds))


def _first_fit(p: PlanProblem, counts: list[int]) -> list[list[bool]] | None:
    """Each job's rounds earliest-first, in priority order; None if first-fit cannot pack."""
    free = [p.gpus_total] * p.rounds
    held = [[False] * p.rounds for _ in p.jobs]
    for i in ranked(p):
        need = counts[i]
        for t in range(p.rounds):
            if need and free[t] >= p.jobs[i].gpus:
                free[t] -= p.jobs[i].gpus
                held[i][t] = True
                need -= 1
        if need:
            return None
    return held


def _earlier(p: PlanProblem, held: list[list[bool]], passes_max: int = 50) -> list[list[bool]]:
    """Pull higher-priority jobs into earlier rounds of a feasible schedule, keeping counts.

    Moves a job from round t2 to an earlier round t1 where it fits, or swaps
    it with a lower-priority job of t1 (the first by index) when both gangs
    then fit. Each move strictly lowers Σ rank × round, so the loop ends; it
    is bounded anyway.
    """
    n_jobs = len(p.jobs)
    order = ranked(p)
    rank = [0] * n_jobs
    for r, i in enumerate(order):
        rank[i] = r
    g = [j.gpus for j in p.jobs]
    # Rounds as columns: x[t][i] is job i's seat in round t.
    x = [[held[i][t] for i in range(n_jobs)] for t in range(p.rounds)]
    free = [p.gpus_total - sum(gi for gi, h in zip(g, col, strict=True) if h) for col in x]
    for _ in range(passes_max):
        moved = False
        for t1 in range(p.rounds):
            x1 = x[t1]
            for t2 in range(t1 + 1, p.rounds):
                x2 = x[t2]
                # Swap partners: jobs of t1 not in t2, by index. A job moved into t1
                # ranks above every later candidate, so it never becomes a partner.
                partners = [b for b in range(n_jobs) if x1[b] and not x2[b]]
                for a in order:
                    if not x2[a] or x1[a]:
                        continue
                    if free[t1] >= g[a]:
                        x1[a], x2[a] = True, False
                        free[t1] -= g[a]
                        free[t2] += g[a]
                        moved = True
                        continue
                    for b in partners:
                        if (
                            rank[b] > rank[a]
                            and free[t1] + g[b] >= g[a]
                            and free[t2] + g[a] >= g[b]
                        ):
                            x1[a], x2[a], x1[b], x2[b] = True, False, False, True
                            free[t1] += g[b] - g[a]
                            free[t2] += g[a] - g[b]
                            partners.remove(b)
                            moved = True
                            break
        if not moved:
            break
    return [[x[t][i] for t in range(p.rounds)] for i in range(n_jobs)]


def schedule(p: PlanProblem, held: list[list[bool]]) -> tuple[tuple[str, ...], ...]:
    """A solver's feasible rounds, reordered so the most unfairly treated jobs run first."""
    counts = [sum(h) for h in held]
    return _rounds(p, _first_fit(p, counts) or _earlier(p, [list(h) for h in held]))
