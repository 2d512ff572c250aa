"""A MAST (or cluster-system) run as a Chrome trace, grouped the way the system is built.

Processes: `global` (the GMS replicas, the migration service, the client,
and the tracks of what spans the world: faults, auctions, WAN copies,
violations), then one per region (its RMS and CM replicas, and per
cluster one `<cluster> jobs` thread where its job agents are folded: one
thread per cluster, not one per agent). Each actor is a thread.

Spans, with the durations the trace gives (emulated µs):

- an auction, from its opening (`auction.open`) to its close (`auction.close`:
  the award, or no bid), on the `auctions` thread;
- a leadership term, from `lease.leader` to `lease.lost`, the holder's crash,
  or the next holder of the role, on the holder's thread;
- a job's run on its cluster, from `fleet.start` to `fleet.release`, and a
  checkpoint/stop inside it, from the order (`fleet.state` CHECKPOINTING) to
  the release;
- a WAN copy, from its order (`migration.order`) to `migration.done` or
  `migration.cancel`, and each bulk flow carrying it;
- a fault window, from its start to its end (or the heal).

Every other decision is an instant on the thread of the actor that made it;
crashes, restarts and pauses on the actor's; violations a line across the
whole trace. At level "messages" every delivery is also an arrow from the
sender's thread to the receiver's (an agent's: its cluster's jobs thread).

Jobs, stops, copies and flows overlap one another, which complete slices
on one thread may not (the format requires them to nest): they are async
spans, which Perfetto stacks on a track named after the span, so they are
named after their track (`us-east/c0 jobs`, `copy ap-south→us-east`) and
say which job or table they are in their args.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

# The repositories whose writes are read by name below (their parameter names
# are recorded when the module defining them is imported).
import store.leases
import store.mast.copies
import store.mast.fleet
import store.mast.queue  # noqa: F401
from emulator.run.chrome import ChromeTrace, FaultWindows, jsonable, message_type
from emulator.run.events import named
from emulator.trace import TraceEvent

GLOBAL = "global"
# Actors with a region: `rms/<region>/<i>`, `cm/<region>/<cluster>/<i>`, `ras/<region>/…`.
_REGIONAL = ("rms", "cm", "ras")
# Actors folded into their cluster's jobs thread: `agent/<workload>/<job>/<attempt>`,
# and the cluster system's `job/<id>`.
_AGENTS = ("agent", "job")
# Kernel events drawn as instants on the actor's thread (agents' starts and exits are
# the job spans' ends already).
_ACTOR_MARKS = ("crash", "restart", "pause", "unpause", "gave-up", "actor-error", "start")


class MastExport:
    """`emulator.registry.Exporter` for the runs kept in MAST's tables (MAST and cluster)."""

    def chrome_events(self, events: Iterable[TraceEvent], level: str) -> Iterator[dict[str, Any]]:
        # The level is the events given: at "decisions" the emulator passes no deliveries.
        return _Export().run(events)


