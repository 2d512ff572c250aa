"""Shockwave's planning problem over the next T rounds (Shockwave App. G, program 11).

Choose a binary schedule x[j, t] (job j runs on its whole gang in round t)
for t = 1..T to maximise

    (1 / (N·M)) · Σ_j w_j · log UTIL_j  −  (λ / Z0) · H

subject to Σ_j g_j · x[j, t] ≤ M in every round. `w_j` is the job's
budget, ρ̂_j^k times its priority weight; UTIL_j is its epoch progress
after the window (App. G eq. 7); H is the lower bound on the makespan of
what remains after the window (eq. 10): the larger of the remaining work
over the M GPUs and the longest remaining job. The paper's work term is
Σ R_j / M (one GPU per job); with gangs we count GPU-time, Σ g_j·R_j / M,
which is the bound [12] gives. Z0 = Σ P̂_j normalises H.

Regimes run in order, so a job's progress after the window depends only
on how many rounds n_j it gets, not which: the caller tabulates
`utility[n]` and `remaining_s[n]` for n = 0..n_max and the regime
ordering constraints of App. H disappear. That makes log UTIL a function
of an integer, which the MILP linearises exactly with one binary z[j, n]
per possible count (a piecewise-linear function over the integers, with
no concavity needed — GNS speed-ups make UTIL convex in n). The authors'
artifact instead interpolates log between progress 0, 0.2, …, 1 (log 0
taken as log 1e-6), which changes the objective itself: it makes a round
worth ~17 times more below 20% progress than at 20–40%. We keep the exact log.
A job `seated` by the policy is fixed in round 1 (x[j, 1] = 1).

`solve_milp` uses scipy's HiGHS with a node limit (deterministic) and a
time limit (a safety net); `solve_greedy` (module `shockwave_greedy`) is
the documented heuristic; `solve` runs the MILP and falls back to the
greedy plan when the MILP fails, or stops at a limit with a worse
incumbent. Either way the rounds are ordered by `shockwave_plan.schedule`.
"""

from __future__ import annotations

import msgspec
import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from actors.policies.cluster.shockwave.greedy import solve_greedy
from actors.policies.cluster.shockwave.plan import (
    Method,
    PlanJob,
    PlanProblem,
    RoundSchedule,
    log_utility,
    objective,
    schedule,
)

__all__ = [
    "PlanJob",
    "PlanProblem",
    "RoundSchedule",
    "objective",
    "solve",
    "solve_greedy",
    "solve_milp",
]


def solve_milp(
    p: PlanProblem, *, time_limit_s: float = 15.0, node_limit: int = 5_000, rel_gap: float = 1e-6
) -> tuple[RoundSchedule | None, str]:
    """Program 11 as a MILP; (plan, "") if solved to optimality, else (best or None, why)."""
    n_jobs, t_max, m = len(p.jobs), p.rounds, p.gpus_total
    if n_jobs == 0:
        return RoundSchedule(rounds=((),) * t_max, counts=(), objective=0.0, method="milp"), ""
    # Columns: x[j, t] (j-major), then z[j, n] per job, then h.
    nx = n_jobs * t_max
    z_at: list[int] = []
    col = nx
    for j in p.jobs:
        z_at.append(col)
        col += len(j.utility)
    h_col, n_cols = col, col + 1
    c = np.zeros(n_cols)
    scale = 1.0 / (n_jobs * m)
    for i, j in enumerate(p.jobs):
        for n in range(len(j.utility)):
            c[z_at[i] + n] = -scale * j.weight * log_utility(p, j, n)  # milp minimises
    c[h_col] = p.makespan_weight / p.z0
    rows: list[np.ndarray] = []
    lo: list[float] = []
    hi: list[float] = []

    def row() -> np.ndarray:
        r = np.zeros(n_cols)
        rows.append(r)
        return r

    for i, j in enumerate(p.jobs):
        r = row()  # exactly one count per job
        r[z_at[i] : z_at[i] + len(j.utility)] = 1.0
        lo.append(1.0)
        hi.append(1.0)
        r = row()  # rounds scheduled = the chosen count
        r[i * t_max : (i + 1) * t_max] = 1.0
        r[z_at[i] : z_at[i] + len(j.utility)] = -np.arange(len(j.utility))
        lo.append(0.0)
        hi.append(0.0)
        r = row()  # h >= this job's remaining time
        r[h_col] = 1.0
        r[z_at[i] : z_at[i] + len(j.utility)] = -np.asarray(j.remaining_s)
        lo.append(0.0)
        hi.append(np.inf)
    r = row()  # h >= remaining GPU-time / M
    r[h_col] = 1.0
    for i, j in enumerate(p.jobs):
        r[z_at[i] : z_at[i] + len(j.utility)] = -np.asarray(j.remaining_s) * j.gpus / m
    lo.append(0.0)
    hi.append(np.inf)
    gpus = np.array([j.gpus for j in p.jobs], dtype=float)
    # Seated jobs hold the first round, which then is no longer interchangeable.
    seated = [i for i, j in enumerate(p.jobs) if j.seated]
    for t in range(t_max):
        r = row()  # capacity of round t
        r[t:nx:t_max] = gpus
        lo.append(-np.inf)
        hi.append(float(m))
        if t + 1 < t_max and not (seated and t == 0):
            # Rounds are interchangeable; ordering them by load removes the
            # symmetric copies of every schedule from the search.
            r = row()
            r[t:nx:t_max] = gpus
            r[t + 1 : nx : t_max] = -gpus
            lo.append(0.0)
            hi.append(np.inf)
    integrality = np.ones(n_cols)
    integrality[h_col] = 0
    upper = np.ones(n_cols)
    upper[h_col] = np.inf
    lower = np.zeros(n_cols)
    lower[[i * t_max for i in seated]] = 1.0
    res = milp(
        c,
        constraints=LinearConstraint(np.array(rows), lo, hi),
        integrality=integrality,
        bounds=Bounds(lower, upper),
        options={
            "time_limit": time_limit_s,
            "node_limit": node_limit,
            "mip_rel_gap": rel_gap,
            "presolve": True,
        },
    )
    if res.x is None:
        return None, f"milp: {res.message}"
    x = np.rint(res.x[:nx]).reshape(n_jobs, t_max)
    counts = [int(v) for v in x.sum(axis=1)]
    held = [[bool(x[i, t]) for t in range(t_max)] for i in range(n_jobs)]
    plan = RoundSchedule(
        rounds=schedule(p, held),
        counts=tuple(counts),
        objective=objective(p, counts),
        method="milp",
    )
    return plan, "" if res.status == 0 else f"milp: {res.message}"


def solve(
    p: PlanProblem, method: Method = "milp", *, time_limit_s: float = 15.0, node_limit: int = 5_000
) -> RoundSchedule:
    """The plan by `method`; the MILP falls back to the greedy plan if it fails or does worse.

    The node limit is deterministic; the time limit is a safety net that
    depends on the machine, so a run whose MILP hits it may not replay
    exactly (the plan's `note` says so, and the policy counts fallbacks).
    """
    greedy = solve_greedy(p)
    if method == "greedy":
        return greedy
    plan, why = solve_milp(p, time_limit_s=time_limit_s, node_limit=node_limit)
    if plan is None:
        return msgspec.structs.replace(greedy, note=why)
    if why and plan.objective < greedy.objective:
        return msgspec.structs.replace(greedy, note=f"{why}; greedy plan is better")
    return msgspec.structs.replace(plan, note=why)
