"""Properties of placement over random clusters: capacity, priority, coverage, minimality."""

from __future__ import annotations

from collections import defaultdict

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.policies.mast.placement.place import (
    apply_plan,
    choose_victims,
    place_job,
    place_workload,
)
from actors.policies.mast.placement.snapshot import (
    ClusterSnapshot,
    JobPlan,
    JobRequest,
    MachineState,
    RunningJob,
    Unschedulable,
    WorkloadPlan,
)
from store.mast.records import GPUS_PER_MACHINE
from tests.support.examples import examples

NOW_US = 1_000 * 3_600 * 1_000_000


@st.composite
def clusters(draw, cluster_id: str = "c1") -> ClusterSnapshot:
    """2-4 racks x 2-5 machines, mostly A100; used GPUs split among 1-6 running jobs."""
    machines: list[MachineState] = []
    holdings: dict[int, list[tuple[str, int]]] = defaultdict(list)
    cpu_holdings: dict[int, list[str]] = defaultdict(list)
    n_jobs = draw(st.integers(1, 6))
    for rack in range(draw(st.integers(2, 4))):
        for slot in range(draw(st.integers(2, 5))):
            host = f"{cluster_id}-r{rack}m{slot}"
            if draw(st.integers(0, 4)) == 0:  # a CPU machine
                taken = n_jobs > 0 and draw(st.booleans())
                if taken:
                    cpu_holdings[draw(st.integers(0, n_jobs - 1))].append(host)
                machines.append(
                    MachineState(
                        host=host,
                        rack=f"r{rack}",
                        gpu_type=None,
                        gpus_total=0,
                        gpus_free=0,
                        cpu_free=not taken,
                        healthy=draw(st.integers(0, 9)) > 0,
                    )
                )
                continue
            used = draw(st.integers(0, GPUS_PER_MACHINE)) if n_jobs else 0
            left = used
            while left:
                n = draw(st.integers(1, left))
                holdings[draw(st.integers(0, n_jobs - 1))].append((host, n))
                left -= n
            machines.append(
                MachineState(
                    host=host,
                    rack=f"r{rack}",
                    gpu_type=draw(st.sampled_from(("A100", "A100", "A100", "V100"))),
                    gpus_total=GPUS_PER_MACHINE,
                    gpus_free=GPUS_PER_MACHINE - used,
                    cpu_free=False,
                    healthy=draw(st.integers(0, 9)) > 0,
                )
            )
    running = []
    for j in range(n_jobs):
        merged: dict[str, int] = defaultdict(int)
        for host, n in holdings[j]:
            merged[host] += n
        running.append(
            RunningJob(
                workload_id=f"{cluster_id}-w{j}",
                job="j",
                priority=draw(st.integers(0, 7)),
                started_at_us=draw(st.integers(0, NOW_US)),
                gpus=tuple(sorted(merged.items())),
                cpu_hosts=tuple(cpu_holdings[j]),
            )
        )
    return ClusterSnapshot(cluster_id=cluster_id, machines=tuple(machines), running=tuple(running))


requests = st.builds(
    lambda gpus, cpus, gpu_type, priority, job: JobRequest(
        workload_id="new",
        job=job,
        gpu_type=gpu_type if gpus else None,
        gpus=gpus,
        cpu_machines=cpus,
        priority=priority,
    ),
    gpus=st.integers(0, 32),
    cpus=st.sampled_from((0, 0, 0, 1, 2)),
    gpu_type=st.sampled_from(("A100", "A100", "V100")),
    priority=st.integers(0, 7),
    job=st.sampled_from(("a", "b", "c")),
)


def usable(cluster: ClusterSnapshot, req: JobRequest) -> dict[str, MachineState]:
    return {
        m.host: m
        for m in cluster.machines
        if m.healthy and (m.gpu_type == req.gpu_type if m.is_gpu else True)
    }


