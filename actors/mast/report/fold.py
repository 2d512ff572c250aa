"""The one pass over a MAST run's trace that a report's figures are computed from.

`TraceFold` is fed every `store`, `decision` and `fault` row in trace order
and keeps what the figures need (see `actors.mast.report.figures`): each
workload's scheduling events and states (with Fig. 6's count of workloads
waiting for data), the regions that bid for and ran each workload, the step
function of GPUs and CPU machines held by jobs, when the fleet first became
loaded, the fault windows' starts and ends, and the slow path's Tetris
states and on-demand bytes. A store event counts only when its write was
committed: a refused write changed nothing in the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from emulator.trace import fault_key
from store.mast.copies import DAY_US
from store.mast.queue import ENDED, QUEUED
from store.trace import TraceRow

_JSON = msgspec.json.Encoder(order="deterministic")


@dataclass
class SchedEvent:
    """One scheduling event of a workload: from (re)queueing to RUNNING (end) or the run's end."""

    workload: str
    start_us: int
    end_us: int | None = None
    within_quota: bool | None = None  # from the latest ranking while it waited
    # Start of the current uninterrupted within-quota stretch: the event's start if
    # its first ranking was within quota, else the ranking that made it so.
    within_since_us: int | None = None
    ranked: bool = False
    # The first event of a workload of a warm start (the fleet at midnight): it
    # was running before the run began, so its wait is no time to start.
    warm: bool = False


