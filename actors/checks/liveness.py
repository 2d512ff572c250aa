"""Which workloads could have run after the final heal but never did (MAST and cluster runs).

Read from the trace alone, like the checkers: workloads and their demand
(`queue.submit`), their state in the queue (`queue.award`,
`queue.transition`), the machines their jobs hold (`fleet.start`,
`fleet.release`), the machines themselves (the `machines` setup fact and the
kernel's `down`/`up` faults) and where data is (the `catalog` fact, replica
and migration events).

A workload RUNNING at the end, its jobs holding machines, is *frozen* when
none of its jobs showed a sign of life (a checkpoint, a start, a state
change, a release) for `FROZEN_PERIODS` of its jobs' longest checkpoint
period plus `grace_us` after the final heal: its agents save progress on a
timer, so a live one is never silent that long. A job whose agent died
unseen holds its machines, doing nothing, to the end of the run; no safety
invariant and no "never ran" verdict sees it.

A workload is judged when, at the end of the run, it is neither done nor
failed, none of its jobs holds machines, none has held any since the final
heal, and it has been in its state at least `grace_us` past both the heal
and the moment it entered that state (a workload queued a minute before the
end proves nothing). It *can run*, and is reported stuck, when one region
has, for the whole last `grace_us` of the run, enough healthy free GPUs of
each type and free CPU machines for all its jobs and ready replicas of all
its input tables. A job runs inside one dynamic cluster, so each job must
fit in one ML cluster of the region (a workload's jobs may use several),
with the jobs taken largest first, each into the cluster with the most room
for it; only machines in an ML dynamic cluster count: the `clusters` setup
fact says which holds each machine at the start (a run without it counts a
region as one cluster), and RAS's moves (`fleet.membership`) are in the
trace. One simplification, towards reporting: priority is ignored (free
capacity is free to anyone).

Waiting for data is legitimate while a copy of a missing table into a region
where the workload fits is in flight. When none is, the workload is reported
only if all of these hold:
- the run moves data at all (some copy was ordered): without a migration
  service nothing would ever move it;
- it waits for data (`WAITING_DATA`), or no region holding its data has its
  kinds of hardware: otherwise the GMS found a region with its data and its
  hardware, full for now, where it waits for room as MAST's GMS intends
  (asking for no copy; Tetris's periodic passes may move data, on no
  schedule the grace could hold them to);
- a region where it fits has the warehouse room for its missing tables (the
  `storage` fact and the reservations in the trace, counted as the `storage`
  invariant counts them): nothing in MAST evicts a replica to make room.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors.checks.storage import StorageBook
from actors.mast.ras import NON_ML
from emulator.liveness import LivenessReport, Stuck
from emulator.trace import TraceEvent
from emulator.units import format_us
from store.mast.queue import ENDED
from store.mast.records import JobSpec

# Ten minutes: two GMS scans at the default interval, plus an auction and a dispatch.
GRACE_US = 600_000_000
TERMINAL = ENDED
# Checkpoint periods a running workload may go without a sign of life (module
# docstring): one for the period, one for a checkpoint that ran long.
FROZEN_PERIODS = 2
# A job spec's checkpoint period when its stored form leaves the default out.
_PERIOD_DEFAULT_US = JobSpec(name="-", work_us=0).checkpoint_every_us


@dataclass
class _Workload:
    jobs: list[dict[str, Any]]
    state: str = "PENDING"
    since_us: int = 0
    alive: set[str] = field(default_factory=set)
    last_held_us: int | None = None  # the last start or release of one of its jobs
    sign_us: int = 0  # the last checkpoint, start, state change or release of one of its jobs
    # Its jobs' longest checkpoint period (None: one never checkpoints).
    period_us: int | None = None


@dataclass
class _Host:
    region: str
    gpu_type: str | None
    gpus: int
    used: int = 0
    # In an ML dynamic cluster: all are at the start (RAS's `nonml` cluster and
    # its unassigned machines fill only through membership moves).
    ml: bool = True
    # When RAS last moved it between clusters (0: never): room only from then on.
    moved_us: int = 0
    # Its dynamic cluster (None: not known, the region counts as one cluster).
    cluster: str | None = None
    # (t_us, GPUs in use from then on, or 1/0 for a CPU machine), in time order.
    changes: list[tuple[int, int]] = field(default_factory=list)


class WorkloadLiveness:
    name = "workloads"
    kinds = ("setup", "store", "fault")

    def __init__(self, grace_us: int = GRACE_US) -> None:
        self.grace_us = grace_us
        self.workloads: dict[str, _Workload] = {}
        self.hosts: dict[str, _Host] = {}
        # Every allocation of each job in the store, by host: an attempt started
        # elsewhere leaves the old ones until their CM frees them (`fleet.leftovers`).
        self.held: dict[tuple[str, str], dict[str, int]] = {}
        self.ready: dict[str, set[str]] = {}
        # When each (table, region) replica last became ready (absent: from the start).
        self.ready_at: dict[tuple[str, str], int] = {}
        self.copying: dict[tuple[str, str], int] = {}
        self.moves_data = False
        self.down: set[str] = set()
        self.storage = StorageBook()
        # Region → kinds of hardware in its ML clusters (None: CPU), made once when judging.
        self._kinds: dict[str, set[str | None]] | None = None

    # ---- reading the trace -----------------------------------------------------------
    def observe(self, event: TraceEvent) -> None:
        if event.kind == "setup":
            self._setup(event.type, event.payload)
        elif event.kind == "fault":
            if event.type == "down":
                self.down.add(event.dst)
            elif event.type == "up":
                self.down.discard(event.dst)
        else:
            handler = getattr(self, "_" + event.type.replace(".", "_"), None)
            if handler is not None:
                args, result = event.payload
                handler(args, result, event.t_us)

    def _setup(self, type_: str, payload: Any) -> None:
        self.storage.setup(type_, payload)
        if type_ == "machines":
            self.hosts = {h: _Host(r, t, int(g or 0)) for h, (r, t, g) in payload.items()}
        elif type_ == "clusters":
            for cluster, hosts in payload.items():
                for host in hosts:
                    h = self.hosts.get(host)
                    if h is not None:
                        h.cluster = cluster
        elif type_ == "catalog":
            for table, regions in payload.items():
                self.ready.setdefault(table, set()).update(regions)

    def _queue_submit(self, args: list[Any], result: Any, t_us: int) -> None:
        spec = args[0]
        if result and spec["id"] not in self.workloads:
            w = _Workload(list(spec["jobs"]), "PENDING", t_us)
            periods = [int(j.get("checkpoint_every_us", _PERIOD_DEFAULT_US)) for j in w.jobs]
            w.period_us = max(periods) if periods and min(periods) > 0 else None
            self.workloads[spec["id"]] = w

    def _queue_award(self, args: list[Any], result: Any, t_us: int) -> None:
        self._moved(args[2], "DISPATCHING", t_us, result)

    def _queue_transition(self, args: list[Any], result: Any, t_us: int) -> None:
        self._moved(args[0], args[2], t_us, result)

    def _moved(self, wid: str, state: str, t_us: int, result: Any) -> None:
        w = self.workloads.get(wid)
        if result and w is not None and w.state != state:
            w.state, w.since_us = state, t_us

    def _fleet_membership(self, args: list[Any], result: Any, t_us: int) -> None:
        # RAS moves machines between clusters; one outside every ML cluster runs no job.
        if result:
            for host, _src, dst in args[2]:
                h = self.hosts.get(host)
                if h is not None:
                    h.ml = dst is not None and not dst.endswith("/" + NON_ML)
                    h.cluster = dst
                    h.moved_us = t_us

    def _fleet_start(self, args: list[Any], result: Any, t_us: int) -> None:
        if result is None:
            return
        wid, job = args[2], args[3]
        held = self.held.setdefault((wid, job), {})
        for host, n in [(h, int(n)) for h, n in args[6]] + [(h, 1) for h in args[7]]:
            held[host] = held.get(host, 0) + n
            self._use(host, n, t_us)
        w = self.workloads.get(wid)
        if w is not None:
            w.alive.add(job)
            w.last_held_us = w.sign_us = t_us

    def _fleet_release(self, args: list[Any], result: Any, t_us: int) -> None:
        if not result:
            return
        wid, job = args[2], args[3]
        for host, n in self.held.pop((wid, job), {}).items():
            self._use(host, -n, t_us)
        w = self.workloads.get(wid)
        if w is not None and job in w.alive:
            w.alive.discard(job)
            w.last_held_us = w.sign_us = t_us

    def _fleet_checkpoint(self, args: list[Any], result: Any, t_us: int) -> None:
        self._sign(args[1], result, t_us)

    def _fleet_state(self, args: list[Any], result: Any, t_us: int) -> None:
        self._sign(args[2], result, t_us)

    def _sign(self, wid: str, result: Any, t_us: int) -> None:
        w = self.workloads.get(wid)
        if result and w is not None:
            w.sign_us = t_us

    def _fleet_leftovers(self, args: list[Any], result: Any, t_us: int) -> None:
        for host, wid, job in result or ():
            n = self.held.get((wid, job), {}).pop(host, 0)
            self._use(host, -n, t_us)

    def _use(self, host: str, n: int, t_us: int) -> None:
        h = self.hosts.get(host)
        if h is not None:
            h.used += n
            h.changes.append((t_us, h.used))

    def _catalog_replica(self, args: list[Any], result: Any, t_us: int) -> None:
        self.storage.add(args[0], args[1])
        if args[2] == "ready":
            self._ready(args[0], args[1], t_us)
        else:
            self.ready.setdefault(args[0], set()).discard(args[1])

    def _catalog_delete(self, args: list[Any], result: Any, t_us: int) -> None:
        if result:
            self.ready.get(args[0], set()).discard(args[1])
            self.storage.remove(args[0], args[1])

    def _migration_order(self, args: list[Any], result: Any, t_us: int) -> None:
        if result is not None:
            self.moves_data = True
            self.storage.add(args[1], args[3])
            key = (args[1], args[3])
            self.copying[key] = self.copying.get(key, 0) + 1

    def _migration_done(self, args: list[Any], result: Any, t_us: int) -> None:
        if result:
            self._copied(result[0], result[1])
            self._ready(result[0], result[1], t_us)

    def _migration_cancel(self, args: list[Any], result: Any, t_us: int) -> None:
        if result:
            self._copied(result[0], result[1])
            self.storage.remove(result[0], result[1])

    def _ready(self, table: str, region: str, t_us: int) -> None:
        regions = self.ready.setdefault(table, set())
        if region not in regions:
            self.ready_at[(table, region)] = t_us
            regions.add(region)

    def _copied(self, table: str, region: str) -> None:
        left = self.copying.get((table, region), 0) - 1
        if left > 0:
            self.copying[(table, region)] = left
        else:
            self.copying.pop((table, region), None)

    # ---- judging ---------------------------------------------------------------------
    def _free(self, since_us: int) -> dict[str, dict[str, dict[str | None, int]]]:
        """Region → cluster → GPU type (None: CPU) → units free throughout [since_us, end]."""
        free: dict[str, dict[str, dict[str | None, int]]] = {}
        for name, h in sorted(self.hosts.items()):
            if not h.ml or any(name == d or name.startswith(d + "/") for d in self.down):
                continue
            # Room throughout the window only: not a machine that joined its cluster
            # within it (RAS may bring machines back long after they are up; one that
            # came up within it is not judged: the grace runs from the final heal).
            if h.moved_us > since_us:
                continue
            peak = 0
            for t_us, used in h.changes:
                # A change before the window sets what was in use when it opened.
                peak = max(peak, used) if t_us > since_us else used
            peak = max(peak, h.used)
            room = (h.gpus - peak) if h.gpus else (1 - min(1, peak))
            if room > 0:
                cluster = h.cluster if h.cluster is not None else h.region
                kinds = free.setdefault(h.region, {}).setdefault(cluster, {})
                kind = h.gpu_type if h.gpus else None
                kinds[kind] = kinds.get(kind, 0) + room
        return free

    @staticmethod
    def _demand(job: dict[str, Any]) -> dict[str | None, int]:
        """What one job asks for: GPUs of its type, CPU machines (None)."""
        need: dict[str | None, int] = {}
        if job.get("gpus"):
            need[job.get("gpu_type")] = int(job["gpus"])
        if job.get("cpu_machines"):
            need[None] = need.get(None, 0) + int(job["cpu_machines"])
        return need

    @classmethod
    def _fits(cls, jobs: list[dict[str, Any]], clusters: dict[str, dict[str | None, int]]) -> bool:
        """Whether every job fits in one cluster: largest first, each where most room is left.

        A placement found this way surely exists; one it misses (a rare
        packing) only makes the judge keep quiet.
        """
        room = {name: dict(kinds) for name, kinds in clusters.items()}
        needs = sorted((cls._demand(job) for job in jobs), key=lambda n: -sum(n.values()))
        for need in needs:
            able = [
                name
                for name, kinds in sorted(room.items())
                if all(kinds.get(kind, 0) >= n for kind, n in need.items())
            ]
            if not able:
                return False
            best = max(able, key=lambda name: sum(room[name].get(k, 0) for k in need))
            for kind, n in need.items():
                room[best][kind] = room[best].get(kind, 0) - n
        return True

    def report(self, final_heal_us: int, end_us: int) -> LivenessReport | None:
        if not self.workloads:
            return None
        out = LivenessReport(self.name, final_heal_us, end_us)
        self._kinds = None
        since_us = end_us - self.grace_us
        free = self._free(since_us)
        for wid, w in sorted(self.workloads.items()):
            if w.state in TERMINAL:
                continue
            if w.alive:
                frozen = self._frozen(w, final_heal_us, end_us)
                if frozen is not None:
                    out.stuck.append(Stuck(wid, w.state, w.sign_us, frozen))
                continue
            if w.last_held_us is not None and w.last_held_us >= final_heal_us:
                continue  # it ran after the heal (and stopped since)
            if end_us - max(final_heal_us, w.since_us) < self.grace_us:
                out.too_recent += 1
                continue
            why = self._could_run(w, free, since_us)
            if why is None:
                out.waiting_ok += 1
            else:
                out.stuck.append(Stuck(wid, w.state, w.since_us, why))
        return out

    def _has_home(self, jobs: list[dict[str, Any]], tables: list[str]) -> bool:
        """Whether a region with ready replicas of all `tables` has the jobs' kinds of hardware."""
        kinds = self._kinds
        if kinds is None:
            kinds = self._kinds = {}
            for h in self.hosts.values():
                if h.ml:
                    kinds.setdefault(h.region, set()).add(h.gpu_type if h.gpus else None)
        needed = {kind for job in jobs for kind, n in self._demand(job).items() if n}
        return any(
            needed <= have and all(region in self.ready.get(t, ()) for t in tables)
            for region, have in kinds.items()
        )

    def _frozen(self, w: _Workload, final_heal_us: int, end_us: int) -> str | None:
        """Why a running workload is frozen (the module docstring), or None."""
        if w.state != "RUNNING" or w.period_us is None:
            return None
        silent_us = end_us - max(final_heal_us, w.sign_us)
        if silent_us <= FROZEN_PERIODS * w.period_us + self.grace_us:
            return None
        return (
            f"holds machines, no sign of life for {format_us(silent_us)} "
            f"(checkpoints every {format_us(w.period_us)})"
        )

    def _could_run(
        self, w: _Workload, free: dict[str, dict[str, dict[str | None, int]]], since_us: int
    ) -> str | None:
        """Why the workload could run now ('fits REGION'…), or None if it may wait.

        Its data must have been where it fits since `since_us` too, as the room.
        """
        tables = sorted({t for job in w.jobs for t in job.get("input_tables", ())})
        fits = [region for region, clusters in sorted(free.items()) if self._fits(w.jobs, clusters)]
        if not fits:
            return None
        landed = False  # its data arrived where it fits, within the grace
        for region in fits:
            if all(region in self.ready.get(t, ()) for t in tables):
                if all(self.ready_at.get((t, region), 0) <= since_us for t in tables):
                    return f"fits {region}"
                landed = True
        if landed:
            return None
        for region in fits:
            missing = [t for t in tables if region not in self.ready.get(t, ())]
            if any((t, region) in self.copying for t in missing):
                return None  # waiting for a copy in flight
        if not self.moves_data:
            return None  # nothing in this run moves data: it can never run
        if w.state != "WAITING_DATA" and self._has_home(w.jobs, tables):
            return None  # it waits for room where its data is (the module docstring)
        roomy = [r for r in fits if self.storage.has_room(r, tables)]
        if not roomy:
            return None  # no region where it fits can take its tables
        state = "waiting for data" if w.state == "WAITING_DATA" else "data elsewhere"
        return f"{state}, fits {roomy[0]}, no copy of its tables in flight"
