"""The GMS quota scan: within/over quota, running usage, ⟨priority, credit⟩ order."""

from __future__ import annotations

from actors.policies.mast.quota import PendingWorkload, Ranked, TenantQuota, quota_scan
from store.mast.records import PRIORITY_LOWEST

TENANTS = {
    "ads": TenantQuota(name="ads", priority=1, gpu_quota=16, cpu_quota=4),
    "feed": TenantQuota(name="feed", priority=3, gpu_quota=8, cpu_quota=2),
}


def wl(id: str, tenant: str, credit: float, gpus: int = 0, cpus: int = 0) -> PendingWorkload:
    return PendingWorkload(id=id, tenant=tenant, credit=credit, gpus=gpus, cpu_machines=cpus)


def by_id(ranked: list[Ranked]) -> dict[str, tuple[int, bool]]:
    return {r.id: (r.priority, r.within_quota) for r in ranked}


def test_second_workload_overflowing_gpu_quota_gets_lowest_priority() -> None:
    # Credit order a1 (50), a2 (40), a3 (30); ads quota 16 GPUs, nothing running.
    # a1: 0 + 8 = 8 <= 16 -> priority 1, used 8
    # a2: 8 + 16 = 24 > 16 -> over quota, priority 7, used stays 8
    # a3: 8 + 8 = 16 <= 16 -> priority 1 (a smaller later workload still fits)
    ranked = quota_scan(
        [wl("a2", "ads", 40, gpus=16), wl("a1", "ads", 50, gpus=8), wl("a3", "ads", 30, gpus=8)],
        TENANTS,
        {},
    )
    assert by_id(ranked) == {"a1": (1, True), "a2": (PRIORITY_LOWEST, False), "a3": (1, True)}
    # dispatch order: (1, 50) a1, (1, 30) a3, then (7, 40) a2
    assert [r.id for r in ranked] == ["a1", "a3", "a2"]


def test_running_usage_counts_against_the_quota() -> None:
    # ads already runs 12 GPUs: 12 + 8 = 20 > 16 -> over; 12 + 4 = 16 -> within.
    ranked = quota_scan(
        [wl("big", "ads", 9, gpus=8), wl("small", "ads", 1, gpus=4)], TENANTS, {"ads": (12, 0)}
    )
    assert by_id(ranked) == {"big": (PRIORITY_LOWEST, False), "small": (1, True)}


def test_cpu_quota_alone_can_push_a_workload_over() -> None:
    # feed runs 2 CPU machines of its 2: a CPU-only request of 1 -> 3 > 2 -> over,
    # although its GPUs (0 + 0 <= 8) fit.
    ranked = quota_scan([wl("f1", "feed", 5, cpus=1)], TENANTS, {"feed": (0, 2)})
    assert by_id(ranked) == {"f1": (PRIORITY_LOWEST, False)}


def test_gpus_and_cpus_must_both_fit() -> None:
    # feed: 8 GPUs + 2 CPU machines exactly = quota -> within; then 0 GPUs + 1 CPU -> 3 > 2.
    ranked = quota_scan(
        [wl("f1", "feed", 5, gpus=8, cpus=2), wl("f2", "feed", 4, cpus=1)], TENANTS, {}
    )
    assert by_id(ranked) == {"f1": (3, True), "f2": (PRIORITY_LOWEST, False)}


def test_higher_credit_gets_the_quota_first() -> None:
    # Two 16-GPU workloads, room for one: the higher credit (70) wins it.
    ranked = quota_scan([wl("x", "ads", 10, gpus=16), wl("y", "ads", 70, gpus=16)], TENANTS, {})
    assert by_id(ranked) == {"y": (1, True), "x": (PRIORITY_LOWEST, False)}


def test_unknown_tenant_is_lowest() -> None:
    ranked = quota_scan([wl("u", "nobody", 1e9, gpus=1)], TENANTS, {})
    assert by_id(ranked) == {"u": (PRIORITY_LOWEST, False)}


def test_dispatch_order_is_priority_then_credit_then_id() -> None:
    # feed (priority 3) has far more credit than ads (priority 1) but dispatches after it;
    # equal ⟨priority, credit⟩ falls back to id.
    ranked = quota_scan(
        [
            wl("f-rich", "feed", 1_000, gpus=1),
            wl("a-b", "ads", 5, gpus=1),
            wl("a-a", "ads", 5, gpus=1),
            wl("a-poor", "ads", 1, gpus=1),
        ],
        TENANTS,
        {},
    )
    assert [(r.id, r.priority, r.credit) for r in ranked] == [
        ("a-a", 1, 5),
        ("a-b", 1, 5),
        ("a-poor", 1, 1),
        ("f-rich", 3, 1_000),
    ]


def test_over_quota_workloads_of_high_priority_tenants_sink_below_everyone() -> None:
    # ads is at quota (16 running): its workload drops to 7, below feed's priority-3 one.
    ranked = quota_scan(
        [wl("a", "ads", 100, gpus=1), wl("f", "feed", 1, gpus=1)], TENANTS, {"ads": (16, 0)}
    )
    assert [(r.id, r.priority) for r in ranked] == [("f", 3), ("a", PRIORITY_LOWEST)]
