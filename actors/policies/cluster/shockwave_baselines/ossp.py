"""OSSP, Shockwave §8.2's efficiency baseline: "minimizes makespan using MILP", no fairness.

Round-based on Gavel's lease mechanism, like Shockwave. At a round
boundary OSSP plans the next T rounds (`window_rounds`, Shockwave's T) with
the makespan MILP of `window.py` — first the least makespan bound of what
is left after the window, then the most even work left, which hands rounds
to the longest jobs — and leases the plan's first round; the rest of the
plan is followed until it is used up or the set of jobs changes (an arrival
or a completion), when it is solved again over the jobs present then
(receding horizon). Leftover GPUs, between rounds too, go to waiting jobs
longest remaining first (Shockwave App. H's work conservation, kept for
every round-based policy here).

What the paper leaves open, and what we chose:
- The paper names the objective only. Makespan over a window is the bound
  H of Shockwave App. G eq. 10 after the window; H alone is indifferent
  among all plans that keep the GPUs busy, so ties go to the plan that
  leaves the work most even (longest processing time first), which is what
  "aggressively prioritizing long jobs for tight resource packing" (§8.3)
  describes.
- Remaining time is reactive (`speed.py`): the work left at the job's
  current batch size, as the artifact's OSSP (Gavel's min-total-duration
  policy) reads steps left over measured throughput. §2.2's Fig. 4 shows
  what that costs a makespan MILP under batch-size scaling.
- The plan is re-solved on arrivals and completions only, not when a job's
  batch size changes (the artifact recomputes allocations on the same
  events).
- The state counts solves and fallbacks to the greedy plan (a MILP stopped
  by its time limit depends on the machine, so such a run may not replay).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec
from msgspec import Meta

from actors.policies.cluster.api import AcceptsEveryOffer, ClusterView, Decision
from actors.policies.cluster.gavel import lease_round, next_round_us
from actors.policies.cluster.shockwave_baselines.speed import remaining_now_s
from actors.policies.cluster.shockwave_baselines.window import WindowJob, plan_window

__all__ = ["Ossp", "OsspParams", "OsspState"]


class OsspParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """ossp: round length, planning window T, and the MILP's limits (Shockwave's defaults)."""

    round_s: Annotated[float, Meta(gt=0)] = 120.0
    window_rounds: Annotated[int, Meta(ge=1, le=500)] = 20
    solver_time_limit_s: Annotated[float, Meta(gt=0)] = 15.0
    solver_node_limit: Annotated[int, Meta(ge=1)] = 5_000


class OsspState(msgspec.Struct, frozen=True, kw_only=True):
    """The rounds left of the plan, the job set it was made for, and solver counters."""

    plan: tuple[tuple[str, ...], ...] = ()
    plan_for: tuple[str, ...] = ()
    solves: int = 0
    fallbacks: int = 0


class Ossp(AcceptsEveryOffer):
    """Open-shop makespan minimisation over a planning window (see the module docstring)."""

    name: ClassVar[str] = "ossp"
    Params: ClassVar[type] = OsspParams

    def initial_state(self, params: OsspParams) -> OsspState:
        del params
        return OsspState()

    def decide(
        self, view: ClusterView, state: OsspState, params: OsspParams
    ) -> tuple[Decision, OsspState]:
        wake, boundary = next_round_us(view, params.round_s)
        left = {j.job_id: remaining_now_s(j) for j in view.jobs}
        order = [
            j.job_id
            for j in sorted(view.jobs, key=lambda j: (-left[j.job_id], j.submit_us, j.job_id))
        ]
        plan, plan_for = state.plan, state.plan_for
        solves, fallbacks = state.solves, state.fallbacks
        leased: tuple[str, ...] = ()
        if boundary and view.jobs:
            present = tuple(sorted(left))
            if not plan or plan_for != present:
                window = plan_window(
                    [
                        WindowJob(
                            job_id=j.job_id,
                            gpus=j.gpus,
                            remaining_s=left[j.job_id],
                            running=j.running,
                        )
                        for j in sorted(view.jobs, key=lambda j: j.job_id)
                    ],
                    sum(s.gpus_total for s in view.machines),
                    params.window_rounds,
                    params.round_s,
                    time_limit_s=params.solver_time_limit_s,
                    node_limit=params.solver_node_limit,
                )
                plan, plan_for = window.rounds, present
                solves += 1
                fallbacks += not window.optimal
            leased, plan = plan[0], plan[1:]
        held = set(leased)
        ranked = [k for k in order if k in held] + [k for k in order if k not in held]
        decision = lease_round(view, ranked, leased, boundary=boundary)
        next_state = OsspState(plan=plan, plan_for=plan_for, solves=solves, fallbacks=fallbacks)
        return msgspec.structs.replace(decision, wake_at_us=wake), next_state
