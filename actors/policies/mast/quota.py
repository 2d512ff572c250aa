"""The GMS quota scan (MAST §4.2): effective priority of every pending workload.

Pending workloads are walked in credit order (highest first, ties by id).
Each tenant starts with what its running workloads hold; a workload whose
GPUs and CPU machines both still fit its tenant's quota (used + request <=
quota) is within quota: it gets the tenant's priority and its request is
added to the tenant's use. Any other workload is over quota: it gets
`PRIORITY_LOWEST` and adds nothing, so a later, smaller workload of the same
tenant can still fit. Workloads of a tenant the GMS does not know are over
quota.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from store.mast.records import PRIORITY_LOWEST


class _Quota(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the quota-scan Structs.

    Subclasses repeat `kw_only=True`: msgspec does not inherit it (it applies
    to the fields a class itself defines).
    """


class PendingWorkload(_Quota, kw_only=True):
    """A workload waiting in the global queue, with its credit and whole-workload request."""

    id: str
    tenant: str
    credit: float
    gpus: int
    cpu_machines: int


class TenantQuota(_Quota, kw_only=True):
    """A tenant's priority level and the GPUs and CPU machines it may hold at once."""

    name: str
    priority: int
    gpu_quota: int
    cpu_quota: int

    def __post_init__(self) -> None:
        where = f"tenants.{self.name}"
        if not 0 <= self.priority <= PRIORITY_LOWEST:
            raise ValueError(f"{where}.priority must be in 0..{PRIORITY_LOWEST}")
        if self.gpu_quota < 0 or self.cpu_quota < 0:
            raise ValueError(f"{where}: quotas must be >= 0")


class Ranked(_Quota, kw_only=True):
    """A workload's place in the dispatch order: ⟨priority, credit⟩ and why."""

    id: str
    tenant: str
    priority: int
    credit: float
    within_quota: bool


def quota_scan(
    pending: Sequence[PendingWorkload],
    tenants: Mapping[str, TenantQuota],
    running_usage: Mapping[str, tuple[int, int]],
) -> list[Ranked]:
    """Rank the pending workloads; the result is in dispatch order.

    Args:
        pending: every pending workload.
        tenants: quota and priority per tenant name.
        running_usage: (GPUs, CPU machines) held by each tenant's running
            workloads; a tenant missing here holds nothing.

    Returns:
        One `Ranked` per pending workload, sorted by priority (0 first), then
        credit (highest first), then id.
    """
    quotas = {name: (t.priority, t.gpu_quota, t.cpu_quota) for name, t in tenants.items()}
    rows = quota_order(
        [(w.id, w.tenant, w.credit) for w in pending],
        [(w.gpus, w.cpu_machines) for w in pending],
        quotas,
        running_usage,
    )
    return [
        Ranked(id=wid, tenant=tenant, priority=priority, credit=credit, within_quota=fits)
        for wid, tenant, priority, credit, fits in rows
    ]


# A ranked workload: (id, tenant, priority, credit, within_quota).
Row = tuple[str, str, int, float, bool]


def quota_order(
    credits: Sequence[tuple[str, str, float]],
    requests: Sequence[tuple[int, int]],
    quotas: Mapping[str, tuple[int, int, int]],
    running_usage: Mapping[str, tuple[int, int]],
) -> list[Row]:
    """`quota_scan` over plain tuples (what the GMS runs over its whole queue).

    Args:
        credits: (id, tenant, credit) per pending workload.
        requests: (GPUs, CPU machines) per pending workload, in the same order.
        quotas: tenant -> (priority, GPU quota, CPU-machine quota).
        running_usage: as for `quota_scan`.

    Returns:
        (id, tenant, priority, credit, within_quota) per workload, in
        dispatch order. Remaining ties go by input position, as with stable
        sorts.
    """
    by_credit = [(-credit, wid, i) for i, (wid, _, credit) in enumerate(credits)]
    by_credit.sort()
    used = {name: tuple(running_usage.get(name, (0, 0))) for name in quotas}
    # The final order is by priority, then the credit order: a stable bucketing
    # of the credit order by priority, O(N) instead of a second sort.
    buckets: dict[int, list[Row]] = {}
    for _, wid, i in by_credit:
        tenant, credit = credits[i][1], credits[i][2]
        gpus, cpus = requests[i]
        quota = quotas.get(tenant)
        row: Row = (wid, tenant, PRIORITY_LOWEST, credit, False)
        if quota is not None:
            gpus_used, cpus_used = used[tenant]
            if gpus_used + gpus <= quota[1] and cpus_used + cpus <= quota[2]:
                used[tenant] = (gpus_used + gpus, cpus_used + cpus)
                row = (wid, tenant, quota[0], credit, True)
        bucket = buckets.get(row[2])
        if bucket is None:
            buckets[row[2]] = bucket = []
        bucket.append(row)
    return [row for priority in sorted(buckets) for row in buckets[priority]]
