"""Workload placement: exhaustive search over clusters, gang all-or-nothing, no double booking."""

from __future__ import annotations

import msgspec
import pytest

from actors.policies.mast.placement.place import apply_plan, place_workload
from actors.policies.mast.placement.snapshot import (
    ClusterSnapshot,
    JobRequest,
    MachineState,
    RunningJob,
    Unschedulable,
    WorkloadPlan,
)
from emulator.units import H

NOW_US = 100 * H


def gpu(host: str, rack: str, free: int = 8, gpu_type: str = "A100") -> MachineState:
    return MachineState(
        host=host, rack=rack, gpu_type=gpu_type, gpus_total=8, gpus_free=free, cpu_free=False
    )


def cpu(host: str, rack: str, free: bool = True) -> MachineState:
    return MachineState(
        host=host, rack=rack, gpu_type=None, gpus_total=0, gpus_free=0, cpu_free=free
    )


def trainer(gpus: int, job: str = "trainer", priority: int = 2) -> JobRequest:
    return JobRequest(
        workload_id="w", job=job, gpu_type="A100", gpus=gpus, cpu_machines=0, priority=priority
    )


def preprocess(cpus: int, priority: int = 2) -> JobRequest:
    return JobRequest(
        workload_id="w", job="pre", gpu_type=None, gpus=0, cpu_machines=cpus, priority=priority
    )


def running(wid: str, priority: int, started_h: float, *gpus, cpus=()) -> RunningJob:
    return RunningJob(
        workload_id=wid,
        job="j",
        priority=priority,
        started_at_us=int(started_h * H),
        gpus=tuple(gpus),
        cpu_hosts=tuple(cpus),
    )


GPU_CLUSTER = ClusterSnapshot(
    cluster_id="c-gpu", machines=(gpu("g1", "r1"), gpu("g2", "r1"), gpu("g3", "r2"))
)
CPU_CLUSTER = ClusterSnapshot(
    cluster_id="c-cpu", machines=tuple(cpu(f"c{i}", "r7") for i in range(4))
)


def test_gang_of_trainer_and_preprocess_lands_in_two_clusters() -> None:
    plan = place_workload([GPU_CLUSTER, CPU_CLUSTER], [trainer(16), preprocess(3)], NOW_US)
    assert isinstance(plan, WorkloadPlan)
    trainer_plan, pre_plan = plan.jobs
    assert (trainer_plan.cluster_id, trainer_plan.gpus) == ("c-gpu", (("g1", 8), ("g2", 8)))
    assert (pre_plan.cluster_id, pre_plan.cpu_hosts) == ("c-cpu", ("c0", "c1", "c2"))
    # both free, one rack each: (1e13 - 1) + (1e13 - 1)
    assert plan.score == 2e13 - 2
    assert not plan.preempts and plan.victims == ()


@pytest.mark.parametrize(
    ("jobs", "could_help", "job_named"),
    [
        # 5 CPU machines wanted, 4 exist anywhere: no preemption can help.
        ([trainer(16), preprocess(5)], False, "pre"),
        # 32 A100 wanted, 24 exist.
        ([trainer(32), preprocess(1)], False, "trainer"),
    ],
    ids=["cpu job too big", "gpu job too big"],
)
def test_gang_is_all_or_nothing(jobs, could_help: bool, job_named: str) -> None:
    out = place_workload([GPU_CLUSTER, CPU_CLUSTER], jobs, NOW_US)
    assert isinstance(out, Unschedulable)
    assert out.preemption_could_help is could_help
    assert out.reason.startswith(f"job {job_named}:")


def test_busy_hardware_is_unschedulable_but_could_help() -> None:
    # every CPU machine is held by a priority-1 job; the priority-2 preprocess cannot preempt it.
    busy = ClusterSnapshot(
        cluster_id="c-cpu",
        machines=tuple(cpu(f"c{i}", "r7", free=False) for i in range(4)),
        running=(running("etl", 1, 0, cpus=("c0", "c1", "c2", "c3")),),
    )
    out = place_workload([GPU_CLUSTER, busy], [trainer(8), preprocess(1)], NOW_US)
    assert isinstance(out, Unschedulable)
    assert out.preemption_could_help