def check_plan(cluster: ClusterSnapshot, req: JobRequest, plan: JobPlan) -> None:
    ok = usable(cluster, req)
    victims = {v: j for j in cluster.running if (v := j.key) in set(plan.victims)}
    assert len(victims) == len(plan.victims)
    # never equal or higher priority
    assert all(j.priority > req.priority for j in victims.values())
    freed: dict[str, int] = defaultdict(int)
    freed_cpu: set[str] = set()
    for j in victims.values():
        for host, n in j.gpus:
            freed[host] += n
        freed_cpu.update(j.cpu_hosts)
    # exactly the request, each machine within free + freed, on usable machines only
    assert plan.gpu_count == req.gpus and len(plan.cpu_hosts) == req.cpu_machines
    for host, n in plan.gpus:
        m = ok[host]
        assert m.is_gpu and 0 < n <= min(m.gpus_total, m.gpus_free + freed[host])
    for host in plan.cpu_hosts:
        assert not ok[host].is_gpu and (ok[host].cpu_free or host in freed_cpu)
    assert len(set(plan.cpu_hosts)) == len(plan.cpu_hosts)
    assert len({h for h, _ in plan.gpus}) == len(plan.gpus)
    if plan.victims:
        # free first: free resources alone would not have done
        free_gpus = sum(m.gpus_free for m in ok.values() if m.is_gpu)
        free_cpus = sum(1 for m in ok.values() if not m.is_gpu and m.cpu_free)
        assert free_gpus < req.gpus or free_cpus < req.cpu_machines
        # free + freed cover the request, and (GPU-only requests) no victim is superfluous:
        # dropping any one of them leaves too little
        gpu_freed = {k: sum(n for h, n in j.gpus if h in ok) for k, j in victims.items()}
        if req.cpu_machines <= free_cpus:
            assert free_gpus + sum(gpu_freed.values()) >= req.gpus
            assert free_gpus + sum(gpu_freed.values()) - min(gpu_freed.values()) < req.gpus


@settings(max_examples=examples(75), deadline=None)
@given(clusters(), requests)
def test_place_job_plans_are_sound(cluster: ClusterSnapshot, req: JobRequest) -> None:
    out = place_job(cluster, req, NOW_US)
    if isinstance(out, JobPlan):
        check_plan(cluster, req, out)
        after = apply_plan(cluster, req, out, NOW_US)
        assert all(0 <= m.gpus_free <= m.gpus_total for m in after.machines)
        return
    assert isinstance(out, Unschedulable)
    ok = usable(cluster, req)
    hw_gpus = sum(m.gpus_total for m in ok.values() if m.is_gpu)
    hw_cpus = sum(1 for m in ok.values() if not m.is_gpu)
    enough_hardware = hw_gpus >= req.gpus and hw_cpus >= req.cpu_machines
    assert out.preemption_could_help is enough_hardware
    if enough_hardware:
        # preempting every lower-priority job would still not do
        assert choose_victims(cluster, req) is None


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(clusters(), min_size=1, max_size=3), st.lists(requests, min_size=1, max_size=3))
def test_workload_plans_never_double_book(cluster_list, jobs) -> None:
    cluster_list = [
        ClusterSnapshot(
            cluster_id=f"c{i}",
            machines=tuple(
                MachineState(**{**_fields(m), "host": f"c{i}/{m.host}"}) for m in c.machines
            ),
            running=tuple(
                RunningJob(
                    **{
                        **_fields(r),
                        "gpus": tuple((f"c{i}/{h}", n) for h, n in r.gpus),
                        "cpu_hosts": tuple(f"c{i}/{h}" for h in r.cpu_hosts),
                    }
                )
                for r in c.running
            ),
        )
        for i, c in enumerate(cluster_list)
    ]
    # a workload's jobs share its priority
    jobs = [
        JobRequest(**{**_fields(j), "job": f"job{k}", "priority": jobs[0].priority})
        for k, j in enumerate(jobs)
    ]
    out = place_workload(cluster_list, jobs, NOW_US)
    if isinstance(out, Unschedulable):
        return
    assert isinstance(out, WorkloadPlan)
    # every job planned once; the plans come in the order they were placed
    by_name = {j.job: j for j in jobs}
    assert sorted(p.job for p in out.jobs) == sorted(by_name)
    # replay the plans on working copies: each one must be sound where it was made
    work = {c.cluster_id: c for c in cluster_list}
    original = {(c.cluster_id, j.key): j for c in cluster_list for j in c.running}
    preempted: set[tuple[str, tuple[str, str]]] = set()
    for plan in out.jobs:
        req = by_name[plan.job]
        # A victim an earlier job already preempted is named again only by a job on
        # one of its machines (its CM waits for it); the working copy has it gone.
        hosts = {h for h, _ in plan.gpus} | set(plan.cpu_hosts)
        inherited = {v for v in plan.victims if (plan.cluster_id, v) in preempted}
        for v in inherited:
            victim = original[(plan.cluster_id, v)]
            assert hosts & ({h for h, _ in victim.gpus} | set(victim.cpu_hosts))
        own = msgspec.structs.replace(
            plan, victims=tuple(v for v in plan.victims if v not in inherited)
        )
        check_plan(work[plan.cluster_id], req, own)
        work[plan.cluster_id] = apply_plan(work[plan.cluster_id], req, own, NOW_US)
        preempted |= {(plan.cluster_id, v) for v in plan.victims}
    assert out.score == sum(p.score.value for p in out.jobs)
    assert out.victims == tuple(sorted(set(out.victims)))


def _fields(s) -> dict:
    return {f: getattr(s, f) for f in s.__struct_fields__}
