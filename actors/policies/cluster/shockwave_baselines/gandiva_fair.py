"""Gandiva-Fair (Chaudhary et al., EuroSys '20) as Shockwave §8.2 and §8.5 describe it.

"A framework that uses lottery scheduling to guarantee a proportionally
fair share of resources and efficiency by being work-conserving" (§8.2);
"Gandiva-Fair uses stride scheduling where, by default, a job's number of
tickets is equal to the job size (i.e., the number of workers). Thus, large
jobs have a higher proportional share" (§8.5).

Stride scheduling (Waldspurger and Weihl) is the deterministic form of
lottery scheduling, and what Gandiva-Fair implements, gang-aware. Each job
holds t_j tickets (its gang size g_j, or 1 with `tickets = "equal"`) and a
pass: the GPU-seconds it has received over its tickets. The global pass
advances by the GPU-seconds the cluster delivered over the tickets present,
so a job that always got its proportional share stays level with it; a new
job starts at the global pass (it is owed nothing for the time before it
came). Each round (Gavel's lease mechanism, as for the other round-based
policies here) jobs get leases lowest pass first while their gangs fit the
cluster's GPU count, skipping gangs that do not (work conservation); ties
go to the older job. With tickets = g_j a job's pass grows by its own run
time, so every job gets the same share of *time* and a gang of g GPUs g
times the GPUs of a one-GPU job: large jobs take more of the cluster, which
is why §8.5 measures Gandiva-Fair's average JCT 16–22% above the others.

Out of scope: Gandiva-Fair's per-user tickets (each job is its own user
here), its split of stride scheduling across servers, and its trading of
heterogeneous GPUs (one GPU type here). The state is every present job's
pass and run time at the last decision, and the global pass.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

import msgspec
from msgspec import Meta

from actors.policies.cluster.api import AcceptsEveryOffer, ClusterView, Decision, JobView
from actors.policies.cluster.gavel import lease_round, next_round_us, select_by_count
from emulator.units import US_PER_S

__all__ = ["GandivaFair", "GandivaFairParams", "GandivaFairState", "advance"]


class GandivaFairParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """gandiva-fair: round length, and tickets per job ("gpus": its gang size, the default)."""

    round_s: Annotated[float, Meta(gt=0)] = 120.0
    tickets: Literal["gpus", "equal"] = "gpus"


class GandivaFairState(msgspec.Struct, frozen=True, kw_only=True):
    """Stride state: each job's pass (GPU-s per ticket) and run time (µs) when last seen."""

    passes: dict[str, float] = msgspec.field(default_factory=dict)
    executed_us: dict[str, int] = msgspec.field(default_factory=dict)
    global_pass: float = 0.0


# Passes are compared at this resolution (GPU·s per ticket). Jobs that got the
# same rounds have the same pass up to the milliseconds a control plane adds to
# each run; compared exactly, those milliseconds would pick who gets the next
# lease (the actor system and the engine then part ways for the rest of the
# run: average JCT 20% apart on an 8-job trace, measured). A second is far
# below a round (120 s by default), so a job that got less keeps its turn.
PASS_RESOLUTION_GPU_S = 1.0


def _level(pass_gpu_s: float) -> int:
    """The pass in whole `PASS_RESOLUTION_GPU_S`, rounded to the nearest."""
    return math.floor(pass_gpu_s / PASS_RESOLUTION_GPU_S + 0.5)


def _tickets(job: JobView, params: GandivaFairParams) -> int:
    return job.gpus if params.tickets == "gpus" else 1


def advance(
    view: ClusterView, state: GandivaFairState, params: GandivaFairParams
) -> GandivaFairState:
    """The stride state at `view.now_us`: passes moved by the GPU-time each job received since."""
    seen = {j.job_id: j for j in (*view.finished, *view.jobs) if j.job_id in state.executed_us}
    delivered = 0.0
    for job_id, job in seen.items():
        delivered += job.gpus * (job.executed_us - state.executed_us[job_id]) / US_PER_S
    tickets = sum(_tickets(j, params) for j in seen.values())
    global_pass = state.global_pass + (delivered / tickets if tickets else 0.0)
    passes: dict[str, float] = {}
    for job in view.jobs:
        if job.job_id in state.executed_us:
            got = job.gpus * (job.executed_us - state.executed_us[job.job_id]) / US_PER_S
            passes[job.job_id] = state.passes[job.job_id] + got / _tickets(job, params)
        else:
            passes[job.job_id] = global_pass
    return GandivaFairState(
        passes=passes,
        executed_us={j.job_id: j.executed_us for j in view.jobs},
        global_pass=global_pass,
    )


class GandivaFair(AcceptsEveryOffer):
    """Gang-aware stride scheduling over round leases (see the module docstring)."""

    name: ClassVar[str] = "gandiva-fair"
    Params: ClassVar[type] = GandivaFairParams

    def initial_state(self, params: GandivaFairParams) -> GandivaFairState:
        del params
        return GandivaFairState()

    def decide(
        self, view: ClusterView, state: GandivaFairState, params: GandivaFairParams
    ) -> tuple[Decision, GandivaFairState]:
        wake, boundary = next_round_us(view, params.round_s)
        state = advance(view, state, params)
        order = [
            j.job_id
            for j in sorted(
                view.jobs,
                key=lambda j: (_level(state.passes[j.job_id]), j.submit_us, j.job_id),
            )
        ]
        decision = lease_round(view, order, select_by_count(view, order), boundary=boundary)
        return msgspec.structs.replace(decision, wake_at_us=wake), state