def test_jobs_of_one_workload_never_double_book() -> None:
    # 24 free GPUs: three 8-GPU trainers take the three machines, a fourth does not fit.
    jobs = [trainer(8, job=f"t{i}") for i in range(3)]
    plan = place_workload([GPU_CLUSTER], jobs, NOW_US)
    assert isinstance(plan, WorkloadPlan)
    hosts = [h for p in plan.jobs for h, _ in p.gpus]
    assert sorted(hosts) == ["g1", "g2", "g3"]
    out = place_workload([GPU_CLUSTER], [*jobs, trainer(8, job="t3")], NOW_US)
    assert isinstance(out, Unschedulable)
    assert out.preemption_could_help  # the GPUs exist, the workload's own jobs hold them


def test_a_later_job_uses_what_an_earlier_job_freed_and_waits_for_it_too() -> None:
    # All 16 GPUs busy with one 16-GPU priority-6 job. Job a (8) must preempt it; that frees
    # 16, so job b (8) fits in the other 8 without choosing a victim of its own. Its CM
    # must still wait for `old` to stop before starting b: b names it as well.
    cluster = ClusterSnapshot(
        cluster_id="c1",
        machines=(gpu("g1", "r1", free=0), gpu("g2", "r1", free=0)),
        running=(running("old", 6, 1, ("g1", 8), ("g2", 8)),),
    )
    plan = place_workload([cluster], [trainer(8, job="a"), trainer(8, job="b")], NOW_US)
    assert isinstance(plan, WorkloadPlan)
    a, b = plan.jobs
    assert a.victims == b.victims == (("old", "j"),)
    assert b.score.victims == 0  # the preemption is priced once, in a's score
    assert {a.gpus, b.gpus} == {(("g1", 8),), (("g2", 8),)}
    assert plan.victims == (("old", "j"),)


@pytest.mark.parametrize(
    ("old_on", "b_on", "b_victims"),
    [
        # old holds all three machines: a (16) preempts it, b (8) takes old's third.
        (("g1", "g2", "g3"), ("g3",), (("old", "j"),)),
        # old holds two: a preempts it and takes both, b takes the free g3, waiting for nobody.
        (("g1", "g2"), ("g3",), ()),
    ],
)
def test_a_later_job_names_an_earlier_victim_only_on_its_machines(
    old_on: tuple[str, ...], b_on: tuple[str, ...], b_victims: tuple[tuple[str, str], ...]
) -> None:
    cluster = ClusterSnapshot(
        cluster_id="c1",
        machines=tuple(gpu(h, "r1", free=0 if h in old_on else 8) for h in ("g1", "g2", "g3")),
        running=(running("old", 6, 1, *((h, 8) for h in old_on)),),
    )
    plan = place_workload([cluster], [trainer(16, job="a"), trainer(8, job="b")], NOW_US)
    assert isinstance(plan, WorkloadPlan)
    a, b = plan.jobs
    assert a.victims == (("old", "j"),)
    assert tuple(h for h, _ in b.gpus) == b_on and b.victims == b_victims


def test_best_cluster_wins_each_job() -> None:
    # c-a has room only by preempting a priority-6 job; c-b by preempting a priority-7 job;
    # c-c has free GPUs but over two racks. Free beats preemption: c-c.
    def full(cid: str, victim_priority: int) -> ClusterSnapshot:
        return ClusterSnapshot(
            cluster_id=cid,
            machines=(gpu(f"{cid}-1", "r1", free=0), gpu(f"{cid}-2", "r1", free=0)),
            running=(running(f"v-{cid}", victim_priority, 1, (f"{cid}-1", 8), (f"{cid}-2", 8)),),
        )

    spread = ClusterSnapshot(
        cluster_id="c-c", machines=(gpu("c-c-1", "r1", free=4), gpu("c-c-2", "r2", free=4))
    )
    plan = place_workload([full("c-a", 6), full("c-b", 7), spread], [trainer(8)], NOW_US)
    assert isinstance(plan, WorkloadPlan) and plan.jobs[0].cluster_id == "c-c"
    # without c-c: the lower-priority victim (7) wins -> c-b
    plan = place_workload([full("c-a", 6), full("c-b", 7)], [trainer(8)], NOW_US)
    assert isinstance(plan, WorkloadPlan)
    assert (plan.jobs[0].cluster_id, plan.victims) == ("c-b", (("v-c-b", "j"),))


