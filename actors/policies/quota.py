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

from store.records import PRIORITY_LOWEST


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
    used = {name: tuple(running_usage.get(name, (0, 0))) for name in tenants}
    ranked: list[Ranked] = []
    for w in sorted(pending, key=lambda w: (-w.credit, w.id)):
        quota = tenants.get(w.tenant)
        fits = False
        if quota is not None:
            gpus_used, cpus_used = used[w.tenant]
            fits = (
                gpus_used + w.gpus <= quota.gpu_quota
                and cpus_used + w.cpu_machines <= quota.cpu_quota
            )
            if fits:
                used[w.tenant] = (gpus_used + w.gpus, cpus_used + w.cpu_machines)
        ranked.append(
            Ranked(
                id=w.id,
                tenant=w.tenant,
                priority=quota.priority if fits and quota is not None else PRIORITY_LOWEST,
                credit=w.credit,
                within_quota=fits,
            )
        )
    ranked.sort(key=lambda r: (r.priority, -r.credit, r.id))
    return ranked
