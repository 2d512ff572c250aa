"""MAST's invariant 7, `quota`: within quota means within the tenant's quota.

A workload ranked within quota fits its tenant's quota on top of what the
tenant runs and what it was ranked within quota before it.
"""

from __future__ import annotations

from typing import Any

from actors.checks.base import FactsChecker
from emulator.trace import TraceEvent

HOLDING = frozenset({"DISPATCHING", "RUNNING"})


class QuotaChecker(FactsChecker):
    name = "quota"
    _routes = {"queue.submit": "on_submit", "queue.rank": "on_rank"}
    tracks_queue = True

    def __init__(self) -> None:
        super().__init__()
        self.quota: dict[str, tuple[int, int]] = {}
        self.need: dict[str, tuple[str, int, int]] = {}
        # The workloads holding machines: every rank is judged against them, and
        # the queue keeps every workload of the run (a week's: ~70,000).
        self.holding: set[str] = set()

    def moved(self, workload_id: str, state: str) -> None:
        super().moved(workload_id, state)
        if state in HOLDING:
            self.holding.add(workload_id)
        else:
            self.holding.discard(workload_id)

    def on_setup(self, type_: str, payload: Any) -> None:
        if type_ == "tenants":
            self.quota = {name: (gpu, cpu) for name, (_p, gpu, cpu) in payload.items()}

    def on_submit(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        spec = args[0]
        gpus = sum(j.get("gpus", 0) for j in spec["jobs"])
        cpus = sum(j.get("cpu_machines", 0) for j in spec["jobs"])
        self.need[spec["id"]] = (spec["tenant"], gpus, cpus)
        return []

    def on_rank(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if not result or not self.quota:
            return []
        used: dict[str, list[int]] = {}
        for wid in self.holding:
            tenant, gpus, cpus = self.need[wid]
            u = used.setdefault(tenant, [0, 0])
            u[0] += gpus
            u[1] += cpus
        out = []
        # The quota scan walks workloads by credit, highest first (ties by id).
        for wid, _priority, _credit, within in sorted(args[2], key=lambda r: (-r[2], r[0])):
            if not within:
                continue
            tenant, gpus, cpus = self.need[wid]
            u = used.setdefault(tenant, [0, 0])
            gpu_quota, cpu_quota = self.quota.get(tenant, (0, 0))
            if u[0] + gpus > gpu_quota or u[1] + cpus > cpu_quota:
                out.append(
                    f"{wid} ranked within quota but {tenant} would use "
                    f"{u[0] + gpus}/{gpu_quota} GPUs, {u[1] + cpus}/{cpu_quota} CPU machines"
                )
            u[0] += gpus
            u[1] += cpus
        return out
