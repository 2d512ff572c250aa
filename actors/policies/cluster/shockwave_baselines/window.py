"""OSSP's planning problem: how many of the next T rounds each job gets, to end soonest.

Jobs j with gangs g_j and remaining run times R_j (`speed.remaining_now_s`)
share M GPUs over a window of T rounds of r seconds. A job given n_j rounds
has R'_j(n) = max(0, R_j − n·r) left after the window. The MILP, over one
binary z[j, n] per possible count (n = 0 … min(T, ⌈R_j / r⌉)), is solved
twice, lexicographically:

1. minimise H = max(Σ_j g_j·R'_j / M, max_j R'_j), the makespan bound of
   what is left after the window (Shockwave App. G eq. 10, the bound of its
   [12]; a makespan cannot be shorter than the work over the GPUs nor than
   the longest job);
2. among the plans with the least H, minimise Σ_j g_j·R'_j²: the remaining
   work as even as possible, so a round goes first to the job with the most
   left per GPU (longest processing time first, the classic makespan rule,
   and the discrete form of the fluid optimum in which every job finishes
   at H together: Gavel's min-total-duration allocation, which the
   Shockwave artifact runs as OSSP).

Σ_j g_j·n_j ≤ M·T bounds the window's GPU-rounds. Which rounds a job gets
does not change what is left, so the MILP only chooses counts; a first-fit
pass (`pack_rounds`) then seats them round by round, the jobs with the most
rounds first, then running ones (no needless preemption), then by R_j. For
one-GPU jobs any counts within M·T and T fit (McNaughton's wrap-around);
a gang that first-fit cannot seat loses that round, and the policy's work
conservation gives its GPUs to the next job in line. Counting every round
in the MILP (binary x[j, t]) would be exact but costs ~10x more per solve
(1–2 s at 90 jobs × 20 rounds, measured), and the plan is re-solved often.

The MILP runs on scipy's HiGHS with a node limit (deterministic) and a time
limit (a safety net that depends on the machine); if it fails, or stops at
a limit with no plan, `greedy_counts` (rounds to the longest jobs first)
stands in and the result says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

__all__ = ["Window", "WindowJob", "greedy_counts", "pack_rounds", "plan_window", "solve_counts"]

# Stage 2 keeps stage 1's bound up to this relative slack (solver tolerances).
H_SLACK = 1e-9


class WindowJob(msgspec.Struct, frozen=True, kw_only=True):
    """One job of the window: its gang, remaining run time alone (s), and whether it runs now."""

    job_id: str
    gpus: int
    remaining_s: float
    running: bool = False


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """A solved window: rounds per job, the job ids of each round, the bound H, how solved."""

    counts: tuple[int, ...]
    rounds: tuple[tuple[str, ...], ...]
    makespan_bound_s: float
    optimal: bool


def _max_rounds(job: WindowJob, rounds: int, round_s: float) -> int:
    return min(rounds, max(0, math.ceil(job.remaining_s / round_s - 1e-9)))


def _left(job: WindowJob, n: int, round_s: float) -> float:
    return max(0.0, job.remaining_s - n * round_s)


def bound_s(jobs: Sequence[WindowJob], counts: Sequence[int], gpus: int, round_s: float) -> float:
    """H for these counts: the larger of the remaining GPU-time over M and the longest job."""
    left = [_left(j, n, round_s) for j, n in zip(jobs, counts, strict=True)]
    load = sum(j.gpus * r for j, r in zip(jobs, left, strict=True)) / gpus
    return max([load, *left])


def greedy_counts(
    jobs: Sequence[WindowJob], gpus: int, rounds: int, round_s: float
) -> tuple[int, ...]:
    """The fallback: one round at a time to the job with the most left, while GPU-rounds last."""
    counts = [0] * len(jobs)
    capacity = gpus * rounds
    while True:
        best = None
        for i, j in enumerate(jobs):
            if counts[i] < _max_rounds(j, rounds, round_s) and j.gpus <= capacity:
                key = (_left(j, counts[i], round_s), -i)
                if best is None or key > best[0]:
                    best = (key, i)
        if best is None:
            return tuple(counts)
        counts[best[1]] += 1
        capacity -= jobs[best[1]].gpus


def solve_counts(
    jobs: Sequence[WindowJob],
    gpus: int,
    rounds: int,
    round_s: float,
    *,
    time_limit_s: float = 15.0,
    node_limit: int = 5_000,
) -> tuple[tuple[int, ...], bool]:
    """The counts of the lexicographic MILP (module docstring); (greedy, False) if it fails."""
    if not jobs:
        return (), True
    sizes = [_max_rounds(j, rounds, round_s) + 1 for j in jobs]
    first = [sum(sizes[:i]) for i in range(len(jobs))]
    h_col = sum(sizes)
    n_cols = h_col + 1
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []

    def add(entries: Sequence[tuple[int, float]], low: float, high: float) -> None:
        row = len(lo)
        for c, v in entries:
            rows.append(row)
            cols.append(c)
            vals.append(v)
        lo.append(low)
        hi.append(high)

    load: list[tuple[int, float]] = [(h_col, 1.0)]
    capacity: list[tuple[int, float]] = []
    for i, j in enumerate(jobs):
        zs = range(first[i], first[i] + sizes[i])
        add([(c, 1.0) for c in zs], 1.0, 1.0)  # exactly one count
        # h >= R'_j: the longest job left after the window.
        add([(h_col, 1.0)] + [(c, -_left(j, n, round_s)) for n, c in enumerate(zs)], 0.0, np.inf)
        load += [(c, -j.gpus * _left(j, n, round_s) / gpus) for n, c in enumerate(zs)]
        capacity += [(c, float(j.gpus * n)) for n, c in enumerate(zs)]
    add(load, 0.0, np.inf)  # h >= the GPU-time left over the GPUs
    add(capacity, -np.inf, float(gpus * rounds))
    a = coo_matrix((vals, (rows, cols)), shape=(len(lo), n_cols)).tocsr()
    constraints = LinearConstraint(a, np.array(lo), np.array(hi))
    integrality = np.ones(n_cols)
    integrality[h_col] = 0
    upper = np.ones(n_cols)
    upper[h_col] = np.inf
    options = {"time_limit": time_limit_s, "node_limit": node_limit, "presolve": True}
    # Stage 1: the least bound H (scaled so the objective is about 1).
    scale_h = max(1.0, max(j.remaining_s for j in jobs))
    c1 = np.zeros(n_cols)
    c1[h_col] = 1.0 / scale_h
    one = milp(
        c1,
        constraints=constraints,
        integrality=integrality,
        bounds=Bounds(np.zeros(n_cols), upper),
        options={**options, "mip_rel_gap": 1e-9},
    )
    if one.x is None or one.status != 0:
        return greedy_counts(jobs, gpus, rounds, round_s), False
    # Stage 2: within that bound, the most even work left (Σ g·R'², scaled to about 1).
    upper = upper.copy()
    upper[h_col] = float(one.x[h_col]) * (1 + H_SLACK) + 1e-6
    scale_sq = max(1.0, sum(j.gpus * j.remaining_s**2 for j in jobs))
    c2 = np.zeros(n_cols)
    for i, j in enumerate(jobs):
        for n in range(sizes[i]):
            c2[first[i] + n] = j.gpus * _left(j, n, round_s) ** 2 / scale_sq
    two = milp(
        c2,
        constraints=constraints,
        integrality=integrality,
        bounds=Bounds(np.zeros(n_cols), upper),
        options={**options, "mip_rel_gap": 1e-9},
    )
    best = two if two.x is not None else one
    x = np.rint(best.x[:h_col])
    counts = tuple(int(np.argmax(x[first[i] : first[i] + sizes[i]])) for i in range(len(jobs)))
    return counts, two.x is not None and two.status == 0


def pack_rounds(
    jobs: Sequence[WindowJob], counts: Sequence[int], gpus: int, rounds: int
) -> tuple[tuple[str, ...], ...]:
    """Seat each job's rounds first-fit: most rounds first, then running, then most left."""
    order = sorted(
        range(len(jobs)),
        key=lambda i: (-counts[i], not jobs[i].running, -jobs[i].remaining_s, jobs[i].job_id),
    )
    free = [gpus] * rounds
    seated: list[list[int]] = [[] for _ in range(rounds)]
    for i in order:
        need = counts[i]
        for t in range(rounds):
            if need and free[t] >= jobs[i].gpus:
                free[t] -= jobs[i].gpus
                seated[t].append(i)
                need -= 1
    return tuple(tuple(jobs[i].job_id for i in s) for s in seated)


def plan_window(
    jobs: Sequence[WindowJob],
    gpus: int,
    rounds: int,
    round_s: float,
    *,
    time_limit_s: float = 15.0,
    node_limit: int = 5_000,
) -> Window:
    """Solve the counts and seat them: the OSSP plan of the next `rounds` rounds."""
    counts, optimal = solve_counts(
        jobs, gpus, rounds, round_s, time_limit_s=time_limit_s, node_limit=node_limit
    )
    return Window(
        counts=counts,
        rounds=pack_rounds(jobs, counts, gpus, rounds),
        makespan_bound_s=bound_s(jobs, counts, gpus, round_s) if jobs else 0.0,
        optimal=optimal,
    )
