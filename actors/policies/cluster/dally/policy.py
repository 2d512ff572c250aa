"""Dally (Sharma et al., IEEE Big Data 2025): network-sensitive priority, delay scheduling,
auto-tuned timers and network-sensitive preemption on one GPU cluster.

Priority (§IV-B1). Nw_sens = W_compl / T_norm with W_compl = I_compl /
I_total-expected and T_norm = T_run / T_total-ideal-run. Mapped onto
`JobView`:
  - W_compl = `progress` (the completed fraction of the declared
    iterations, I_compl / I_total-expected; `iterations` itself cancels out);
  - T_run = `executed_us` (time spent in the run queue, summed over runs);
  - T_total-ideal-run = the job's pure compute time for all iterations. The
    trace gives `duration_us`, the run time on one machine, which for a gang
    of more than one GPU still includes machine-tier communication; the
    paper's ideal has none, so it is `duration_us / (1 + c)` with c the
    model's machine-tier communication over compute for that gang size
    (Table I via `perf_model.comm_fraction`; 0 for one GPU). The paper
    profiles the compute time per iteration; the table stands for that.
So Nw_sens is the ideal compute time of the work done over the time run: 1
for a job that never waited on the network, lower the more it did. A job
that has completed nothing yet has W_compl = 0, hence Nw_sens = 0: like a
fresh job under Tiresias's 2D-LAS it comes first. `attained_gpu_us` and
`slowdown` are not used (Nw_sens already averages the slowdown over runs).

Offers (§IV-B). Waiting jobs are visited in increasing Nw_sens (ties: longer
waiting first, then job id); each is offered the most consolidated placement
the free GPUs allow now, and its agent (`accepts`, Algorithm 1, in
`dally_timers`) takes or refuses it. A refused offer binds no GPUs: the next
job may take them, which is what lets delay scheduling skip a job. The
policy asks the same pure `agent_accepts` before it commits GPUs, so it
knows the answer: every accepted machine- or rack-tier offer adds the job's
wait to the auto-tuner's lists right then (Algorithm 1's
update_demand_delay), and `view.finished` is not needed.

Preemption (§IV-B1, §VI-3). Nw_sens is also the preemption priority: the
highest value is preempted first, the way Tiresias preempts the highest
2D-LAS value. The paper gives no more detail, so the rule is: when a waiting
job gets no offer it accepts, running jobs with a higher Nw_sens (by more
than `preempt_margin` of the waiting job's, none by default, and than float
noise, `SENS_EPS`) are preempted, highest first (Nw_sens within
`rank_resolution` rank as equal, the job id first), until the job
fits at the most consolidated tier it can use (failing that, the next
looser tier its agent accepts now); victims not needed for that fit are
then spared. A job whose offer is accepted never preempts: Dally-noWait
preempts only when nothing fits at all. A job started in this call is never
a victim, nor is a running job that has completed nothing (Nw_sens 0).

Variants (§V-C) are `timers`: "auto" (Dally), "manual" (Dally-manual, fixed
12 h / 24 h), "no-wait" (Dally-noWait, both timers 0), "fully-consolidated"
(Dally-fullyConsolidated, waits forever for the tightest tier the gang can
use). Preemption is the same in all of them, as in the paper.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from actors.policies.cluster import perf_model
from actors.policies.cluster.api import ClusterView, Decision, JobView, Slot, Start, Tier
from actors.policies.cluster.dally.timers import (
    FOREVER_US,
    DallyParams,
    DallyState,
    Timers,
    WaitSample,
    agent_accepts,
    loosest_accepted,
    note_of,
    record_wait,
    tuned_timer_us,
)
from actors.policies.cluster.placement import TIERS, best_tier, give_back, place, take
from actors.policies.cluster.ties import near_tie_ranks
from emulator.units import US_PER_S

__all__ = ["Dally", "DallyParams", "nw_sens"]

# Two jobs that ran alike differ in Nw_sens by float noise (0.897...4 vs 0.897...5);
# "higher" must mean higher by more than that, or equals preempt each other.
SENS_EPS = 1e-9


def nw_sens(job: JobView) -> float:
    """W_compl / T_norm for one job (see the module docstring for the mapping)."""
    if job.progress <= 0.0 or job.executed_us <= 0:
        return 0.0
    ideal_run_us = job.duration_us / (
        1.0 + perf_model.comm_fraction(job.model, "machine", job.gpus)
    )
    t_norm = job.executed_us / ideal_run_us
    return job.progress / t_norm


def _target_tier(gpus: int, machines: Sequence[Slot]) -> Tier:
    """The tightest tier a gang of `gpus` can ever use on these machines."""
    if gpus <= max((s.gpus_total for s in machines), default=0):
        return "machine"
    per_rack: dict[str, int] = {}
    for s in machines:
        per_rack[s.rack] = per_rack.get(s.rack, 0) + s.gpus_total
    return "rack" if gpus <= max(per_rack.values(), default=0) else "network"


def _timers(gpus: int, target: Tier, state: DallyState, now_us: int, p: DallyParams) -> Timers:
    """The job's timers now: by variant, then zeroed for tiers the gang cannot use."""
    if p.timers == "no-wait":
        machine_us = rack_us = 0.0
    elif p.timers == "fully-consolidated":
        machine_us = rack_us = FOREVER_US
    elif p.timers == "manual":
        machine_us, rack_us = p.machine_timer_s * US_PER_S, p.rack_timer_s * US_PER_S
    else:
        window_us = int(p.history_window_s * US_PER_S)
        machine_us = tuned_timer_us(
            state, "machine", gpus, now_us, window_us, p.machine_timer_s * US_PER_S
        )
        rack_us = tuned_timer_us(state, "rack", gpus, now_us, window_us, p.rack_timer_s * US_PER_S)
    # Algorithm 1's note: a gang too big for one machine (rack) has nothing to wait for there.
    if target != "machine":
        machine_us = 0.0
    if target == "network":
        rack_us = 0.0
    return Timers(machine_us=machine_us, rack_us=rack_us)


