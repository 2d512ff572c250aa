"""MAST's invariant 5, `colocation`: jobs start where their data and GPU type are.

A job starts only in a region holding ready replicas of all its input
tables, on machines of its GPU type.
"""

from __future__ import annotations

from typing import Any

from actors.checks.base import FactsChecker, Key
from emulator.trace import TraceEvent


class ColocationChecker(FactsChecker):
    name = "colocation"
    _routes = {
        "queue.submit": "on_submit",
        "catalog.replica": "on_replica",
        "catalog.delete": "on_delete",
        "migration.done": "on_copied",
        "fleet.start": "on_start",
    }

    def __init__(self) -> None:
        self.machines: dict[str, tuple[str, str | None]] = {}
        self.ready: dict[str, set[str]] = {}
        self.jobs: dict[Key, tuple[str | None, list[str]]] = {}

    def on_setup(self, type_: str, payload: Any) -> None:
        if type_ == "machines":
            self.machines = {h: (region, gpu_type) for h, (region, gpu_type, _g) in payload.items()}
        elif type_ == "catalog":
            for table, regions in payload.items():
                self.ready.setdefault(table, set()).update(regions)

    def on_submit(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        spec = args[0]
        for job in spec["jobs"]:
            self.jobs[(spec["id"], job["name"])] = (
                job.get("gpu_type") if job.get("gpus") else None,
                list(job.get("input_tables", [])),
            )
        return []

    def on_replica(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        table, region, state = args[0], args[1], args[2]
        regions = self.ready.setdefault(table, set())
        if state == "ready":
            regions.add(region)
        else:
            regions.discard(region)
        return []

    def on_delete(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.ready.get(args[0], set()).discard(args[1])
        return []

    def on_copied(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            table, region, _bytes = result
            self.ready.setdefault(table, set()).add(region)
        return []

    def on_start(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result is None or not self.machines:
            return []
        key = (args[2], args[3])
        gpu_type, tables = self.jobs.get(key, (None, []))
        hosts = [h for h, _n in args[6]] + list(args[7])
        regions = {self.machines[h][0] for h in hosts if h in self.machines}
        out = []
        for region in sorted(regions):
            missing = [t for t in tables if region not in self.ready.get(t, set())]
            if missing:
                out.append(f"{key[0]}/{key[1]} started in {region} without ready {missing}")
        wrong = sorted(
            h for h, _n in args[6] if self.machines.get(h, (None, gpu_type))[1] != gpu_type
        )
        if wrong:
            out.append(f"{key[0]}/{key[1]} needs {gpu_type} but got {wrong}")
        return out
