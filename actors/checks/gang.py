"""MAST's invariant 3, `gang`: a workload runs only with all its jobs placed together.

A workload is RUNNING only once all its jobs have held machines together
since its award (a job may have finished since: the GMS hears of the
dispatch late when it was down), and goes back to the queue (or is done)
only when none holds machines — or when the GMS gave its region up.
"""

from __future__ import annotations

from typing import Any

from actors.checks.base import StoreChecker
from emulator.trace import TraceEvent
from store.mast.queue import ENDED, QUEUED


class GangChecker(StoreChecker):
    name = "gang"
    _routes = {
        "queue.submit": "on_submit",
        "queue.award": "on_award",
        "fleet.start": "on_start",
        "fleet.release": "on_release",
        "queue.transition": "on_transition",
    }

    def __init__(self) -> None:
        self.jobs: dict[str, set[str]] = {}
        self.alive: dict[str, set[str]] = {}
        # Workloads whose jobs all held machines at one instant since their last award.
        self.placed: set[str] = set()
        # Workloads of a dark region the GMS is giving up (`gms.region-lost`): queued
        # again while their dead jobs still hold machines (see AllocationChecker).
        self.giving_up: set[str] = set()

    kinds = ("store", "decision")
    other_types = {"decision": frozenset({"gms.region-lost"})}

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "decision":
            if event.type == "gms.region-lost":
                self.giving_up.update(w for w, _auction in event.payload["workloads"])
            return []
        return super().observe(event)

    def on_submit(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        spec = args[0]
        self.jobs[spec["id"]] = {j["name"] for j in spec["jobs"]}
        return []

    def on_award(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.placed.discard(args[2])
        return []

    def on_start(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result is not None:
            alive = self.alive.setdefault(args[2], set())
            alive.add(args[3])
            if self.jobs.get(args[2], set()) <= alive:
                self.placed.add(args[2])
        return []

    def on_release(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.alive.get(args[2], set()).discard(args[3])
        return []

    def on_transition(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        given_up = args[0] in self.giving_up
        self.giving_up.discard(args[0])
        if not result:
            return []
        workload, to_state = args[0], args[2]
        if given_up and to_state in QUEUED:
            self.alive.pop(workload, None)  # its jobs died with the region
        alive = self.alive.get(workload, set())
        if to_state == "RUNNING":
            missing = sorted(self.jobs.get(workload, set()) - alive)
            if missing and workload not in self.placed:
                return [f"{workload} RUNNING but jobs {missing} hold no machines"]
        elif to_state in (*QUEUED, *ENDED) and alive:
            return [f"{workload} went to {to_state} while jobs {sorted(alive)} still hold machines"]
        return []
