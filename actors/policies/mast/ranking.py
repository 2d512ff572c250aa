"""One GMS-scan pass (MAST §4.2): usage window, credits, quota scan, dispatch order.

The GMS keeps a window of per-tenant usage samples (one per pass, GPUs + CPU
machines held by running workloads); each pass it adds one, drops those
older than the window, and ranks every queued workload:

    credit   = expressions 10 + 11 (`credit.credit`), from the workload's age
               and its tenant's window average against the mean over tenants;
    priority = the quota scan (`quota.quota_scan`) in credit order;
    order    = ⟨priority, credit⟩, then id.

The window is a frozen value (`UsageWindow`): `push` returns the next one.
It keeps integer totals per tenant, so a pass costs O(tenants) for the window
instead of O(tenants x samples); the averages are bit-identical to summing
the samples as floats (every partial sum is an integer below 2**53).
`rank` is the pass over the queue, O(N log N) in its two sorts; it gives the
same numbers and order as `credit.credit` and `quota.quota_scan` applied one
workload at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from actors.policies.mast.credit import CreditParams
from actors.policies.mast.quota import Row, quota_order
from emulator.units import US_PER_S

# A queued workload: (id, tenant, queued_us, gpus, cpu_machines).
Queued = tuple[str, str, int, int, int]


class UsageWindow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Usage samples `(t_us, ((tenant, used), ...))` of the last window, and their sums.

    `totals[t]` is the tenant's usage summed over the samples and `present[t]`
    the number of samples that mention it (a tenant is averaged once any
    sample mentions it, even with zero use).
    """

    samples: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = ()
    totals: dict[str, int] = {}
    present: dict[str, int] = {}


def push(
    window: UsageWindow, now_us: int, running: Mapping[str, tuple[int, int]], window_us: int
) -> UsageWindow:
    """The window after sampling `running` (tenant -> (GPUs, CPU machines)) at `now_us`.

    Samples taken before `now_us - window_us` leave the window.
    """
    sample = tuple((tenant, gpus + cpus) for tenant, (gpus, cpus) in running.items())
    totals, present = dict(window.totals), dict(window.present)
    for tenant, used in sample:
        totals[tenant] = totals.get(tenant, 0) + used
        present[tenant] = present.get(tenant, 0) + 1
    samples = (*window.samples, (now_us, sample))
    cut = 0
    while cut < len(samples) and samples[cut][0] < now_us - window_us:
        for tenant, used in samples[cut][1]:
            totals[tenant] -= used
            present[tenant] -= 1
            if not present[tenant]:
                del totals[tenant], present[tenant]
        cut += 1
    return UsageWindow(samples=samples[cut:], totals=totals, present=present)


def averages(window: UsageWindow, tenants: Iterable[str]) -> tuple[dict[str, float], float]:
    """Per-tenant window averages and their mean over tenants (GPU-equivalents).

    Every known tenant is averaged (0 without samples), then any other tenant
    the samples mention, in the order the samples first mention it. The mean
    is over all of them, so a tenant using its fair share gets a fair-share
    credit of 0.
    """
    n = len(window.samples)
    if not n:
        raise ValueError("averages: the window has no sample")
    totals = window.totals
    avg = {tenant: totals.get(tenant, 0) / n for tenant in tenants}
    if len(avg) < len(totals) or any(t not in avg for t in totals):
        for _, sample in window.samples:
            for tenant, _used in sample:
                if tenant not in avg:
                    avg[tenant] = totals[tenant] / n
    all_avg = sum(avg.values()) / len(avg) if avg else 0.0
    return avg, all_avg


def rank(
    queued: Sequence[Queued],
    now_us: int,
    tenant_avg: Mapping[str, float],
    all_avg: float,
    quotas: Mapping[str, tuple[int, int, int]],
    running: Mapping[str, tuple[int, int]],
    params: CreditParams,
) -> list[Row]:
    """Credits, the quota scan and the dispatch order of the queued workloads.

    Args:
        queued: every queued workload.
        now_us: the pass's time; a workload's age is `now_us - queued_us`.
        tenant_avg, all_avg: the usage window's averages (`averages`).
        quotas: tenant -> (priority, GPU quota, CPU-machine quota); workloads
            of other tenants are over quota.
        running: (GPUs, CPU machines) held by each tenant's running workloads.
        params: the credit weights.

    Returns:
        One row per queued workload, sorted by priority (0 first), then
        credit (highest first), then id.
    """
    fair: dict[str, float] = {}
    for tenant in {q[1] for q in queued}:
        usage = tenant_avg.get(tenant, 0.0)
        share = 0.0 if all_avg == 0 else usage / all_avg
        fair[tenant] = params.w_fair * (1.0 - share)
    w_age, cap_s = params.w_age, params.age_cap_s
    # Expression 10 + 11 exactly as `credit.credit` computes it, term by term.
    return quota_order(
        [
            (wid, tenant, w_age * min(max(0, now_us - queued_us) / US_PER_S, cap_s) + fair[tenant])
            for wid, tenant, queued_us, _, _ in queued
        ],
        [(gpus, cpus) for _, _, _, gpus, cpus in queued],
        quotas,
        running,
    )
