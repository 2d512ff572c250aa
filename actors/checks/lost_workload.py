"""MAST's invariant 8, `no-lost-workload`: no workload lost, none DONE with work undone.

Every submitted workload is in exactly one state; state changes start from
the state it is in; at the end nothing sits RUNNING with none of its jobs
holding machines for a grace, counted after the final heal too
(`emulator.liveness.HealClock`: a control plane still dark when the run ends,
or restarting only after it, had no chance to hear its jobs end: that is
for liveness to judge); a workload goes DONE only once every
one of its jobs finished its work (was released DONE) since its last award,
so a gang that lost a job cannot end as if it had not.
"""

from __future__ import annotations

from typing import Any

from actors.checks.base import StoreChecker
from emulator.liveness import HealClock
from emulator.trace import TraceEvent
from store.mast.queue import QUEUED


class LostWorkloadChecker(StoreChecker):
    name = "no-lost-workload"
    # A workload RUNNING with nothing running this long is lost, not in transit.
    grace_us = 600_000_000
    _routes = {
        "queue.submit": "on_submit",
        "queue.award": "on_award",
        "queue.transition": "on_transition",
        "fleet.start": "on_start",
        "fleet.release": "on_release",
    }
    tracks_queue = True
    kinds = ("store", "fault")

    def __init__(self) -> None:
        super().__init__()
        self.alive: dict[str, set[str]] = {}
        self.idle_since: dict[str, int] = {}
        self.now_us = 0
        self.heal = HealClock()
        # Each workload's jobs, and how each ended (released DONE or STOPPED)
        # since the workload's last award: a DONE workload needs all of them DONE.
        self.jobs: dict[str, list[str]] = {}
        self.ended: dict[str, dict[str, str]] = {}

    def observe(self, event: TraceEvent) -> list[str]:
        self.now_us = event.t_us
        if event.kind == "fault":
            self.heal.observe(event)
            return []
        return super().observe(event)

    def at_end(self, t_us: int) -> None:
        # `finish` judges idle workloads at the run's end, not at the last event read.
        self.now_us = t_us

    def on_submit(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        wid = args[0]["id"]
        if result and wid not in self.queue:
            self.jobs[wid] = sorted(j["name"] for j in args[0]["jobs"])
        if result and wid in self.queue:
            return [f"{wid} submitted twice"]
        if not result and wid not in self.queue:
            return [f"{wid} refused by the queue but never entered it"]
        return []

    def on_award(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        before = self.queue.get(args[2])
        if result:
            self.ended[args[2]] = {}  # a new attempt: every job has its work to do again
        if result and before not in QUEUED:
            return [f"{args[2]} awarded from state {before}"]
        return []

    def on_transition(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        if not result:
            return []
        wid, from_states, to_state = args[0], args[1], args[2]
        before = self.queue.get(wid)
        self._idle(wid, to_state)
        if before not in from_states:
            return [f"{wid} moved {from_states}→{to_state} while the checker saw it {before}"]
        if to_state == "DONE":
            return self._unfinished(wid)
        return []

    def _unfinished(self, wid: str) -> list[str]:
        # A gang that lost a job and let the rest finish would end DONE with
        # that job's work undone: lost as surely as a workload that vanished.
        ended = self.ended.get(wid, {})
        lost = [
            f"{j}: {ended.get(j, 'never released')}"
            for j in self.jobs.get(wid, ())
            if ended.get(j) != "DONE"
        ]
        if not lost:
            return []
        return [f"{wid} went DONE but not all its jobs finished their work ({'; '.join(lost)})"]

    def on_start(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result is not None:
            self.alive.setdefault(args[2], set()).add(args[3])
            self._idle(args[2])
        return []

    def on_release(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.alive.get(args[2], set()).discard(args[3])
            self._idle(args[2])
            self.ended.setdefault(args[2], {})[args[3]] = args[4]
        return []

    def _idle(self, wid: str, state: str | None = None) -> None:
        if (state or self.queue.get(wid)) == "RUNNING" and not self.alive.get(wid):
            self.idle_since.setdefault(wid, self.now_us)
        else:
            self.idle_since.pop(wid, None)

    def finish(self) -> list[str]:
        return [
            f"{wid} is RUNNING but none of its jobs has held machines since {since} µs"
            for wid, since in sorted(self.idle_since.items())
            if self.now_us - max(since, self.heal.heal_us) > self.grace_us
        ]