class _Export:
    """One export: the threads named so far and every span still open."""

    def __init__(self) -> None:
        self.trace = ChromeTrace()
        self.trace.process(GLOBAL, sort=0)
        self.faults = self.trace.thread(GLOBAL, "faults", sort=0)
        self.auctions = self.trace.thread(GLOBAL, "auctions", sort=1)
        self.wan = self.trace.thread(GLOBAL, "WAN copies", sort=2)
        self.violations = self.trace.thread(GLOBAL, "violations", sort=3)
        self.windows = FaultWindows()
        # (workload, job) → cluster of its latest start; clusters seen (a single
        # cluster takes the cluster system's `job/…` agents).
        self.job_cluster: dict[tuple[str, str], str] = {}
        self.clusters: set[str] = set()
        # What is open: auction id → (opened, workload); holder → (since, role, epoch);
        # role → holder; (workload, job) → (since, cluster, attempt) and stop orders;
        # copy id → (since, args); flow id → (since, src, dst, bytes).
        self.open_auctions: dict[int, tuple[int, str]] = {}
        self.terms: dict[str, tuple[int, str, int]] = {}
        self.leader_of: dict[str, str] = {}
        self.runs: dict[tuple[str, str], tuple[int, str, int]] = {}
        self.stops: dict[tuple[str, str], int] = {}
        self.copies: dict[int, tuple[int, dict[str, Any]]] = {}
        self.flows: dict[int, tuple[int, str, str, int]] = {}

    # -- where things go -------------------------------------------------------------------
    def regions(self, names: Iterable[str]) -> None:
        for i, region in enumerate(sorted(set(names))):
            self.trace.process(region, sort=1 + i)

    def where(self, address: str) -> tuple[int, int]:
        parts = address.split("/")
        if parts[0] in _AGENTS:
            cluster = self.job_cluster.get((parts[1], parts[2])) if len(parts) >= 4 else None
            if cluster is None and len(self.clusters) == 1:
                cluster = next(iter(self.clusters))
            if cluster is None:
                return self.trace.thread(GLOBAL, "jobs", sort=4)
            return self.jobs_thread(cluster)
        if parts[0] in _REGIONAL and len(parts) >= 3:
            if parts[0] == "cm" and len(parts) >= 4:
                self.clusters.add(f"{parts[1]}/{parts[2]}")
            # RMS first, then the CMs, then the clusters' jobs (by name within each).
            return self.trace.thread(parts[1], address, sort=10 if parts[0] == "rms" else 20)
        return self.trace.thread(GLOBAL, address or "kernel", sort=5)

    def jobs_thread(self, cluster: str) -> tuple[int, int]:
        return self.trace.thread(cluster.split("/", 1)[0], f"{cluster} jobs", sort=30)

    # -- the trace ----------------------------------------------------------------------------
    def run(self, events: Iterable[TraceEvent]) -> Iterator[dict[str, Any]]:
        end_us = 0
        for e in events:
            end_us = e.t_us
            self.feed(e)
            yield from self.trace.events
            self.trace.events.clear()
        self.finish(end_us)
        yield from self.trace.events
        yield from self.trace.metadata()

    def feed(self, e: TraceEvent) -> None:
        for start, end, action, label in self.windows.feed(e):
            self.trace.async_span(self.faults, label, start, end, "fault", {"action": action})
        kind = e.kind
        if kind == "store":
            handler = _STORE.get(e.type)
            if handler is not None:
                handler(self, e.t_us, named(e).fields)
        elif kind == "decision":
            self.decision(e)
        elif kind == "deliver" and isinstance(e.payload, dict):
            sent = int(e.payload.get("sent_us", e.t_us))
            name = message_type(e)
            self.trace.message(self.where(e.src), self.where(e.dst), name, sent, e.t_us, e.seq)
        elif kind == "drop":
            reason = named(e).fields.get("reason")
            where = self.where(e.dst or e.src)
            self.trace.instant(where, f"drop {e.type} ({reason})", e.t_us, "drop")
        elif kind == "flow":
            self.flow(e)
        elif kind == "violation":
            args = {"message": jsonable(e.payload)}
            self.trace.instant(self.violations, "violation", e.t_us, "violation", args, scope="g")
        elif kind == "setup" and e.type == "machines" and isinstance(e.payload, dict):
            self.regions(str(v[0]) for v in e.payload.values() if isinstance(v, list | tuple))
        elif kind in _ACTOR_MARKS and e.dst and not e.dst.startswith(("agent/", "job/")):
            if kind in ("crash", "gave-up"):
                self.end_term(e.dst, e.t_us, kind)
            args = None if e.payload is None else {"payload": jsonable(e.payload)}
            self.trace.instant(self.where(e.dst), kind, e.t_us, kind, args)

    def finish(self, end_us: int) -> None:
        for start, end, action, label in self.windows.finish(end_us):
            self.trace.async_span(self.faults, label, start, end, "fault", {"action": action})
        for t_us, action, label in self.windows.instants:
            self.trace.instant(self.faults, label, t_us, "fault", {"action": action})
        for holder in sorted(self.terms):
            self.end_term(holder, end_us, "run end")
        for aid in sorted(self.open_auctions):
            opened, wid = self.open_auctions[aid]
            args = {"auction": aid, "workload": wid, "outcome": "open at the run's end"}
            self.trace.span(self.auctions, f"auction {wid}", opened, end_us, "auction", args)
        for k in sorted(self.runs):
            self.end_run(k, end_us, "running at the run's end")
        for cid in sorted(self.copies):
            self.end_copy(cid, end_us, "unfinished")
        for fid in sorted(self.flows):
            self.end_flow(fid, end_us, "unfinished")

    # -- decisions and leadership ------------------------------------------------------------
    def decision(self, e: TraceEvent) -> None:
        p = e.payload if isinstance(e.payload, dict) else {}
        if e.type == "lease.leader":
            role, epoch = str(p.get("role")), int(p.get("epoch", 0))
            previous = self.leader_of.get(role)
            if previous is not None and previous != e.src:
                self.end_term(previous, e.t_us, f"{e.src} leads")
            self.end_term(e.src, e.t_us, "re-elected")
            self.terms[e.src] = (e.t_us, role, epoch)
            self.leader_of[role] = e.src
        elif e.type == "lease.lost":
            self.end_term(e.src, e.t_us, "lost")
        args = {k: jsonable(v) for k, v in p.items()} if p else None
        self.trace.instant(self.where(e.src), e.type, e.t_us, "decision", args)

    def end_term(self, holder: str, t_us: int, why: str) -> None:
        term = self.terms.pop(holder, None)
        if term is None:
            return
        since, role, epoch = term
        if self.leader_of.get(role) == holder:
            del self.leader_of[role]
        args = {"role": role, "epoch": epoch, "ended": why}
        self.trace.span(self.where(holder), f"leader {role} e{epoch}", since, t_us, "lease", args)

    # -- auctions -------------------------------------------------------------------------------
    def open_auction(self, t_us: int, f: Any) -> None:
        if f["result"] is not None:
            self.open_auctions[int(f["result"])] = (int(f["now_us"]), str(f["workload_id"]))

    def close_auction(self, t_us: int, f: Any) -> None:
        opened = self.open_auctions.pop(int(f["auction_id"]), None)
        if opened is None:
            return
        since, wid = opened
        winner = f.get("winner")
        args = {
            "auction": f["auction_id"],
            "workload": wid,
            "outcome": f.get("outcome"),
            "winner": winner,
        }
        name = f"auction {wid} → {winner}" if winner else f"auction {wid}"
        self.trace.span(self.auctions, name, since, int(f["now_us"]), "auction", args)

    # -- jobs on their clusters ------------------------------------------------------------------
    def start_job(self, t_us: int, f: Any) -> None:
        if f["result"] is None:
            return
        k = (str(f["workload_id"]), str(f["job_name"]))
        cluster = str(f["cluster"])
        self.clusters.add(cluster)
        self.job_cluster[k] = cluster
        self.end_run(k, int(f["now_us"]), "started again")
        self.runs[k] = (int(f["now_us"]), cluster, int(f["result"][0]))

    def job_state(self, t_us: int, f: Any) -> None:
        if f["result"] and f["state"] == "CHECKPOINTING":
            self.stops.setdefault((str(f["workload_id"]), str(f["job_name"])), int(f["now_us"]))

    def release_job(self, t_us: int, f: Any) -> None:
        if f["result"]:
            self.end_run((str(f["workload_id"]), str(f["job_name"])), int(f["now_us"]), f["state"])

    def end_run(self, k: tuple[str, str], t_us: int, outcome: str) -> None:
        run = self.runs.pop(k, None)
        ordered = self.stops.pop(k, None)
        if run is None:
            return
        since, cluster, attempt = run
        where = self.jobs_thread(cluster)
        args = {"workload": k[0], "job": k[1], "attempt": attempt, "outcome": outcome}
        self.trace.async_span(where, f"{cluster} jobs", since, t_us, "job", args)
        if ordered is not None:
            stop = {"workload": k[0], "job": k[1], "attempt": attempt, "outcome": outcome}
            self.trace.async_span(where, f"{cluster} stops", ordered, t_us, "stop", stop)

    # -- WAN copies and flows -------------------------------------------------------------------
    def order_copy(self, t_us: int, f: Any) -> None:
        if f["result"] is None:
            return
        args = {
            "copy": f["result"],
            "table": f["table"],
            "src": f["src"],
            "dst": f["dst"],
            "reason": f.get("reason"),
            "workload": f.get("workload_id"),
        }
        self.copies[int(f["result"])] = (int(f["now_us"]), args)

    def copy_done(self, t_us: int, f: Any) -> None:
        if f["result"] is not None:
            self.end_copy(int(f["copy_id"]), int(f["now_us"]), "done")

    def copy_cancelled(self, t_us: int, f: Any) -> None:
        if f["result"] is not None:
            self.end_copy(int(f["copy_id"]), int(f["now_us"]), "cancelled")

    def end_copy(self, cid: int, t_us: int, outcome: str) -> None:
        opened = self.copies.pop(cid, None)
        if opened is not None:
            since, args = opened
            name = f"copy {args['src']}→{args['dst']}"
            self.trace.async_span(self.wan, name, since, t_us, "copy", {**args, "outcome": outcome})

    def flow(self, e: TraceEvent) -> None:
        f = named(e).fields
        fid = int(f["flow_id"])
        if e.type == "start":
            self.flows[fid] = (e.t_us, str(f["src_region"]), str(f["dst_region"]), f["nbytes"])
        elif e.type in ("done", "cancel"):
            self.end_flow(fid, e.t_us, e.type)

    def end_flow(self, fid: int, t_us: int, outcome: str) -> None:
        opened = self.flows.pop(fid, None)
        if opened is not None:
            since, src, dst, nbytes = opened
            args = {"flow": fid, "bytes": nbytes, "outcome": outcome}
            self.trace.async_span(self.wan, f"flow {src}→{dst}", since, t_us, "flow", args)


_STORE = {
    "auction.open": _Export.open_auction,
    "auction.close": _Export.close_auction,
    "fleet.start": _Export.start_job,
    "fleet.state": _Export.job_state,
    "fleet.release": _Export.release_job,
    "migration.order": _Export.order_copy,
    "migration.done": _Export.copy_done,
    "migration.cancel": _Export.copy_cancelled,
}