def _offer(free: Sequence[Slot], job: JobView, timers: Timers, starved_us: int) -> Start | None:
    """The most consolidated placement free now, if the job's agent would take it."""
    got = best_tier(free, job.gpus)
    if got is None:
        return None
    offer = Start(job_id=job.job_id, placement=got[1], tier=got[0], note=note_of(timers))
    return offer if agent_accepts(offer.tier, offer.note, starved_us) else None


def _victims(
    free: Sequence[Slot], gpus: int, tier: Tier, candidates: Sequence[JobView]
) -> list[JobView] | None:
    """The running jobs to preempt so a gang of `gpus` fits at `tier`, or None.

    Candidates are taken in the given order (highest Nw_sens first) until the
    gang fits; then each one, the latest taken first, is spared if the gang
    still fits without it.
    """
    pool = tuple(free)
    chosen: list[JobView] = []
    for victim in candidates:
        pool = give_back(pool, victim.placement)
        chosen.append(victim)
        if place(pool, gpus, tier) is not None:
            break
    else:
        return None
    for victim in reversed(list(chosen)):
        rest = [c for c in chosen if c is not victim]
        pool = tuple(free)
        for c in rest:
            pool = give_back(pool, c.placement)
        if place(pool, gpus, tier) is not None:
            chosen = rest
    return chosen


class Dally:
    """Policy `dally`: see the module docstring."""

    name: ClassVar[str] = "dally"
    Params: ClassVar[type[DallyParams]] = DallyParams

    def initial_state(self, params: DallyParams) -> DallyState:
        del params
        return DallyState()

    def accepts(self, offer: Start, job: JobView, now_us: int, params: Any) -> bool:
        """Algorithm 1, from the timers the offer carries."""
        del params
        return agent_accepts(offer.tier, offer.note, now_us - job.queued_since_us)

    def decide(
        self, view: ClusterView, state: DallyState | None, params: DallyParams
    ) -> tuple[Decision, DallyState]:
        state = state if state is not None else DallyState()
        now = view.now_us
        sens = {j.job_id: nw_sens(j) for j in view.jobs}
        # Two gangs of one model on like placements have one Nw_sens, but the
        # arithmetic leaves one a few ulps above the other, and which one depends
        # on when their progress was read; within `SENS_EPS` (or the wider
        # `rank_resolution`) they rank as one and the job id decides.
        rank = near_tie_ranks(sens, max(SENS_EPS, params.rank_resolution))
        running = sorted(
            (j for j in view.jobs if j.running), key=lambda j: (-rank[j.job_id], j.job_id)
        )
        waiting = sorted(
            (j for j in view.jobs if not j.running),
            key=lambda j: (rank[j.job_id], j.queued_since_us, j.submit_us, j.job_id),
        )
        free: tuple[Slot, ...] = view.machines
        preempt: list[str] = []
        starts: list[Start] = []
        wakes: list[int] = []
        window_us = int(params.history_window_s * US_PER_S)
        # Jobs of one GPU demand share their target tier and timers until a start
        # records a wait: computing them once per demand keeps a decision over
        # hundreds of waiting jobs linear instead of re-reading the history per job.
        targets: dict[int, Tier] = {}
        timers_of: dict[int, Timers] = {}
        # Waiting jobs of one Nw_sens (every fresh job: 0) share the runners above
        # them until a preemption changes who runs.
        higher_than: dict[float, list[JobView]] = {}
        for job in waiting:
            target = targets.get(job.gpus)
            if target is None:
                target = targets[job.gpus] = _target_tier(job.gpus, view.machines)
            timers = timers_of.get(job.gpus)
            if timers is None:
                timers = timers_of[job.gpus] = _timers(job.gpus, target, state, now, params)
            starved = now - job.queued_since_us
            offer = _offer(free, job, timers, starved)
            if offer is None and params.preemption:
                loosest = loosest_accepted(timers, starved)
                mine = sens[job.job_id]
                higher = higher_than.get(mine)
                if higher is None:
                    higher = higher_than[mine] = [
                        r
                        for r in running
                        if sens[r.job_id] - mine > max(SENS_EPS, params.preempt_margin * mine)
                    ]
                for tier in TIERS[TIERS.index(target) : TIERS.index(loosest) + 1]:
                    victims = _victims(free, job.gpus, tier, higher)
                    if victims is not None:
                        for v in victims:
                            free = give_back(free, v.placement)
                            preempt.append(v.job_id)
                        running = [r for r in running if r not in victims]
                        higher_than.clear()
                        offer = _offer(free, job, timers, starved)
                        break
            if offer is None:
                # Ask again when the job's next timer runs out: it will then take looser offers.
                for timer in (timers.machine_us, timers.rack_us):
                    if starved < timer < FOREVER_US:
                        wakes.append(job.queued_since_us + math.ceil(timer))
                        break
                continue
            free = take(free, offer.placement)
            starts.append(offer)
            if offer.tier != "network":
                sample = WaitSample(tier=offer.tier, gpus=job.gpus, at_us=now, wait_us=starved)
                state = record_wait(state, sample, window_us, params.history_count_max)
                timers_of.pop(job.gpus, None)
        decision = Decision(
            preempt=tuple(preempt), start=tuple(starts), wake_at_us=min(wakes, default=None)
        )
        return decision, state
