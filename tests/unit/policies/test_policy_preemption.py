"""Victim choice (MAST §4.3): scan order, the 4/5/12 example and its variants, priority rules."""

from __future__ import annotations

import pytest

from actors.policies.mast.placement.place import choose_victims, place_job
from actors.policies.mast.placement.snapshot import (
    ClusterSnapshot,
    JobPlan,
    JobRequest,
    MachineState,
    RunningJob,
    Unschedulable,
)
from emulator.units import H

NOW_US = 100 * H


def gpu(host: str, rack: str, free: int = 0, gpu_type: str = "A100", healthy: bool = True):
    return MachineState(
        host=host,
        rack=rack,
        gpu_type=gpu_type,
        gpus_total=8,
        gpus_free=free,
        cpu_free=False,
        healthy=healthy,
    )


def job(wid: str, priority: int, started_h: float, *gpus: tuple[str, int], cpus=()) -> RunningJob:
    return RunningJob(
        workload_id=wid,
        job="j",
        priority=priority,
        started_at_us=int(started_h * H),
        gpus=tuple(gpus),
        cpu_hosts=tuple(cpus),
    )


def req(gpus: int, priority: int = 3, gpu_type: str = "A100") -> JobRequest:
    return JobRequest(
        workload_id="new", job="t", gpu_type=gpu_type, gpus=gpus, cpu_machines=0, priority=priority
    )


# The paper's example: every GPU busy; the scan (same priority 6, oldest first) meets
# j1 freeing 4, j2 freeing 5, j3 freeing 12. A priority-0 job fills the other GPUs.
PAPER = ClusterSnapshot(
    cluster_id="c1",
    machines=(gpu("m1", "r1"), gpu("m2", "r1"), gpu("m3", "r2"), gpu("m4", "r2")),
    running=(
        job("vip", 0, 0, ("m1", 4), ("m2", 3), ("m4", 4)),
        job("j1", 6, 1, ("m1", 4)),
        job("j2", 6, 2, ("m2", 5)),
        job("j3", 6, 3, ("m3", 8), ("m4", 4)),
    ),
)

PAPER_CASES = [
    # (name, gpus needed, victims)
    # scan: 4 (short 6), 5 (short 1), 12 (enough: 21 >= 10); re-sorted 12, 5, 4:
    # 12 >= 10 already -> only j3.
    ("needs 10: only the 12", 10, {"j3"}),
    # scan: 4 (short 5), 5 -> 9 >= 9, the scan stops before ever reaching j3; re-sorted 5, 4:
    # 5 < 9, 5 + 4 = 9 -> both. The re-sort only reorders what the scan accumulated, so
    # the 12 is NOT chosen although it alone would do.
    ("needs 9: scan stops at 4 + 5", 9, {"j1", "j2"}),
    # scan: 4, 5, 12 -> 21 >= 20; re-sorted 12 (short 8), +5 = 17 (short 3), +4 = 21 -> all.
    ("needs 20: all three", 20, {"j1", "j2", "j3"}),
    # scan: 4 (short 1), 5 -> enough; re-sorted 5 >= 5 -> only j2.
    ("needs 5: the 5 alone", 5, {"j2"}),
    # 4 >= 4 at once: only j1, the first of the scan.
    ("needs 4: the first one", 4, {"j1"}),
]


@pytest.mark.parametrize(
    ("gpus", "victims"), [c[1:] for c in PAPER_CASES], ids=[c[0] for c in PAPER_CASES]
)
def test_paper_victim_example(gpus: int, victims: set[str]) -> None:
    plan = place_job(PAPER, req(gpus), NOW_US)
    assert isinstance(plan, JobPlan)
    assert {w for w, _ in plan.victims} == victims
    assert plan.gpu_count == gpus
    assert plan.score.victims == len(victims)


def test_paper_example_assignment_uses_the_freed_machines() -> None:
    # j3 frees m3 (8) and m4 (4), both in r2: the 10 GPUs go to m3 8 + m4 2, one rack.
    plan = place_job(PAPER, req(10), NOW_US)
    assert isinstance(plan, JobPlan)
    assert plan.gpus == (("m3", 8), ("m4", 2))
    # victim j3 started at hour 3, now is hour 100: 97 h = 349,200 s of run time.
    assert (plan.score.victim_priority, plan.score.victim_run_s, plan.score.racks) == (
        6,
        349_200,
        1,
    )


def test_free_gpus_count_toward_the_request() -> None:
    # One extra machine with 1 free GPU: 10 needed, 9 short. Scan 4 (short 5), 5 -> enough;
    # re-sorted 5 (short 4), 4 -> both. 1 free + 4 + 5 = 10.
    cluster = ClusterSnapshot(
        cluster_id="c1", machines=(*PAPER.machines, gpu("m5", "r3", free=1)), running=PAPER.running
    )
    victims = choose_victims(cluster, req(10))
    assert victims is not None
    assert [v.workload_id for v in victims] == ["j2", "j1"]  # largest first


SCAN_CASES = [
    # (name, running, gpus needed, expected victim)
    # lowest priority first: the priority-7 job goes although it started later.
    (
        "lowest priority first",
        [job("p6-old", 6, 0, ("m1", 8)), job("p7-new", 7, 90, ("m2", 8))],
        8,
        "p7-new",
    ),
    # same priority: the longest running (started earliest) goes.
    (
        "longest running first",
        [job("young", 6, 99, ("m1", 8)), job("old", 6, 10, ("m2", 8))],
        8,
        "old",
    ),
    # a job of another GPU type frees nothing useful and is skipped.
    (
        "other GPU type skipped",
        [job("v100", 7, 0, ("v1", 8)), job("a100", 6, 5, ("m1", 8))],
        8,
        "a100",
    ),
    # GPUs on an unhealthy machine do not count.
    (
        "unhealthy machine skipped",
        [job("on-sick", 7, 0, ("sick", 8)), job("ok", 6, 5, ("m2", 8))],
        8,
        "ok",
    ),
]


