"""The federated baseline of MAST §5.6: early binding of each workload to one region.

Instead of an auction over every region, a workload is dispatched on arrival
to the region whose demand/supply ratio for its GPU type is lowest, and
queues there even if another region could have run it (or preempted for
it) sooner. `demand` is what is already bound to or running in a region
(GPUs of that type, or CPU machines for `gpu_type=None`); `supply` is the
region's capacity in the same unit.

`FederatedBinding` is the policy as the GMS runs it (`mast_api.MastPolicy`):
at each scan pass it binds the workloads queued since the last one, in
arrival order, and routes each queued workload's auction to its region
only. Its state is the bindings so far.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from actors.policies.mast.api import MastDefaults, Routing, RoutingView
from store.mast.records import WorkloadSpec

# Bindings so far: workload -> its region (None: no region has its hardware type).
Bindings = Mapping[str, str | None]


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


def main_hardware(spec: WorkloadSpec) -> tuple[str | None, float]:
    """A workload's main hardware: the GPU type of its largest GPU job and the
    GPUs of that type it asks for, or (None, its CPU machines)."""
    gpu_jobs = [j for j in spec.jobs if j.gpus]
    if gpu_jobs:
        main = max(gpu_jobs, key=lambda j: (j.gpus, j.name))
        return main.gpu_type, float(sum(j.gpus for j in gpu_jobs if j.gpu_type == main.gpu_type))
    return None, float(spec.cpu_machines)


class FederatedBinding(MastDefaults):
    """Early binding (§5.6): each workload queues and runs in the region it was bound to."""

    name = "federated"
    reads_supply = True

    def initial_state(self, params: Any) -> Bindings:
        del params
        return {}

    def route(self, view: RoutingView, state: Bindings, params: Any) -> tuple[Routing, Bindings]:
        del params
        demand: dict[str | None, dict[str, float]] = {}

        def add(spec: WorkloadSpec, region: str | None) -> None:
            kind, amount = main_hardware(spec)
            if region is not None:
                per = demand.setdefault(kind, {})
                per[region] = per.get(region, 0.0) + amount

        # Demand is what runs somewhere plus what is already bound and waiting.
        for entry in view.active:
            add(view.specs[entry.id], entry.region)
        new = []
        for entry in view.queued:
            if entry.id in state:
                add(view.specs[entry.id], state[entry.id])
            else:
                new.append(entry)
        requests = [
            BindRequest(workload_id=e.id, gpu_type=kind, amount=amount)
            for e in sorted(new, key=lambda e: (e.submitted_us, e.id))
            for kind, amount in [main_hardware(view.specs[e.id])]
        ]
        bindings, _ = bind_all(requests, demand, view.supply)
        bound = {**state, **bindings}
        targets: dict[str, tuple[str, ...]] = {}
        for entry in view.queued:
            region = bound[entry.id]
            # No region has its hardware type: no region is asked, and it waits.
            targets[entry.id] = (region,) if region is not None else ()
        notes = tuple(
            ("federated.bind", {"workload": workload_id, "region": region})
            for workload_id, region in sorted(bindings.items())
        )
        return Routing(targets=targets, notes=notes), bound
