"""Tiresias (NSDI'19): discretized two-dimensional attained-service scheduling.

A job's attained service is GPUs × time run (GPU-seconds), summed over all
its runs. K logical queues split that service at thresholds
`queue_thresholds_gpu_s` (default K = 2 with one threshold at 3200 GPU-s,
the testbed setting of §5.2): a job starts in Q1 and is demoted when its
service crosses its queue's upper limit (§3.2.3). Queues are served in
order; within a queue

- `tiresias-las` (Discretized 2D-LAS) runs jobs FIFO by *start time*, the
  time a job was first scheduled, so a job skipped for lack of GPUs does
  not later preempt one that started before it; never-started jobs follow,
  by arrival;
- `tiresias-gittins` (Discretized 2D-Gittins index) runs jobs by their
  Gittins index G(a, Δ_i) with the quantum Δ_i = Q_i^hi, the queue's upper
  limit as §3.2.3 words it (the authors' simulator reads it the same way:
  a fixed quantum from the current service), highest first; the last queue
  (Δ_K = ∞) is FIFO as for LAS. The service distribution comes from Params
  or, when Params give none, from the services of finished jobs (a bounded
  history in the state); with neither, Pseudocode 1 falls back to LAS.

Two conventions of the authors' simulator come from the view (the run's
`[system.semantics]`): `gittins = "tiresias-sim"` replaces the index by the
simulator's (`sim_gittins.py`: full service of the finishers, attained
service snapped to sample points, a fixed quantum, every queue ordered by
it), and `equal_rank = "reallocate"` orders each queue by (index, earliest
submit) and reallocates every GPU in that order (`reallocate_pass`), so a
running job loses its GPUs to an equal-index job submitted before it.

Scheduling follows Pseudocode 2, placement-aware (see tiresias_placement):
a waiting job that cannot otherwise fit preempts running jobs of lower
queues (or, for Gittins, of lower index in its queue) — on arrival and on
demotion. Starvation (§3.2.3): a waiting job outside Q1 whose waiting time
δ_J reaches PROMOTEKNOB × t_J (its run time) is promoted to Q1 and both
clocks restart: its service counts from the promotion, and Q1 orders it as
if it started then (the authors' simulator appends it to Q1). The state
keeps these restart points. The policy asks to be woken when a running job
will cross its queue's threshold or a waiting job will become promotable.
Ours, not the paper's: a job less than `crossing_slack_s` of its run time
short of a threshold, or of a point of the service distribution, counts as
past it (`TiresiasParams`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache
from typing import ClassVar

from actors.policies.cluster.api import AcceptsEveryOffer, ClusterView, Decision, JobView
from actors.policies.cluster.gittins import ServiceTable, distribution
from actors.policies.cluster.perf_model import skew
from actors.policies.cluster.tiresias.params import (
    GittinsParams,
    Reset,
    TiresiasParams,
    TiresiasState,
)
from actors.policies.cluster.tiresias.placement import (
    Pass,
    pack_placer,
    reallocate_pass,
    run_pass,
)
from actors.policies.cluster.tiresias.sim_gittins import PEER_DELTA_GPU_S, SimGittinsTable
from emulator.units import US_PER_S

__all__ = ["GittinsParams", "TiresiasGittins", "TiresiasLas", "TiresiasParams", "TiresiasState"]

_NO_RESET: Reset = (0, 0, 0, -1)  # a job never promoted counts from zero


def waited_us(job: JobView, now_us: int) -> int:
    """Time a started job has spent waiting since it first started (0 if never started)."""
    if job.first_start_us is None:
        return 0
    return max(0, now_us - job.first_start_us - job.executed_us)


def queue_of(attained_gpu_us: int, thresholds_gpu_us: Sequence[int], reach_gpu_us: int = 0) -> int:
    """0-based queue of a job with this attained service: Q_i holds [Q_i^lo, Q_i^hi).

    Service at most `reach_gpu_us` short of a threshold counts as past it (`_reach`).
    """
    return bisect_right(thresholds_gpu_us, attained_gpu_us + reach_gpu_us)


def _reach(job: JobView, slack_us: int) -> int:
    """How far short of a threshold or a service point a job counts as past it, GPU-µs.

    Less than what it attains in `crossing_slack_s` of its run time (`TiresiasParams`).
    """
    return max(0, slack_us * job.gpus - 1)


def _thresholds_us(params: TiresiasParams) -> tuple[int, ...]:
    return tuple(round(t * US_PER_S) for t in params.queue_thresholds_gpu_s)


def _promotable(
    job: JobView, reset: Reset, thr: Sequence[int], knob: float, now_us: int, slack_us: int
) -> bool:
    """A waiting, once-started job outside Q1 whose δ_J ≥ PROMOTEKNOB × t_J."""
    if job.running or job.first_start_us is None:
        return False
    if queue_of(job.attained_gpu_us - reset[0], thr, _reach(job, slack_us)) == 0:
        return False
    return waited_us(job, now_us) - reset[2] >= knob * (job.executed_us - reset[1])


Table = ServiceTable | SimGittinsTable


def _priority(
    job: JobView,
    reset: Reset,
    thr: Sequence[int],
    table: Table | None,
    slack_us: int,
    by_submit: bool = False,
) -> tuple[int, float, int, int, int, str]:
    """Sort key: queue, then -Gittins index (0 for LAS and the last queue), then FIFO by start.

    The simulator's index (`SimGittinsTable`) orders every queue, the last
    one too; `by_submit` breaks equal indexes by earliest submission instead
    of by start time (`equal_rank = "reallocate"`).
    """
    attained = job.attained_gpu_us - reset[0]
    reach = _reach(job, slack_us)
    q = queue_of(attained, thr, reach)
    # The index steps at every service of the distribution; a job as near one as
    # the slack counts as past it too. Two jobs started by one decision on as
    # many GPUs attain equal services: when one ends, the other sits on its
    # step in the engine and a few µs short of it in the actors (their starts
    # are apart), whose index differed wholly (JCT 4.5x apart on one trace).
    gittins = 0.0
    if isinstance(table, SimGittinsTable):
        gittins = -table.index(attained / US_PER_S, reach / US_PER_S)
    elif table is not None and q < len(thr):
        gittins = -table.ratio(attained / US_PER_S, thr[q] / US_PER_S, reach / US_PER_S)
    if by_submit:
        return (q, gittins, 0, 0, job.submit_us, job.job_id)
    if job.first_start_us is None:
        return (q, gittins, 1, 0, job.submit_us, job.job_id)
    # A promoted job re-enters Q1 as if it started at its promotion: it queues
    # behind jobs already running there instead of preempting them.
    started = reset[3] if reset[3] >= 0 else job.first_start_us
    return (q, gittins, 0, started, job.submit_us, job.job_id)


def _next_wake(
    view: ClusterView,
    done: Pass,
    resets: dict[str, Reset],
    thr: Sequence[int],
    knob: float | None,
    floor_us: int,
    slack_us: int,
) -> int | None:
    """The next threshold crossing of a job running after `done`, or the next promotion."""
    now = view.now_us
    started = {s.job_id for s in done.start}
    preempted = set(done.preempt)
    times: list[int] = []
    for job in view.jobs:
        reset = resets.get(job.job_id, _NO_RESET)
        attained = job.attained_gpu_us - reset[0]
        q = queue_of(attained, thr, _reach(job, slack_us))
        runs = (job.running and job.job_id not in preempted) or job.job_id in started
        if runs and q < len(thr):
            times.append(now + max(floor_us, math.ceil((thr[q] - attained) / job.gpus)))
        elif not runs and knob is not None and job.first_start_us is not None and q > 0:
            need = knob * (job.executed_us - reset[1]) - (waited_us(job, now) - reset[2])
            times.append(now + max(floor_us, math.ceil(need)))
    return min(times, default=None)


def _remember(
    services: tuple[float, ...], finished: Sequence[JobView], limit: int
) -> tuple[float, ...]:
    """The service history plus the newly finished jobs, oldest dropped past `limit`."""
    new = tuple(j.attained_gpu_us / US_PER_S for j in finished if j.attained_gpu_us > 0)
    return (services + new)[-limit:]


def _decide(
    view: ClusterView,
    state: TiresiasState,
    params: TiresiasParams,
    table: Table | None,
    services: tuple[float, ...],
) -> tuple[Decision, TiresiasState]:
    thr = _thresholds_us(params)
    floor_us = round(params.wake_min_s * US_PER_S)
    slack_us = round(params.crossing_slack_s * US_PER_S)
    live = {j.job_id for j in view.jobs}
    resets = {k: v for k, v in state.resets.items() if k in live}
    knob = params.promote_knob
    if knob is not None:
        for job in view.jobs:
            reset = resets.get(job.job_id, _NO_RESET)
            if _promotable(job, reset, thr, knob, view.now_us, slack_us):
                waited = waited_us(job, view.now_us)
                resets[job.job_id] = (job.attained_gpu_us, job.executed_us, waited, view.now_us)
    # Reallocation is for an order by rank: LAS (no table) keeps its FIFO by start.
    reallocate = table is not None and view.equal_rank == "reallocate"
    keys = {
        j.job_id: _priority(j, resets.get(j.job_id, _NO_RESET), thr, table, slack_us, reallocate)
        for j in view.jobs
    }
    order = sorted(view.jobs, key=lambda j: keys[j.job_id])

    def victim_ok(job: JobView, running: JobView) -> bool:
        # A lower queue always yields; in the same queue a strictly lower
        # Gittins index does, and a later start only with `fifo_preempts`.
        (mine, my_index, *_), (theirs, their_index, *_) = keys[job.job_id], keys[running.job_id]
        if theirs != mine:
            return theirs > mine
        # The simulator's index orders the last queue too.
        if isinstance(table, SimGittinsTable) or (table is not None and mine < len(thr)):
            return their_index > my_index  # keys hold -index
        return params.fifo_preempts

    placer = pack_placer(skew, params.pack_limit)
    if reallocate and params.preempt:
        done = reallocate_pass(view, order, placer)
    else:
        done = run_pass(view, order, placer, may_preempt=params.preempt, victim_ok=victim_ok)
    decision = Decision(
        preempt=done.preempt,
        start=done.start,
        wake_at_us=_next_wake(view, done, resets, thr, knob, floor_us, slack_us),
    )
    return decision, TiresiasState(resets=resets, services_gpu_s=services)


class TiresiasLas(AcceptsEveryOffer):
    """Discretized 2D-LAS: information-agnostic, FIFO by start time within a queue."""

    name: ClassVar[str] = "tiresias-las"
    Params: ClassVar[type] = TiresiasParams

    def initial_state(self, params: TiresiasParams) -> TiresiasState:
        del params
        return TiresiasState()

    def decide(
        self, view: ClusterView, state: TiresiasState, params: TiresiasParams
    ) -> tuple[Decision, TiresiasState]:
        return _decide(view, state, params, None, state.services_gpu_s)


class TiresiasGittins(AcceptsEveryOffer):
    """Discretized 2D-Gittins index: Gittins order within all but the last queue."""

    name: ClassVar[str] = "tiresias-gittins"
    Params: ClassVar[type] = GittinsParams

    def initial_state(self, params: GittinsParams) -> TiresiasState:
        del params
        return TiresiasState()

    def decide(
        self, view: ClusterView, state: TiresiasState, params: GittinsParams
    ) -> tuple[Decision, TiresiasState]:
        table: Table | None = None
        thr = params.queue_thresholds_gpu_s
        delta = thr[0] if thr else PEER_DELTA_GPU_S
        if params.service_values_gpu_s:
            services = state.services_gpu_s  # the operator's distribution: nothing to learn
            values, probs = tuple(params.service_values_gpu_s), tuple(params.service_probs)
            table = gittins_table(values, probs or None, view.gittins, delta)
        else:
            services = _remember(state.services_gpu_s, view.finished, params.history_jobs_max)
            if services:
                table = gittins_table(services, None, view.gittins, delta)
        return _decide(view, state, params, table, services)


@lru_cache(maxsize=8)
def gittins_table(
    values: tuple[float, ...], probs: tuple[float, ...] | None, variant: str, delta: float
) -> Table:
    """The index table of a service distribution, kept between decisions.

    Building it (merging, sorting and summing up to `history_jobs_max`
    services) was two thirds of the engine's time under tiresias-gittins,
    rebuilt at every decision although the history changes only when a job
    finishes. The tables are immutable and a pure function of these
    arguments, so the cache is not state: a replay gets the same decisions
    with or without it. `delta` is used by the simulator's variant only.
    """
    dist = distribution(values, probs)
    if variant == "tiresias-sim":
        return SimGittinsTable(dist, delta)
    return ServiceTable(dist)
