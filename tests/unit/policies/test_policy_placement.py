"""Placement on free resources: rack batching, fewest racks, fewest machines, hardware checks."""

from __future__ import annotations

import pytest

from actors.policies.mast.placement.place import place_job
from actors.policies.mast.placement.snapshot import (
    ClusterSnapshot,
    JobPlan,
    JobRequest,
    MachineState,
    RunningJob,
    Unschedulable,
)

NOW_US = 10 * 3_600 * 1_000_000


def gpu(host: str, rack: str, free: int, gpu_type: str = "A100", healthy: bool = True):
    return MachineState(
        host=host,
        rack=rack,
        gpu_type=gpu_type,
        gpus_total=8,
        gpus_free=free,
        cpu_free=False,
        healthy=healthy,
    )


def cpu(host: str, rack: str, free: bool = True) -> MachineState:
    return MachineState(
        host=host, rack=rack, gpu_type=None, gpus_total=0, gpus_free=0, cpu_free=free
    )


def req(gpus: int = 0, cpus: int = 0, gpu_type: str | None = "A100", priority: int = 3):
    return JobRequest(
        workload_id="w",
        job="trainer",
        gpu_type=gpu_type if gpus else None,
        gpus=gpus,
        cpu_machines=cpus,
        priority=priority,
    )


def place(machines, request: JobRequest, running=()) -> JobPlan | Unschedulable:
    cluster = ClusterSnapshot(cluster_id="c1", machines=tuple(machines), running=tuple(running))
    return place_job(cluster, request, NOW_US)


CASES = [
    # (name, machines, gpus, expected (host, n) pairs, racks)
    # r1 and r2 can each hold 16 with 2 machines; tie on machines -> the tighter rack r1
    # (room 16 < 24), keeping r2's 24 whole for a bigger job.
    (
        "best-fitting rack",
        [gpu("a1", "r1", 8), gpu("a2", "r1", 8), *(gpu(f"b{i}", "r2", 8) for i in range(3))],
        16,
        [("a1", 8), ("a2", 8)],
        1,
    ),
    # r1 needs 4 machines (4+4+4+4), r2 needs 2 (8+8): fewest machines -> r2.
    (
        "fewest machines",
        [*(gpu(f"a{i}", "r1", 4) for i in range(4)), gpu("b1", "r2", 8), gpu("b2", "r2", 8)],
        16,
        [("b1", 8), ("b2", 8)],
        1,
    ),
    # need 10 in r1 {8, 8, 2}: take a1 (8 < 10 left), then the smallest machine that takes
    # the last 2 -> a3 (2), not a second 8-free machine.
    (
        "last machine is the best fit",
        [gpu("a1", "r1", 8), gpu("a2", "r1", 8), gpu("a3", "r1", 2)],
        10,
        [("a1", 8), ("a3", 2)],
        1,
    ),
    # no rack holds 20 (r1 8, r2 16, r3 12): take the widest, r2 (16), 4 left; r1 and r3 each
    # finish with one machine -> the tighter r1 (room 8 < 12). 2 racks, 3 machines.
    (
        "fewest racks",
        [
            gpu("a1", "r1", 8),
            gpu("b1", "r2", 8),
            gpu("b2", "r2", 8),
            gpu("c1", "r3", 8),
            gpu("c2", "r3", 4),
        ],
        20,
        [("a1", 4), ("b1", 8), ("b2", 8)],
        2,
    ),
    # need 30: r2 (16) whole, 14 left fits no rack -> r3 (12) whole, 2 left -> r1.
    (
        "three racks",
        [
            gpu("a1", "r1", 8),
            gpu("b1", "r2", 8),
            gpu("b2", "r2", 8),
            gpu("c1", "r3", 8),
            gpu("c2", "r3", 4),
        ],
        30,
        [("a1", 2), ("b1", 8), ("b2", 8), ("c1", 8), ("c2", 4)],
        3,
    ),
    # a job may share a machine: 3 of a1's 5 free GPUs.
    ("part of a machine", [gpu("a1", "r1", 5)], 3, [("a1", 3)], 1),
    # other GPU types and unhealthy machines are invisible: only a3 qualifies.
    (
        "type and health filter",
        [gpu("a1", "r1", 8, "V100"), gpu("a2", "r1", 8, healthy=False), gpu("a3", "r2", 4)],
        4,
        [("a3", 4)],
        1,
    ),
    # machines with nothing free are skipped, even when they come first by name.
    ("full machines skipped", [gpu("a0", "r1", 0), gpu("a1", "r1", 2)], 2, [("a1", 2)], 1),
]


