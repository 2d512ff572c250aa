"""The placement index: indexed placement equals the brute-force reference, exactly.

`actors.policies.mast.placement.place` decides over per-snapshot indices
(`actors.policies.mast.placement.capacity`); `placement_reference` is its first,
brute-force version. On random clusters — several GPU types, partly used
and unhealthy machines, racks mixing GPU and CPU machines, ties in priority
and start time — both must give equal plans, scores, victims and
Unschedulable reasons, and the index derived for the next job of a workload
(`ClusterIndex.apply`) must equal the index of the snapshot `apply_plan`
gives.
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.policies.mast.placement import place as placement
from actors.policies.mast.placement.capacity import ClusterIndex, index_of
from actors.policies.mast.placement.racks import RackPool
from actors.policies.mast.placement.snapshot import (
    ClusterSnapshot,
    JobPlan,
    JobRequest,
    MachineState,
    RunningJob,
    WorkloadPlan,
)
from emulator.units import H
from store.mast.records import GPUS_PER_MACHINE
from tests.support import placement_reference as reference
from tests.support.examples import examples
from tests.support.placement_index import index_state

NOW_US = 1_000 * H
GPU_TYPES = ("A100", "A100", "H100", "V100")


@st.composite
def clusters(draw, cluster_id: str = "c1") -> ClusterSnapshot:
    """1-6 racks x 1-8 machines; used GPUs and CPU machines split among 0-8 running jobs."""
    machines: list[MachineState] = []
    holdings: dict[int, dict[str, int]] = defaultdict(dict)
    cpu_holdings: dict[int, list[str]] = defaultdict(list)
    n_jobs = draw(st.integers(0, 8))
    for rack in range(draw(st.integers(1, 6))):
        # A rack of one kind mostly, as in the world presets; sometimes mixed.
        kind = draw(st.sampled_from(("gpu", "gpu", "cpu", "mixed")))
        rack_type = draw(st.sampled_from(GPU_TYPES))
        for slot in range(draw(st.integers(1, 8))):
            host = f"{cluster_id}/r{rack}/m{slot}"
            healthy = draw(st.integers(0, 9)) > 0
            is_cpu = kind == "cpu" or (kind == "mixed" and draw(st.booleans()))
            if is_cpu:
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
                        healthy=healthy,
                    )
                )
                continue
            used = draw(st.integers(0, GPUS_PER_MACHINE)) if n_jobs else 0
            left = used
            while left:
                n = draw(st.integers(1, left))
                job = draw(st.integers(0, n_jobs - 1))
                holdings[job][host] = holdings[job].get(host, 0) + n
                left -= n
            gpu_type = rack_type if kind == "gpu" else draw(st.sampled_from(GPU_TYPES))
            machines.append(
                MachineState(
                    host=host,
                    rack=f"r{rack}",
                    gpu_type=gpu_type,
                    gpus_total=GPUS_PER_MACHINE,
                    gpus_free=GPUS_PER_MACHINE - used,
                    cpu_free=False,
                    healthy=healthy,
                )
            )
    running = [
        RunningJob(
            workload_id=f"{cluster_id}-w{j}",
            job=draw(st.sampled_from(("a", "b"))),
            priority=draw(st.integers(0, 7)),
            # few distinct start times: ties go to the id
            started_at_us=draw(st.sampled_from((0, NOW_US // 2, NOW_US - H, NOW_US))),
            gpus=tuple(sorted(holdings[j].items())),
            cpu_hosts=tuple(cpu_holdings[j]),
        )
        for j in range(n_jobs)
    ]
    order = draw(st.permutations(range(len(machines))))
    return ClusterSnapshot(
        cluster_id=cluster_id,
        machines=tuple(machines[i] for i in order),
        running=tuple(draw(st.permutations(running))),
    )


requests = st.builds(
    lambda gpus, cpus, gpu_type, priority, job: JobRequest(
        workload_id="new",
        job=job,
        gpu_type=gpu_type if gpus else None,
        gpus=gpus,
        cpu_machines=cpus,
        priority=priority,
    ),
    gpus=st.sampled_from((0, 0, 1, 2, 3, 4, 7, 8, 12, 16, 24, 32, 48, 64)),
    cpus=st.sampled_from((0, 0, 0, 1, 2, 3, 5, 8)),
    gpu_type=st.sampled_from(GPU_TYPES),
    priority=st.integers(0, 7),
    job=st.sampled_from(("a", "b", "c")),
)


def _same(a: object, b: object) -> None:
    assert a == b
    if isinstance(a, JobPlan | WorkloadPlan):
        assert a.score == b.score  # type: ignore[union-attr]


@settings(max_examples=examples(100), deadline=None)
@given(clusters(), requests, st.booleans())
def test_place_job_equals_the_reference(cluster, req, allow) -> None:
    _same(
        placement.place_job(cluster, req, NOW_US, allow_preemption=allow),
        reference.place_job(cluster, req, NOW_US, allow_preemption=allow),
    )
    assert placement.choose_victims(cluster, req) == reference.choose_victims(cluster, req)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=0, max_size=4, unique=True).flatmap(
        lambda ids: st.tuples(*(clusters(f"c{i}") for i in ids))
    ),
    st.lists(requests, min_size=1, max_size=4),
    st.booleans(),
)
def test_place_workload_equals_the_reference(cluster_list, jobs, allow) -> None:
    # The jobs of a workload share its effective priority.
    jobs = [
        JobRequest(
            workload_id="new",
            job=f"job{k}",
            gpu_type=j.gpu_type,
            gpus=j.gpus,
            cpu_machines=j.cpu_machines,
            priority=jobs[0].priority,
        )
        for k, j in enumerate(jobs)
    ]
    _same(
        placement.place_workload(cluster_list, jobs, NOW_US, allow_preemption=allow),
        reference.place_workload(cluster_list, jobs, NOW_US, allow_preemption=allow),
    )


@settings(max_examples=examples(75), deadline=None)
@given(clusters(), st.lists(requests, min_size=1, max_size=3))
def test_apply_equals_the_index_of_the_applied_snapshot(cluster, jobs) -> None:
    derived = index_of(cluster)
    for k, req in enumerate(jobs):
        req = JobRequest(
            workload_id="new",
            job=f"job{k}",
            gpu_type=req.gpu_type,
            gpus=req.gpus,
            cpu_machines=req.cpu_machines,
            priority=req.priority,
        )
        plan = reference.place_job(cluster, req, NOW_US)
        if not isinstance(plan, JobPlan):
            continue
        cluster = reference.apply_plan(cluster, req, plan, NOW_US)
        derived = derived.apply(req, plan, NOW_US)
        assert index_state(derived) == index_state(ClusterIndex.build(cluster))


@settings(max_examples=examples(100), deadline=None)
@given(
    st.dictionaries(st.sampled_from([f"h{i}" for i in range(12)]), st.integers(0, 8)),
    st.dictionaries(st.sampled_from([f"h{i}" for i in range(12)]), st.integers(0, 8)),
    st.integers(1, 40),
)
def test_rack_pool_changes_equal_a_rebuild(before, changes, need) -> None:
    rack_of = {f"h{i}": f"r{i % 4}" for i in range(12)}
    changed = RackPool.build(before.items(), rack_of).with_units(changes, rack_of)
    rebuilt = RackPool.build({**before, **changes}.items(), rack_of)
    assert (changed.slots, changed.room, changed.order, changed.total) == (
        rebuilt.slots,
        rebuilt.room,
        rebuilt.order,
        rebuilt.total,
    )
    if need <= rebuilt.total:
        assert changed.pick(changed.choose(need)) == rebuilt.pick(rebuilt.choose(need))
        units = dict(rebuilt.pick(rebuilt.choose(need)))
        assert sum(units.values()) == need


def test_the_index_is_built_once_per_snapshot() -> None:
    machine = MachineState(
        host="h", rack="r", gpu_type="A100", gpus_total=8, gpus_free=8, cpu_free=False
    )
    snap = ClusterSnapshot(cluster_id="c", machines=(machine,))
    assert index_of(snap) is index_of(snap)
    # not a field: equality, hashing and encoding ignore it
    assert snap == ClusterSnapshot(cluster_id="c", machines=(machine,))
    assert "index" not in ClusterSnapshot.__struct_fields__


# Rack choice, worked out by hand. CPU pool (one unit per machine): r1 has 3
# free machines, r2 and r3 have 5 each.
CPU_UNITS = {**{f"a{i}": 1 for i in range(3)}, **{f"b{i}": 1 for i in range(5)}}
CPU_UNITS.update({f"c{i}": 1 for i in range(5)})
CPU_RACKS = {h: {"a": "r1", "b": "r2", "c": "r3"}[h[0]] for h in CPU_UNITS}
# GPU pool: r1 = 8 + 8 (room 16), r2 = 4 + 4 + 4 + 4 (room 16), r3 = 8 + 2 (room 10).
GPU_UNITS = {"g1": 8, "g2": 8, "h1": 4, "h2": 4, "h3": 4, "h4": 4, "k1": 8, "k2": 2}
GPU_RACKS = {h: {"g": "r1", "h": "r2", "k": "r3"}[h[0]] for h in GPU_UNITS}


def test_rack_choice_cases() -> None:
    cpu = RackPool.build(CPU_UNITS.items(), CPU_RACKS)
    gpu = RackPool.build(GPU_UNITS.items(), GPU_RACKS)
    assert cpu.unit and not gpu.unit
    # 4 CPU machines: r2 and r3 fit (room 5 >= 4), r1 does not; same count (4),
    # same room (5): the smaller id, r2.
    assert cpu.choose(4) == ([], "r2", 4)
    # 3: all three fit with 3 machines; the tightest room is r1's 3.
    assert cpu.choose(3) == ([], "r1", 3)
    # 12: no rack fits; the roomiest whole (r2: 5, tie with r3 by id), then r3
    # (5); 2 left fit in r1.
    assert cpu.choose(12) == (["r2", "r3"], "r1", 2)
    # 10 GPUs: r1 needs 2 machines (8 + 8), r2 3 (4 + 4 + 4), r3 2 (8 + 2):
    # fewest machines -> r1 or r3, then the least room: r3 (10 < 16).
    assert gpu.choose(10) == ([], "r3", 10)
    # ... and r3's last machine is the smallest that takes the rest: 8, then 2.
    assert sorted(gpu.pick(gpu.choose(10))) == [("k1", 8), ("k2", 2)]
    # 12 GPUs: r1 (2 machines) beats r2 (3); r3 cannot hold 12.
    assert gpu.choose(12) == ([], "r1", 12)
    assert sorted(gpu.pick(gpu.choose(12))) == [("g1", 8), ("g2", 4)]
    # 20: roomiest whole first (r1, 16: tie with r2 by id), 4 left: r2 takes
    # them on one machine (4), r3 too (8) — same count; r3's room 10 < 16.
    assert gpu.choose(20) == (["r1"], "r3", 4)
    assert gpu.choose(0) == ([], None, 0)