@pytest.mark.parametrize(
    ("running", "gpus", "victim"), [c[1:] for c in SCAN_CASES], ids=[c[0] for c in SCAN_CASES]
)
def test_scan_order(running, gpus: int, victim: str) -> None:
    cluster = ClusterSnapshot(
        cluster_id="c1",
        machines=(
            gpu("m1", "r1"),
            gpu("m2", "r1"),
            gpu("v1", "r1", gpu_type="V100"),
            gpu("sick", "r1", healthy=False),
        ),
        running=tuple(running),
    )
    plan = place_job(cluster, req(gpus), NOW_US)
    assert isinstance(plan, JobPlan)
    assert plan.victims == ((victim, "j"),)


def test_equal_sizes_keep_the_scan_preference_after_the_resort() -> None:
    # Scan: p7 (4, short 6), p6-old (4, short 2), p6-big (8) -> 16 >= 10. Re-sorted by size:
    # p6-big 8, then the two 4s in scan order: p7 before p6-old. 8 + 4 = 12 >= 10 -> p6-big and
    # p7; p6-old (higher priority than p7, though first by name) is spared.
    cluster = ClusterSnapshot(
        cluster_id="c1",
        machines=(gpu("m1", "r1", free=4), gpu("m2", "r1", free=4), gpu("m3", "r1")),
        running=(
            job("p7", 7, 50, ("m1", 4)),
            job("p6-old", 6, 0, ("m2", 4)),
            job("p6-big", 6, 10, ("m3", 8)),
        ),
    )
    # 8 GPUs free on m1 + m2, so the request is 18: short 10.
    plan = place_job(cluster, req(18), NOW_US)
    assert isinstance(plan, JobPlan)
    assert plan.victims == (("p6-big", "j"), ("p7", "j"))


NEVER_CASES = [
    # (name, request priority, preemptible victims or None)
    # priority 6 = the victims' own level: equal priority is never preempted.
    ("equal priority", 6, None),
    # priority 7 (lowest / over quota) can preempt nobody.
    ("lowest priority", 7, None),
    # priority 5 could preempt j1..j3 (6) but never vip (0): 4 + 5 + 12 = 21 >= 20 -> ok.
    ("higher priority ok", 5, {"j1", "j2", "j3"}),
]


@pytest.mark.parametrize(
    ("priority", "victims"), [c[1:] for c in NEVER_CASES], ids=[c[0] for c in NEVER_CASES]
)
def test_no_preemption_of_equal_or_higher_priority(priority: int, victims) -> None:
    out = place_job(PAPER, req(20, priority=priority), NOW_US)
    if victims is None:
        assert isinstance(out, Unschedulable)
        assert out.preemption_could_help  # the GPUs exist; they are busy
    else:
        assert isinstance(out, JobPlan)
        assert {w for w, _ in out.victims} == victims


def test_higher_priority_victim_outside_reach_makes_it_unschedulable() -> None:
    # j3 raised to priority 5: a priority-5 request may take only j1 + j2 = 9 < 10.
    running = tuple(
        job("j3", 5, 3, ("m3", 8), ("m4", 4)) if r.workload_id == "j3" else r for r in PAPER.running
    )
    cluster = ClusterSnapshot(cluster_id="c1", machines=PAPER.machines, running=running)
    assert choose_victims(cluster, req(10, priority=5)) is None
    out = place_job(cluster, req(10, priority=5), NOW_US)
    assert isinstance(out, Unschedulable) and out.preemption_could_help


def test_preemption_can_be_turned_off() -> None:
    out = place_job(PAPER, req(10), NOW_US, allow_preemption=False)
    assert isinstance(out, Unschedulable)
    assert out.preemption_could_help


def test_free_resources_are_preferred_over_preemption() -> None:
    # 8 free GPUs on m5: a request of 8 preempts nobody, though j3 would also do.
    cluster = ClusterSnapshot(
        cluster_id="c1", machines=(*PAPER.machines, gpu("m5", "r3", free=8)), running=PAPER.running
    )
    plan = place_job(cluster, req(8), NOW_US)
    assert isinstance(plan, JobPlan)
    assert (plan.victims, plan.gpus) == ((), (("m5", 8),))
    assert choose_victims(cluster, req(8)) == ()


def test_cpu_victims_free_whole_machines() -> None:
    cpu_machines = tuple(
        MachineState(host=h, rack="r9", gpu_type=None, gpus_total=0, gpus_free=0, cpu_free=False)
        for h in ("c1", "c2", "c3")
    )
    cluster = ClusterSnapshot(
        cluster_id="c1",
        machines=cpu_machines,
        running=(job("etl-a", 6, 1, cpus=("c1",)), job("etl-b", 6, 2, cpus=("c2", "c3"))),
    )
    request = JobRequest(
        workload_id="new", job="pre", gpu_type=None, gpus=0, cpu_machines=2, priority=2
    )
    # scan: etl-a (1, short 1), etl-b (2) -> 3 >= 2; re-sorted etl-b (2) alone suffices.
    plan = place_job(cluster, request, NOW_US)
    assert isinstance(plan, JobPlan)
    assert (plan.victims, plan.cpu_hosts) == ((("etl-b", "j"),), ("c2", "c3"))
