"""The brute-force reference of `actors.policies.mast.placement.place` (its first version).

The indexed placement must give exactly these plans and scores; see
`test_policy_index.py`. Original docstring:

RMS placement (MAST §4.3): one job in one dynamic cluster, then a workload across clusters.

Free resources first. A GPU job may use healthy machines of its GPU type with
free GPUs, any number of whole GPUs per machine (a job may share a machine);
a CPU job takes whole free healthy CPU machines. The machines are grouped by
rack and chosen in this exact order (`_pick`):

1. If some rack alone can hold the job, use one rack: the one needing the
   fewest machines, then the one with the least free capacity (best fit,
   keeping roomier racks whole for bigger jobs), then the smallest rack id.
2. Otherwise take whole racks, largest free capacity first (ties: rack id),
   until what is left fits in one rack, then finish with step 1. Taking the
   largest racks first touches the fewest racks possible.

Inside a rack the machines with the most free GPUs go first (ties: host), so
the job uses the fewest machines; the last machine is the smallest one that
can take the rest, so a nearly-free machine is not split when a small gap
will do. Locality (racks) comes first and machine count second because the
tasks of one job talk to each other most, and racks bound that traffic.

Preemption, when free resources fall short (`choose_victims`): running jobs
of strictly lower priority (numerically greater) are scanned lowest priority
first, then longest running first, accumulating what each would free on
usable machines until free + freed covers the request; the accumulated
victims are then re-sorted largest first and only the shortest prefix that
still covers the request is kept. Jobs that would free nothing useful (other
GPU type, unhealthy machines) are skipped. The concrete assignment is then
made by the same `_pick` over free + freed capacity.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import msgspec

from actors.policies.mast.placement.pscore import PScore
from actors.policies.mast.placement.snapshot import (
    ClusterSnapshot,
    JobPlan,
    JobRequest,
    RunningJob,
    Unschedulable,
    WorkloadPlan,
)
from emulator.units import US_PER_S
from store.mast.records import GPUS_PER_MACHINE

REASONS_SHOWN_MAX = 3

Slot = tuple[str, int]  # (host, units usable): GPUs, or 1 for a whole CPU machine


def place_job(
    cluster: ClusterSnapshot, req: JobRequest, now_us: int, *, allow_preemption: bool = True
) -> JobPlan | Unschedulable:
    """The best plan for one job in one cluster: free resources, else preemption."""
    gpu_hosts, cpu_hosts = _usable_hosts(cluster, req)
    gpu_pool = {m.host: m.gpus_free for m in cluster.machines if m.host in gpu_hosts}
    cpu_pool = {m.host for m in cluster.machines if m.host in cpu_hosts and m.cpu_free}
    if sum(gpu_pool.values()) >= req.gpus and len(cpu_pool) >= req.cpu_machines:
        return _plan(cluster, req, gpu_pool, cpu_pool, (), now_us)
    gpus_hw = sum(m.gpus_total for m in cluster.machines if m.host in gpu_hosts)
    if gpus_hw < req.gpus or len(cpu_hosts) < req.cpu_machines:
        return Unschedulable(
            reason=f"needs {req.gpus} {req.gpu_type} GPUs + {req.cpu_machines} CPU machines, "
            f"has {gpus_hw} + {len(cpu_hosts)} healthy",
            preemption_could_help=False,
        )
    if not allow_preemption:
        return Unschedulable(reason="not enough free resources", preemption_could_help=True)
    victims = choose_victims(cluster, req)
    if victims is None:
        return Unschedulable(
            reason=f"not enough even preempting every job below priority {req.priority}",
            preemption_could_help=True,
        )
    for job in victims:
        for host, n in job.gpus:
            if host in gpu_hosts:
                gpu_pool[host] = min(gpu_pool[host] + n, gpu_hosts[host])
        cpu_pool.update(h for h in job.cpu_hosts if h in cpu_hosts)
    return _plan(cluster, req, gpu_pool, cpu_pool, victims, now_us)


def choose_victims(cluster: ClusterSnapshot, req: JobRequest) -> tuple[RunningJob, ...] | None:
    """The jobs to preempt so `req` fits (see the module docstring); None if none suffice.

    Returns () when free resources already suffice. The result is in the
    re-sorted order (largest contribution first).
    """
    gpu_hosts, cpu_hosts = _usable_hosts(cluster, req)
    free_gpus = sum(m.gpus_free for m in cluster.machines if m.host in gpu_hosts)
    free_cpus = sum(1 for m in cluster.machines if m.host in cpu_hosts and m.cpu_free)
    short_gpus, short_cpus = req.gpus - free_gpus, req.cpu_machines - free_cpus
    if short_gpus <= 0 and short_cpus <= 0:
        return ()
    candidates = sorted(
        (j for j in cluster.running if j.priority > req.priority),
        key=lambda j: (-j.priority, j.started_at_us, j.workload_id, j.job),
    )
    found: list[tuple[RunningJob, int, int]] = []
    missing_gpus, missing_cpus = short_gpus, short_cpus
    for job in candidates:
        if missing_gpus <= 0 and missing_cpus <= 0:
            break
        gpus = sum(n for h, n in job.gpus if h in gpu_hosts) if short_gpus > 0 else 0
        cpus = sum(1 for h in job.cpu_hosts if h in cpu_hosts) if short_cpus > 0 else 0
        if (missing_gpus > 0 and gpus) or (missing_cpus > 0 and cpus):
            found.append((job, gpus, cpus))
            missing_gpus, missing_cpus = missing_gpus - gpus, missing_cpus - cpus
    if missing_gpus > 0 or missing_cpus > 0:
        return None
    # Largest first; the sort is stable, so equal sizes keep the scan's preference.
    found.sort(key=lambda t: -(t[1] + GPUS_PER_MACHINE * t[2]))
    kept: list[RunningJob] = []
    for job, gpus, cpus in found:
        kept.append(job)
        short_gpus, short_cpus = short_gpus - gpus, short_cpus - cpus
        if short_gpus <= 0 and short_cpus <= 0:
            break
    return tuple(kept)


def place_workload(
    clusters: Sequence[ClusterSnapshot],
    jobs: Sequence[JobRequest],
    now_us: int,
    *,
    allow_preemption: bool = True,
) -> WorkloadPlan | Unschedulable:
    """The given order, then (if that fails) largest first; plans in the order placed."""
    first = _in_order(clusters, jobs, now_us, allow_preemption=allow_preemption)
    if isinstance(first, WorkloadPlan):
        return first
    again = sorted(jobs, key=lambda j: (-j.gpus, -j.cpu_machines))
    if again == list(jobs):
        return first
    second = _in_order(clusters, again, now_us, allow_preemption=allow_preemption)
    return first if isinstance(second, Unschedulable) else second


def _in_order(
    clusters: Sequence[ClusterSnapshot],
    jobs: Sequence[JobRequest],
    now_us: int,
    *,
    allow_preemption: bool = True,
) -> WorkloadPlan | Unschedulable:
    """Gang placement: every job in its best cluster, or Unschedulable for the whole workload.

    Jobs are placed in the given order; each tries every cluster and takes the
    highest `value` (ties: smallest cluster id). The chosen plan is applied to
    a working copy of its cluster (`apply_plan`) before the next job is
    placed, so the jobs of one workload never count the same GPU twice. The
    workload's score is the sum of its jobs' values.
    """
    if not jobs:
        raise ValueError("place_workload: a workload has at least one job")
    workload_id = jobs[0].workload_id
    if any(j.workload_id != workload_id for j in jobs):
        raise ValueError(f"place_workload: jobs of several workloads, expected {workload_id}")
    work = sorted(clusters, key=lambda c: c.cluster_id)
    plans: list[JobPlan] = []
    for req in jobs:
        best: tuple[int, JobPlan] | None = None
        could_help = False
        reasons: list[str] = []
        for index, cluster in enumerate(work):
            out = place_job(cluster, req, now_us, allow_preemption=allow_preemption)
            if isinstance(out, Unschedulable):
                could_help = could_help or out.preemption_could_help
                reasons.append(f"{cluster.cluster_id}: {out.reason}")
            elif best is None or out.score.value > best[1].score.value:
                best = (index, out)
        if best is None:
            shown = "; ".join(reasons[:REASONS_SHOWN_MAX]) or "no ML dynamic cluster"
            more = len(reasons) - REASONS_SHOWN_MAX
            suffix = f" (+{more} more clusters)" if more > 0 else ""
            return Unschedulable(
                reason=f"job {req.job}: {shown}{suffix}", preemption_could_help=could_help
            )
        index, plan = best
        work[index] = apply_plan(work[index], req, plan, now_us)
        plans.append(plan)
    return WorkloadPlan(
        workload_id=workload_id,
        jobs=_name_victims_used(plans, clusters),
        score=sum(p.score.value for p in plans),
    )


def _name_victims_used(
    plans: Sequence[JobPlan], clusters: Sequence[ClusterSnapshot]
) -> tuple[JobPlan, ...]:
    """Each plan also names every victim of an earlier plan of the workload that holds
    one of its machines (its CM must wait for that victim too)."""
    machines_of = {
        (c.cluster_id, j.key): {h for h, _ in j.gpus} | set(j.cpu_hosts)
        for c in clusters
        for j in c.running
    }
    out: list[JobPlan] = []
    for k, plan in enumerate(plans):
        mine = {h for h, _ in plan.gpus} | set(plan.cpu_hosts)
        victims = set(plan.victims)
        for earlier in plans[:k]:
            if earlier.cluster_id != plan.cluster_id:
                continue
            for v in earlier.victims:
                if machines_of[(plan.cluster_id, v)] & mine:
                    victims.add(v)
        out.append(msgspec.structs.replace(plan, victims=tuple(sorted(victims))))
    return tuple(out)


def apply_plan(
    cluster: ClusterSnapshot, req: JobRequest, plan: JobPlan, now_us: int
) -> ClusterSnapshot:
    """The cluster after `plan`: victims gone and their resources freed, the job running."""
    victims = set(plan.victims)
    released_gpus: dict[str, int] = defaultdict(int)
    released_cpus: set[str] = set()
    for job in cluster.running:
        if job.key in victims:
            for host, n in job.gpus:
                released_gpus[host] += n
            released_cpus.update(job.cpu_hosts)
    taken_gpus = dict(plan.gpus)
    taken_cpus = set(plan.cpu_hosts)
    touched = released_gpus.keys() | released_cpus | taken_gpus.keys() | taken_cpus
    machines = tuple(
        msgspec.structs.replace(
            m,
            gpus_free=min(m.gpus_total, m.gpus_free + released_gpus.get(m.host, 0))
            - taken_gpus.get(m.host, 0),
            cpu_free=(m.cpu_free or m.host in released_cpus) and m.host not in taken_cpus,
        )
        if m.host in touched
        else m
        for m in cluster.machines
    )
    running = tuple(j for j in cluster.running if j.key not in victims)
    if plan.gpus or plan.cpu_hosts:
        placed = RunningJob(
            workload_id=req.workload_id,
            job=req.job,
            priority=req.priority,
            started_at_us=now_us,
            gpus=plan.gpus,
            cpu_hosts=plan.cpu_hosts,
        )
        running = (*running, placed)
    return msgspec.structs.replace(cluster, machines=machines, running=running)


def _usable_hosts(cluster: ClusterSnapshot, req: JobRequest) -> tuple[dict[str, int], set[str]]:
    """Healthy machines `req` could ever use: GPU host -> GPUs in total, and CPU hosts."""
    gpu_hosts = {
        m.host: m.gpus_total
        for m in cluster.machines
        if m.healthy and m.is_gpu and req.gpus > 0 and m.gpu_type == req.gpu_type
    }
    cpu_hosts = {m.host for m in cluster.machines if m.healthy and not m.is_gpu}
    return gpu_hosts, cpu_hosts


def _plan(
    cluster: ClusterSnapshot,
    req: JobRequest,
    gpu_pool: Mapping[str, int],
    cpu_pool: set[str],
    victims: Sequence[RunningJob],
    now_us: int,
) -> JobPlan:
    rack_of = {m.host: m.rack for m in cluster.machines}
    gpus = _pick(gpu_pool, rack_of, req.gpus)
    cpus = _pick(dict.fromkeys(cpu_pool, 1), rack_of, req.cpu_machines)
    score = PScore(
        victims=len(victims),
        victim_priority=min((v.priority for v in victims), default=None),
        victim_run_s=sum(max(0, now_us - v.started_at_us) // US_PER_S for v in victims),
        racks=len({rack_of[h] for h, _ in gpus} | {rack_of[h] for h, _ in cpus}),
    )
    return JobPlan(
        cluster_id=cluster.cluster_id,
        job=req.job,
        gpus=tuple(sorted(gpus)),
        cpu_hosts=tuple(sorted(h for h, _ in cpus)),
        victims=tuple(sorted(v.key for v in victims)),
        score=score,
    )


def _pick(pool: Mapping[str, int], rack_of: Mapping[str, str], need: int) -> list[Slot]:
    """`need` units from `pool` (host -> free units), rack-batched; the caller ensures enough."""
    if need <= 0:
        return []
    racks: dict[str, list[Slot]] = defaultdict(list)
    for host, units in pool.items():
        if units > 0:
            racks[rack_of[host]].append((host, units))
    for slots in racks.values():
        slots.sort(key=lambda s: (-s[1], s[0]))
    room = {rack: sum(units for _, units in slots) for rack, slots in racks.items()}
    if sum(room.values()) < need:
        raise RuntimeError(f"placement bug: asked for {need} units, pool has {sum(room.values())}")
    chosen: list[Slot] = []
    while True:
        fitting = [rack for rack in room if room[rack] >= need]
        if fitting:
            best = min(fitting, key=lambda r: (len(_fill(racks[r], need)), room[r], r))
            return chosen + _fill(racks[best], need)
        widest = min(room, key=lambda r: (-room[r], r))
        chosen.extend(racks[widest])
        need -= room.pop(widest)


def _fill(slots: Sequence[Slot], need: int) -> list[Slot]:
    """Fewest machines of one rack for `need` units (slots sorted largest first)."""
    out: list[Slot] = []
    i = 0
    while slots[i][1] < need:  # even the roomiest machine left cannot finish the job
        out.append(slots[i])
        need -= slots[i][1]
        i += 1
    host, _ = min((s for s in slots[i:] if s[1] >= need), key=lambda s: (s[1], s[0]))
    out.append((host, need))
    return out