def test_longer_running_victim_and_tie_break_by_cluster_id() -> None:
    def full(cid: str, started_h: float) -> ClusterSnapshot:
        return ClusterSnapshot(
            cluster_id=cid,
            machines=(gpu(f"{cid}-1", "r1", free=0),),
            running=(running(f"v-{cid}", 6, started_h, (f"{cid}-1", 8)),),
        )

    # victim in c-y ran 99 h, in c-x 1 h: c-y.
    plan = place_workload([full("c-x", 99), full("c-y", 1)], [trainer(8)], NOW_US)
    assert isinstance(plan, WorkloadPlan) and plan.jobs[0].cluster_id == "c-y"
    # identical scores: the smallest cluster id, whatever the input order.
    plan = place_workload([full("c-y", 1), full("c-x", 1)], [trainer(8)], NOW_US)
    assert isinstance(plan, WorkloadPlan) and plan.jobs[0].cluster_id == "c-x"


def test_apply_plan_frees_victims_and_books_the_job() -> None:
    cluster = ClusterSnapshot(
        cluster_id="c1",
        machines=(gpu("g1", "r1", free=2), cpu("c1", "r1", free=False)),
        running=(running("old", 6, 1, ("g1", 6), cpus=("c1",)),),
    )
    plan = place_workload([cluster], [trainer(4)], NOW_US)
    assert isinstance(plan, WorkloadPlan)
    after = apply_plan(cluster, trainer(4), plan.jobs[0], NOW_US)
    g1, c1 = after.machines
    # 2 free + 6 freed - 4 taken = 4 free; the victim's CPU machine is free again
    assert (g1.gpus_free, c1.cpu_free) == (4, True)
    assert [(r.workload_id, r.gpus) for r in after.running] == [("w", (("g1", 4),))]


def test_workload_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        place_workload([GPU_CLUSTER], [], NOW_US)
    other = JobRequest(
        workload_id="other", job="t", gpu_type="A100", gpus=1, cpu_machines=0, priority=2
    )
    with pytest.raises(ValueError):
        place_workload([GPU_CLUSTER], [trainer(1), other], NOW_US)
    # a higher-priority sibling could name the other, placed a moment ago, as its victim
    with pytest.raises(ValueError, match="differ in priority"):
        place_workload([GPU_CLUSTER], [trainer(1, "a", 1), trainer(8, "b", 0)], NOW_US)


def test_no_cluster_at_all() -> None:
    out = place_workload([], [trainer(1)], NOW_US)
    assert isinstance(out, Unschedulable) and not out.preemption_could_help


def test_when_the_given_order_fails_the_largest_job_is_placed_first() -> None:
    # Two CPU clusters with 28 and 12 free machines; a workload of 11 + 27.
    # In the given order the 11 take the 28-machine cluster (its P_score is the
    # best) and the 27 then fit nowhere; largest first, the 27 take it and the
    # 11 fit in the other. The plans come in the order placed.
    big = ClusterSnapshot(cluster_id="c-big", machines=tuple(cpu(f"b{i}", "r1") for i in range(28)))
    small = ClusterSnapshot(
        cluster_id="c-small", machines=tuple(cpu(f"s{i:02}", "r2") for i in range(12))
    )
    jobs = [
        JobRequest(workload_id="w", job="a", gpu_type=None, gpus=0, cpu_machines=11, priority=2),
        JobRequest(workload_id="w", job="b", gpu_type=None, gpus=0, cpu_machines=27, priority=2),
    ]
    alone = place_workload([big, small], jobs[:1], NOW_US)
    assert isinstance(alone, WorkloadPlan) and alone.jobs[0].cluster_id == "c-big"
    plan = place_workload([big, small], jobs, NOW_US)
    assert isinstance(plan, WorkloadPlan)
    assert [(p.job, p.cluster_id, len(p.cpu_hosts)) for p in plan.jobs] == [
        ("b", "c-big", 27),
        ("a", "c-small", 11),
    ]
    # Neither order can place 11 + 30 in 28 + 12: the given order's answer stands.
    jobs[1] = msgspec.structs.replace(jobs[1], cpu_machines=30)
    assert isinstance(place_workload([big, small], jobs, NOW_US), Unschedulable)