@dataclass
class TraceFold:
    """What one pass over the trace collects."""

    gpu_hosts: set[str]
    # A warm start: workloads submitted at t=0 are the fleet already at work.
    warm_start: bool = False
    submitted: dict[str, int] = field(default_factory=dict)  # id → submission time
    gpus_asked: dict[str, int] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)
    open: dict[str, SchedEvent] = field(default_factory=dict)
    events: list[SchedEvent] = field(default_factory=list)
    award_region: dict[str, str] = field(default_factory=dict)
    candidates: dict[str, set[str]] = field(default_factory=dict)
    executing: dict[str, set[str]] = field(default_factory=dict)
    ever_waited_for_data: set[str] = field(default_factory=set)
    # Fig. 6: (t_us, workloads in WAITING_DATA, workloads submitted and not finished).
    data_waits: list[tuple[int, int, int]] = field(default_factory=list)
    waiting_data: int = 0
    live: int = 0
    # Allocation: what each job holds, and the step function of what is held.
    held: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    gpus_used: int = 0
    cpus_used: int = 0
    steps: list[tuple[int, int, int]] = field(default_factory=list)  # (t_us, gpus, cpu machines)
    loaded_from_us: int | None = None
    # (t_us, phase, name, target): a window is one target's start and end.
    faults: list[tuple[int, str, str, str]] = field(default_factory=list)
    # The slow path: Tetris's placement figures as they changed, on-demand bytes per day.
    tetris_states: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    on_demand_bytes: dict[int, int] = field(default_factory=dict)

    def feed(self, row: TraceRow) -> None:
        if row.kind == "store":
            handler = _STORE.get(row.type)
            if handler is not None:
                args, result = row.payload
                handler(self, row.t_us, args, result)
        elif row.kind == "decision":
            if row.type in ("auction.award", "auction.lost-cas"):
                p = row.payload
                self.candidates.setdefault(p["workload"], set()).update(p["bids"])
            elif row.type == "auction.none":
                self._none(row.t_us, row.payload)
            elif row.type == "tetris.state":
                self.tetris_states.append((row.t_us, row.payload))
            elif row.type == "migration.on-demand":
                day = row.t_us // DAY_US
                self.on_demand_bytes[day] = self.on_demand_bytes.get(day, 0) + row.payload["bytes"]
        elif row.kind == "fault":
            self._fault(row)

    # -- queue ------------------------------------------------------------------------------
    def _submit(self, t_us: int, args: list[Any], result: Any) -> None:
        if not result:
            return
        spec = args[0]
        wid = spec["id"]
        self.submitted[wid] = t_us
        self.gpus_asked[wid] = sum(j.get("gpus", 0) for j in spec["jobs"])
        self.live += 1
        self._set_state(t_us, wid, "PENDING")
        self._open(wid, t_us)
        if self.warm_start and spec.get("submit_at_us", 0) == 0:
            self.events[-1].warm = True

    def _rank(self, t_us: int, args: list[Any], result: Any) -> None:
        if not result:
            return
        for wid, _priority, _credit, within in args[2]:
            event = self.open.get(wid)
            if event is None:
                continue
            if not within:
                event.within_since_us = None
            elif event.within_since_us is None:
                event.within_since_us = t_us if event.ranked else event.start_us
            event.within_quota = bool(within)
            event.ranked = True

    def _award(self, t_us: int, args: list[Any], result: Any) -> None:
        if result:
            wid, region = args[2], args[4]
            self._set_state(t_us, wid, "DISPATCHING")
            self.award_region[wid] = region

    def _transition(self, t_us: int, args: list[Any], result: Any) -> None:
        if not result:
            return
        wid, to = args[0], args[2]
        before = self._set_state(t_us, wid, to)
        if to == "RUNNING":
            event = self.open.pop(wid, None)
            if event is not None:
                event.end_us = t_us
            region = self.award_region.get(wid)
            if region is not None:
                self.executing.setdefault(wid, set()).add(region)
        elif to in QUEUED and before == "RUNNING":
            self._open(wid, t_us)  # it ran and is back: a new scheduling event
        elif to in ENDED:
            self.open.pop(wid, None)

    def _set_state(self, t_us: int, wid: str, to: str) -> str | None:
        """Record a workload's new state (returns the old one), keeping Fig. 6's counts."""
        before = self.state.get(wid)
        self.state[wid] = to
        ended = to in ENDED and before not in ENDED
        if (before == "WAITING_DATA") != (to == "WAITING_DATA") or ended or before is None:
            self.waiting_data += (to == "WAITING_DATA") - (before == "WAITING_DATA")
            self.live -= ended
            self.data_waits.append((t_us, self.waiting_data, self.live))
        return before

    def _open(self, wid: str, t_us: int) -> None:
        event = SchedEvent(wid, t_us)
        self.open[wid] = event
        self.events.append(event)

    def _none(self, t_us: int, payload: dict[str, Any]) -> None:
        wid = payload["workload"]
        if payload["state"] == "WAITING_DATA":
            self.ever_waited_for_data.add(wid)
        # Loaded: a GPU workload found no room in a region that could otherwise run it.
        full = {"unschedulable", "negative_cache"} & set(payload["reasons"])
        if full and self.loaded_from_us is None and self.gpus_asked.get(wid, 0) > 0:
            self.loaded_from_us = t_us

    # -- fleet ----------------------------------------------------------------------------
    def _start(self, t_us: int, args: list[Any], result: Any) -> None:
        if result is None:
            return
        key = (args[2], args[3])
        self._free(key)
        gpus = sum(n for host, n in args[6] if host in self.gpu_hosts)
        self.held[key] = (gpus, len(args[7]))
        self._step(t_us, gpus, len(args[7]))

    def _release(self, t_us: int, args: list[Any], result: Any) -> None:
        if result:
            gpus, cpus = self._free((args[2], args[3]))
            if gpus or cpus:
                self._step(t_us, 0, 0)

    def _free(self, key: tuple[str, str]) -> tuple[int, int]:
        gpus, cpus = self.held.pop(key, (0, 0))
        self.gpus_used -= gpus
        self.cpus_used -= cpus
        return gpus, cpus

    def _step(self, t_us: int, gpus: int, cpus: int) -> None:
        self.gpus_used += gpus
        self.cpus_used += cpus
        if self.steps and self.steps[-1][0] == t_us:
            self.steps[-1] = (t_us, self.gpus_used, self.cpus_used)
        else:
            self.steps.append((t_us, self.gpus_used, self.cpus_used))

    def _fault(self, row: TraceRow) -> None:
        if "." in row.type:
            action, _, phase = row.type.rpartition(".")
        else:  # the kernel's own down/up of a node
            action, phase = f"down {row.dst}", "start" if row.type == "down" else "end"
        target = _JSON.encode(fault_key(row.payload)).decode()
        self.faults.append((row.t_us, phase, action, target))


_STORE = {
    "queue.submit": TraceFold._submit,
    "queue.rank": TraceFold._rank,
    "queue.award": TraceFold._award,
    "queue.transition": TraceFold._transition,
    "fleet.start": TraceFold._start,
    "fleet.release": TraceFold._release,
}
