"""The federated baseline of MAST §5.6: early binding of each workload to one region.

Instead of an auction over every region, a workload is dispatched on arrival
to the region whose demand/supply ratio for its GPU type is lowest, and
queues there even if another region could have run it (or preempted for
it) sooner. `demand` is what is already bound to or running in a region
(GPUs of that type, or CPU machines for `gpu_type=None`); `supply` is the
region's capacity in the same unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec


class BindRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A workload to bind: its main hardware type and how much of it it asks for."""

    workload_id: str
    gpu_type: str | None
    amount: float


def pick_region(
    gpu_type: str | None, demand: Mapping[str, float], supply: Mapping[str, float]
) -> str | None:
    """The region with the lowest demand/supply of `gpu_type`; None if no region has any.

    Args:
        gpu_type: the hardware type asked for (None: CPU machines); only named
            in the maps' meaning, the caller passes that type's slice.
        demand: region -> demand for that type (a missing region has none).
        supply: region -> supply of that type; regions with supply <= 0 are
            not candidates.

    Returns:
        The region name; ties by the smallest name.
    """
    del gpu_type  # the maps are already for this type
    candidates = [(demand.get(r, 0.0) / s, r) for r, s in supply.items() if s > 0]
    return min(candidates)[1] if candidates else None


def bind_all(
    requests: Sequence[BindRequest],
    demand: Mapping[str | None, Mapping[str, float]],
    supply: Mapping[str | None, Mapping[str, float]],
) -> tuple[dict[str, str | None], dict[str | None, dict[str, float]]]:
    """Bind workloads in arrival order, each one's amount adding to its region's demand.

    Args:
        requests: workloads in arrival order.
        demand: gpu_type -> region -> current demand.
        supply: gpu_type -> region -> supply.

    Returns:
        (workload_id -> region, or None when no region has that type; the
        demand after binding).
    """
    after = {t: dict(by_region) for t, by_region in demand.items()}
    bound: dict[str, str | None] = {}
    for req in requests:
        by_region = after.setdefault(req.gpu_type, {})
        region = pick_region(req.gpu_type, by_region, supply.get(req.gpu_type, {}))
        bound[req.workload_id] = region
        if region is not None:
            by_region[region] = by_region.get(region, 0.0) + req.amount
    return bound, after