@pytest.mark.parametrize(
    ("machines", "gpus", "expected", "racks"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_free_gpu_placement(machines, gpus, expected, racks) -> None:
    plan = place(machines, req(gpus))
    assert isinstance(plan, JobPlan)
    assert list(plan.gpus) == expected
    assert plan.victims == ()
    assert plan.score.racks == racks
    assert not plan.score.preempts


def test_cpu_job_takes_whole_free_machines_rack_batched() -> None:
    machines = [cpu("c1", "r1"), cpu("c2", "r1", free=False), cpu("c3", "r1"), cpu("c4", "r2")]
    machines += [cpu("c5", "r2"), cpu("c6", "r3")]
    # 2 machines: r1 {c1, c3} and r2 {c4, c5} both fit with 2 machines and room 2 -> r1 by id.
    plan = place(machines, req(cpus=2))
    assert isinstance(plan, JobPlan)
    assert plan.cpu_hosts == ("c1", "c3")
    assert plan.score.racks == 1
    # 3 machines: no rack has 3 free; widest r1 (2, tie with r2 -> id) whole, then 1 more:
    # r2 and r3 both fit with 1 machine; r3 is tighter (room 1 < 2) -> c6.
    plan = place(machines, req(cpus=3))
    assert isinstance(plan, JobPlan)
    assert plan.cpu_hosts == ("c1", "c3", "c6")
    assert plan.score.racks == 2


def test_gpu_machines_are_never_used_as_cpu_machines() -> None:
    out = place([gpu("g1", "r1", 8), cpu("c1", "r1")], req(cpus=2))
    assert isinstance(out, Unschedulable)
    assert not out.preemption_could_help  # one healthy CPU machine exists, 2 are needed


def test_mixed_job_counts_racks_of_both_parts() -> None:
    # 8 A100 on g1 (r1) + 1 CPU machine: r1 has none free, r2 has c2 -> 2 racks.
    machines = [gpu("g1", "r1", 8), cpu("c1", "r1", free=False), cpu("c2", "r2")]
    plan = place(machines, req(gpus=8, cpus=1))
    assert isinstance(plan, JobPlan)
    assert (plan.gpus, plan.cpu_hosts, plan.score.racks) == ((("g1", 8),), ("c2",), 2)


def test_empty_request_is_an_empty_plan() -> None:
    plan = place([gpu("a1", "r1", 0)], req())
    assert isinstance(plan, JobPlan)
    assert (plan.gpus, plan.cpu_hosts, plan.score.racks) == ((), (), 0)


MISSING = [
    # (name, machines, running, gpus, preemption_could_help)
    # only 8 healthy A100 GPUs exist (a2 is sick), 16 are needed: hopeless here.
    (
        "not enough hardware",
        [gpu("a1", "r1", 8), gpu("a2", "r1", 8, healthy=False)],
        [],
        16,
        False,
    ),
    # no A100 at all.
    ("wrong hardware type", [gpu("v1", "r1", 8, "V100")], [], 1, False),
    # 8 A100 exist but a priority-0 job holds 6 of them: busy, waiting could help.
    (
        "hardware busy with higher priority",
        [gpu("a1", "r1", 2)],
        [RunningJob(workload_id="vip", job="t", priority=0, started_at_us=0, gpus=(("a1", 6),))],
        4,
        True,
    ),
]


@pytest.mark.parametrize(
    ("machines", "running", "gpus", "could_help"),
    [c[1:] for c in MISSING],
    ids=[c[0] for c in MISSING],
)
def test_unschedulable_says_whether_preemption_could_help(
    machines, running, gpus, could_help
) -> None:
    out = place(machines, req(gpus), running)
    assert isinstance(out, Unschedulable)
    assert out.preemption_could_help is could_help


def test_invalid_requests_are_rejected() -> None:
    with pytest.raises(ValueError, match="gpu_type"):
        JobRequest(workload_id="w", job="j", gpu_type=None, gpus=8, cpu_machines=0, priority=1)
    with pytest.raises(ValueError, match="priority"):
        JobRequest(workload_id="w", job="j", gpu_type="A100", gpus=8, cpu_machines=0, priority=8)
    with pytest.raises(ValueError, match="gpus_free"):
        gpu("a1", "r1", 9)
    with pytest.raises(TypeError):  # keyword-only, so a field can never be misplaced
        MachineState("a1", "r1", "A100", 8, 8, False)  # type: ignore[misc]
