"""MAST's invariant 2, `allocation`: no CPU machine held twice, no GPU over-committed.

No GPU or CPU machine held by two running jobs; a machine's GPUs never
over-committed; a job never started twice at once. A region the GMS gave up
(`gms.region-lost`, then its workloads queued again) is the one exception:
its dead attempts' allocations stay as left-overs, still using their
machines, the job may start elsewhere, and only left-overs may be freed as
such (`fleet.leftovers`).
"""

from __future__ import annotations

from typing import Any

from actors.checks.base import Key, StoreChecker
from emulator.trace import TraceEvent
from store.mast.queue import QUEUED
from store.mast.records import GPUS_PER_MACHINE


class AllocationChecker(StoreChecker):
    name = "allocation"
    kinds = ("store", "setup", "decision")
    _routes = {
        "fleet.start": "on_start",
        "fleet.release": "on_release",
        "queue.transition": "on_transition",
        "fleet.leftovers": "on_leftovers",
    }
    other_types = {"decision": frozenset({"gms.region-lost"})}

    def __init__(self) -> None:
        # GPUs per host from the `machines` setup fact (cluster-policy worlds
        # have 4-GPU machines); MAST's 8 for a host the facts do not name.
        self.capacity: dict[str, int] = {}
        self.gpus: dict[str, dict[Key, int]] = {}
        self.cpu: dict[str, Key] = {}
        self.alive: dict[Key, tuple[list[tuple[str, int]], list[str]]] = {}
        # A dark region's attempts, given up by the GMS (`gms.region-lost`, then
        # the workload queued again): their allocations stay on the machines,
        # still using them, until a CM frees them; the job may start elsewhere.
        self.giving_up: set[str] = set()
        self.left_gpus: dict[str, dict[Key, int]] = {}
        self.left_cpu: dict[str, Key] = {}

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "setup":
            if event.type == "machines":
                self.capacity = {h: int(v[2]) for h, v in event.payload.items() if v[2]}
            return []
        if event.kind == "decision":
            if event.type == "gms.region-lost":
                self.giving_up.update(w for w, _auction in event.payload["workloads"])
            return []
        return super().observe(event)

    def on_transition(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        workload = args[0]
        if workload in self.giving_up:
            self.giving_up.discard(workload)
            if result and args[2] in QUEUED:
                for key in [k for k in self.alive if k[0] == workload]:
                    gpus, cpus = self.alive.pop(key)
                    for host, _n in gpus:
                        n = self.gpus.get(host, {}).pop(key, 0)
                        left = self.left_gpus.setdefault(host, {})
                        left[key] = left.get(key, 0) + n
                    for host in cpus:
                        if self.cpu.get(host) == key:
                            del self.cpu[host]
                        self.left_cpu[host] = key
        return []

    def on_leftovers(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        out = []
        for host, workload, job in result or ():
            key = (workload, job)
            self.left_gpus.get(host, {}).pop(key, None)
            if self.left_cpu.get(host) == key:
                del self.left_cpu[host]
            gpus, cpus = self.alive.get(key, ([], []))
            if host in cpus or any(h == host for h, _n in gpus):
                out.append(f"{host} of {workload}/{job} freed as a left-over but the job holds it")
        return out

    def on_start(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result is None:
            return []
        key = (args[2], args[3])
        gpus = [(h, n) for h, n in args[6]]
        cpus = list(args[7])
        out = []
        if key in self.alive:
            out.append(f"{key[0]}/{key[1]} started again while it still holds machines")
        for host, n in gpus:
            held = self.gpus.setdefault(host, {})
            held[key] = held.get(key, 0) + n
            left = self.left_gpus.get(host, {})
            total = sum(held.values()) + sum(left.values())
            capacity = self.capacity.get(host, GPUS_PER_MACHINE)
            if total > capacity:
                who = ", ".join(f"{w}/{j}" for w, j in sorted({*held, *left}))
                out.append(f"{host}: {total} GPUs allocated (of {capacity}) to {who}")
        for host in cpus:
            other = self.cpu.get(host) or self.left_cpu.get(host)
            if other is not None and other != key:
                out.append(
                    f"CPU machine {host} held by {other[0]}/{other[1]} and {key[0]}/{key[1]}"
                )
            self.cpu[host] = key
        self.alive[key] = (gpus, cpus)
        return out

    def on_release(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if not result:
            return []
        key = (args[2], args[3])
        gpus, cpus = self.alive.pop(key, ([], []))
        for host, _n in gpus:
            self.gpus.get(host, {}).pop(key, None)
        for host in cpus:
            if self.cpu.get(host) == key:
                del self.cpu[host]
        # The store frees every allocation of the job, left-overs of given-up attempts too.
        for left in self.left_gpus.values():
            left.pop(key, None)
        for host in [h for h, k in self.left_cpu.items() if k == key]:
            del self.left_cpu[host]
        return []
