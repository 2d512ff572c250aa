"""Gang placement and the priority-ordered scheduling pass of Tiresias, shared with the baselines.

Placement (Tiresias §3.3.2): a job whose model skew S_J exceeds PACKLIMIT
is consolidated on as few machines as the cluster allows, or waits; any
other job takes free GPUs wherever they fit, tightest holes first so big
holes stay whole for big jobs. YARN-CS's strict consolidation (Tiresias §1:
a 16-GPU job on 4-GPU servers waits until four servers are free) is the
first rule applied to every job.

The pass (Tiresias Pseudocode 2, lines 9–18, made placement-aware): jobs
are visited in priority order; a running job keeps its GPUs; a waiting job
starts if it can be placed on the free GPUs, else — when preemption is
allowed — on GPUs freed by preempting running jobs *later* in the order,
lowest priority first, and only if that makes it fit. A job that cannot
fit even so waits without preempting anyone, and later jobs may still
start (no head-of-line blocking); `stop_at_blocked` restores YARN-CS's
blocking.

Two conventions of the Tiresias simulator change this, when the view says
so (`[system.semantics]`): with `placement = "count"` every job takes any
free GPUs (its `--scheme count` only counts them, so nothing is
consolidated); and `reallocate_pass` is its pass for ranking policies
(`equal_rank = "reallocate"`): every GPU is taken back and handed out again
in priority order, by count, so a running job loses its GPUs to any job
ahead of it, an equal-rank one submitted earlier included.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from actors.policies.cluster.api import ClusterView, JobView, Slot, Start
from actors.policies.cluster.placement import TIERS, Placement, best_tier, give_back, place, take
from actors.policies.cluster.placement import tier_of as _tier_of

__all__ = [
    "Pass",
    "Placer",
    "anywhere",
    "by_count",
    "consolidated",
    "min_machines",
    "pack_placer",
    "reallocate_pass",
    "run_pass",
]

Placer = Callable[[Sequence[Slot], JobView], Placement | None]


class Pass(msgspec.Struct, frozen=True, kw_only=True):
    """What one ordered pass decided: preemptions (in the order made) and offers."""

    preempt: tuple[str, ...] = ()
    start: tuple[Start, ...] = ()


def min_machines(machines: Sequence[Slot], gpus: int) -> int:
    """The fewest machines that could ever hold `gpus` GPUs: the largest ones, all free."""
    held = 0
    for n, total in enumerate(sorted((s.gpus_total for s in machines), reverse=True), start=1):
        held += total
        if held >= gpus:
            return n
    return len(machines) + 1  # larger than the cluster: never placeable


def consolidated(machines: Sequence[Slot], gpus: int) -> Placement | None:
    """GPUs on the fewest machines possible (one rack preferred), or None: the job must wait."""
    fewest = min_machines(machines, gpus)
    for tier in TIERS:
        # place() takes the machines with most free GPUs first, so it reaches
        # the smallest machine count available now; more than `fewest` is a refusal.
        got = place(machines, gpus, tier)
        if got is not None and len(got) <= fewest:
            return got
    return None


def anywhere(machines: Sequence[Slot], gpus: int) -> Placement | None:
    """Any free GPUs, at the most consolidated tier available, tightest fit first."""
    got = best_tier(machines, gpus)
    return None if got is None else got[1]


def pack_placer(skew_of: Callable[[str], float], pack_limit: float) -> Placer:
    """Tiresias's rule: consolidate iff the model's skew > `pack_limit`, else any free GPUs."""

    def placer(machines: Sequence[Slot], job: JobView) -> Placement | None:
        if skew_of(job.model) > pack_limit:
            return consolidated(machines, job.gpus)
        return anywhere(machines, job.gpus)

    return placer


def by_count(machines: Sequence[Slot], job: JobView) -> Placement | None:
    """`placement = "count"`: any free GPUs, whatever the job's model or the policy's rule."""
    return anywhere(machines, job.gpus)


def _fits(machines: Sequence[Slot], placement: Placement) -> tuple[Slot, ...] | None:
    try:
        return take(machines, placement)
    except ValueError:
        return None


def _make_room(
    free: tuple[Slot, ...], job: JobView, placer: Placer, victims: Sequence[JobView]
) -> tuple[Placement, list[JobView]] | None:
    """Preempt `victims` in the order given until `job` fits; keep those it does not need."""
    trial = free
    chosen: list[JobView] = []
    got: Placement | None = None
    for victim in victims:
        trial = give_back(trial, victim.placement)
        chosen.append(victim)
        got = placer(trial, job)
        if got is not None:
            break
    if got is None:
        return None
    after = take(trial, got)
    needed = []
    # Highest priority first: a victim whose GPUs the new job left alone keeps running.
    for victim in reversed(chosen):
        kept = _fits(after, victim.placement)
        if kept is None:
            needed.append(victim)
        else:
            after = kept
    return got, needed


def run_pass(
    view: ClusterView,
    order: Sequence[JobView],
    placer: Placer,
    *,
    may_preempt: bool,
    stop_at_blocked: bool = False,
    victim_ok: Callable[[JobView, JobView], bool] | None = None,
) -> Pass:
    """Visit `order` (highest priority first) and decide preemptions and starts (see module doc).

    `victim_ok(job, running)` narrows which lower-priority running jobs a
    waiting job may preempt (None: any).
    """
    if view.placement == "count":
        placer = by_count
    rack_of = {s.host: s.rack for s in view.machines}
    free = tuple(view.machines)
    preempted: dict[str, None] = {}
    starts: list[Start] = []
    for i, job in enumerate(order):
        if job.running:
            continue
        got = placer(free, job)
        if got is None and may_preempt:
            later = reversed(order[i + 1 :])
            victims = [
                r
                for r in later
                if r.running
                and r.job_id not in preempted
                and (victim_ok is None or victim_ok(job, r))
            ]
            room = _make_room(free, job, placer, victims)
            if room is not None:
                got, needed = room
                for victim in needed:
                    preempted[victim.job_id] = None
                    free = give_back(free, victim.placement)
        if got is None:
            if stop_at_blocked:
                break
            continue
        free = take(free, got)
        starts.append(Start(job_id=job.job_id, placement=got, tier=_tier_of(got, rack_of)))
    return Pass(preempt=tuple(preempted), start=tuple(starts))


def reallocate_pass(view: ClusterView, order: Sequence[JobView], placer: Placer) -> Pass:
    """Hand every GPU out again in `order`, by count (the Tiresias simulator's pass).

    Each job in turn keeps (running) or gets (waiting) its gang if that many
    GPUs are still unclaimed; a running job that does not fit is preempted,
    even by an equal-rank job ahead of it. Who runs is decided by count;
    then kept jobs stay where they are and starters are placed, in order, on
    the GPUs free after the preemptions (`placer`, or any free GPUs with
    `placement = "count"`). A starter its placer cannot place waits.
    """
    if view.placement == "count":
        placer = by_count
    everyone = tuple(view.machines)
    for job in order:
        if job.running:
            everyone = give_back(everyone, job.placement)
    left = sum(s.gpus_free for s in everyone)
    preempt: list[str] = []
    starting: list[JobView] = []
    for job in order:
        if job.gpus <= left:
            left -= job.gpus
            if not job.running:
                starting.append(job)
        elif job.running:
            preempt.append(job.job_id)
    free = tuple(view.machines)
    running = {j.job_id: j for j in order if j.running}
    for job_id in preempt:
        free = give_back(free, running[job_id].placement)
    rack_of = {s.host: s.rack for s in view.machines}
    starts: list[Start] = []
    for job in starting:
        got = placer(free, job)
        if got is None:
            continue
        free = take(free, got)
        starts.append(Start(job_id=job.job_id, placement=got, tier=_tier_of(got, rack_of)))
    return Pass(preempt=tuple(preempt), start=tuple(starts))
