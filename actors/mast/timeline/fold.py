"""The state fold: a run's trace, event by event, into a `SystemState`.

`StateFold.feed` takes every stored event in trace order. The store's own
tables are rebuilt from the `setup` facts (tenants, machines, cluster
membership, the catalog) and then only from the committed store writes the
kernel traced (`store.events`): each write is re-applied exactly as its
repository function applies it (`store/mast/queue.py`, `fleet.py`,
`catalog.py`, `copies.py`, `store/leases.py`), and a write whose result says
it changed nothing (a fenced write refused, a compare-and-set that missed)
is skipped. So at the run's end the fold's `workloads`, `jobs`,
`allocations`, `leases` and `replicas` equal the database's tables
(`store_tables`; `tests/system/test_view_state.py` checks every built-in
scenario), and at any earlier time they are what the database held then.

Beside those, what only the trace knows: which control-plane actors are
down or paused, which regions and machines are down (a `fault` down/up),
the fault windows open, partitions between regions, WAN flows, the latest
auctions with each region's bid or reason to abstain (bids and abstentions
are message deliveries: a trace of level "decisions" has the winners'
bids only), and the count of invariant violations so far.

Every table is `name → key → row` with string keys and JSON-able rows, and
every change goes through `_put`/`_drop`, which note the key: `changes()`
hands the player (`recording.py`) exactly what one event changed. Rows are
replaced, never mutated in place, so a snapshot is a shallow copy per table.
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors.mast.timeline.state import AUCTIONS_KEPT, SystemState, key
from emulator.run.events import named
from emulator.trace import fault_key
from store.mast.queue import ENDED, QUEUED
from store.trace import TraceRow

# Actors the player does not list: one per job attempt (hundreds), and the client.
_UNLISTED = ("agent/", "job/", "client")
_JSON = msgspec.json.Encoder(order="deterministic")


class StateFold:
    """Feeds trace events into a `SystemState`, noting which rows each one changed.

    `store_machines` are the `machines` rows of the run database, for a
    system whose setup facts name no cluster membership (the cluster
    system's one static cluster): `(host, region, gpu_type, gpus, cluster)`.
    """

    def __init__(
        self,
        store_machines: list[tuple[str, str, str | None, int, str | None]] | None = None,
        clusters: list[tuple[str, str, bool]] | None = None,
    ) -> None:
        self.state = SystemState()
        self._changed: dict[tuple[str, str], None] = {}
        self._store_machines = store_machines or []
        # (workload, job) → keys of its allocations: a release frees them all.
        self._held: dict[tuple[str, str], set[str]] = {}
        for cid, region, ml in clusters or []:
            self._put("clusters", cid, {"id": cid, "region": region, "ml": ml})

    # -- changes --------------------------------------------------------------------------
    def _put(self, table: str, k: str, row: dict[str, Any]) -> None:
        self.state.table(table)[k] = row
        self._changed[(table, k)] = None

    def _update(self, table: str, k: str, **changes: Any) -> None:
        rows = self.state.table(table)
        old = rows.get(k)
        if old is not None:
            self._put(table, k, {**old, **changes})

    def _drop(self, table: str, k: str) -> None:
        if self.state.table(table).pop(k, None) is not None:
            self._changed[(table, k)] = None

    def changes(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        """What the events fed since the last call changed: (table, key, row or None if gone)."""
        out = [(t, k, self.state.tables.get(t, {}).get(k)) for t, k in self._changed]
        self._changed.clear()
        return out

    # -- the fold ----------------------------------------------------------------------------
    def feed(self, row: TraceRow) -> None:
        s = self.state
        s.t_us, s.seq = row.t_us, row.seq
        kind = row.kind
        if kind == "store":
            handler = _STORE.get(row.type)
            if handler is not None:
                handler(self, row.t_us, named(row).fields)
        elif kind == "setup":
            self._setup(row.type, row.payload)
        elif kind == "decision":
            self._decision(row)
        elif kind == "deliver":
            msg = row.payload.get("msg") if isinstance(row.payload, dict) else None
            if isinstance(msg, dict) and msg.get("type") in ("Bid", "Abstain"):
                self._bid(msg)
        elif kind == "fault":
            self._fault(row)
        elif kind in ("start", "restart", "unpause"):
            self._actor(row.dst, "up")
        elif kind in ("crash", "gave-up", "exit"):
            self._actor(row.dst, "down")
        elif kind == "pause":
            self._actor(row.dst, "paused")
        elif kind == "violation":
            s.violations += 1
            self._put("counters", "violations", {"n": s.violations})
        elif kind == "flow":
            self._flow(row)

    # -- setup facts ---------------------------------------------------------------------------
    def _setup(self, fact: str, payload: Any) -> None:
        if fact == "machines":
            for host, (region, gpu_type, gpus) in payload.items():
                self._put(
                    "machines",
                    host,
                    {
                        "host": host,
                        "region": region,
                        "gpu_type": gpu_type,
                        "gpus": gpus,
                        "cluster": None,
                        "healthy": True,
                    },
                )
            # A system that records no membership keeps its clusters as the store has them.
            for host, _region, _type, _gpus, cluster in self._store_machines:
                if cluster is not None:
                    self._update("machines", host, cluster=cluster)
        elif fact == "clusters":
            # Where each machine started: the store's membership (above) is where it ended.
            for host, machine in list(self.state.table("machines").items()):
                if machine["cluster"] is not None:
                    self._update("machines", host, cluster=None)
            for cluster, hosts in payload.items():
                for host in hosts:
                    self._update("machines", host, cluster=cluster)
        elif fact == "catalog":
            for table, regions in payload.items():
                for region in regions:
                    self._put(
                        "replicas",
                        key(table, region),
                        {
                            "table_name": table,
                            "region": region,
                            "state": "ready",
                            "ready_us": 0,
                            "lag_s": 0.0,
                        },
                    )
        elif fact == "storage":
            self.state.table_sizes.update(payload.get("sizes", {}))

    # -- the queue ---------------------------------------------------------------------------
    def _submit(self, t_us: int, f: dict[str, Any]) -> None:
        if not f["result"]:
            return
        spec = f["spec"]
        wid = spec["id"]
        self.state.specs[wid] = spec
        self._put(
            "workloads",
            wid,
            {
                "id": wid,
                "tenant": spec["tenant"],
                "state": "PENDING",
                "submitted_us": f["now_us"],
                "queued_us": f["now_us"],
                "priority": f["priority"],
                "credit": 0.0,
                "within_quota": 0,
                "region": None,
                "auction_id": None,
                "gms_epoch": None,
                "attempts": 0,
                "preemptions": 0,
                "started_us": None,
                "finished_us": None,
                "version": 0,
                "gpus": sum(j.get("gpus", 0) for j in spec["jobs"]),
            },
        )

    def _rank(self, t_us: int, f: dict[str, Any]) -> None:
        if not f["result"]:
            return
        rows = self.state.table("workloads")
        for wid, priority, credit, within in f["ranking"]:
            row = rows.get(wid)
            if row is not None and row["state"] in QUEUED:
                self._put(
                    "workloads",
                    wid,
                    {
                        **row,
                        "priority": priority,
                        "credit": float(credit),
                        "within_quota": int(within),
                    },
                )

    def _award(self, t_us: int, f: dict[str, Any]) -> None:
        if not f["result"]:
            return
        wid = f["workload_id"]
        row = self.state.table("workloads").get(wid)
        if row is None:
            return
        self._put(
            "workloads",
            wid,
            {
                **row,
                "state": "DISPATCHING",
                "region": f["region"],
                "auction_id": f["auction_id"],
                "gms_epoch": f["fence"]["epoch"],
                "attempts": row["attempts"] + 1,
                "version": row["version"] + 1,
            },
        )

    def _transition(self, t_us: int, f: dict[str, Any]) -> None:
        if not f["result"]:
            return
        wid, to, now = f["workload_id"], f["to_state"], f["now_us"]
        row = self.state.table("workloads").get(wid)
        if row is None:
            return
        new = {**row, "state": to, "version": row["version"] + 1}
        if to in QUEUED:
            new["region"] = None
            if row["state"] not in QUEUED:
                new["queued_us"] = now
        if to == "RUNNING":
            new["started_us"] = now
        if to in ENDED:
            new["finished_us"] = now
        if f.get("preempted"):
            new["preemptions"] = row["preemptions"] + 1
        self._put("workloads", wid, new)

    def _open_auction(self, t_us: int, f: dict[str, Any]) -> None:
        aid = f["result"]
        if aid is None:
            return
        self._put(
            "auctions",
            str(aid),
            {
                "id": aid,
                "workload_id": f["workload_id"],
                "gms_epoch": f["fence"]["epoch"],
                "opened_us": f["now_us"],
                "closed_us": None,
                "outcome": None,
                "winner": None,
                "bids": {},
                "reasons": [],
            },
        )
        auctions = self.state.table("auctions")
        if len(auctions) > AUCTIONS_KEPT:
            self._drop("auctions", min(auctions, key=int))

    def _close_auction(self, t_us: int, f: dict[str, Any]) -> None:
        row = self.state.table("auctions").get(str(f["auction_id"]))
        if row is not None and row["closed_us"] is None:
            self._put(
                "auctions",
                str(f["auction_id"]),
                {**row, "closed_us": f["now_us"], "outcome": f["outcome"], "winner": f["winner"]},
            )

    def _bid(self, msg: dict[str, Any]) -> None:
        k = str(msg.get("auction_id"))
        row = self.state.table("auctions").get(k)
        if row is None:
            return
        offer = msg["score"] if msg["type"] == "Bid" else str(msg.get("reason"))
        self._put("auctions", k, {**row, "bids": {**row["bids"], str(msg["region"]): offer}})

    def _decision(self, row: TraceRow) -> None:
        p = row.payload
        if not isinstance(p, dict) or "auction" not in p:
            return
        k = str(p["auction"])
        auction = self.state.table("auctions").get(k)
        if auction is None:
            return
        if row.type in ("auction.award", "auction.lost-cas"):
            bids = {**auction["bids"], **{str(r): s for r, s in p.get("bids", {}).items()}}
            self._put("auctions", k, {**auction, "bids": bids, "winner": p.get("winner")})
        elif row.type == "auction.none":
            self._put("auctions", k, {**auction, "reasons": list(p.get("reasons", []))})

    # -- the fleet ---------------------------------------------------------------------------
    def _membership(self, t_us: int, f: dict[str, Any]) -> None:
        if not f["result"]:
            return
        for host, _old, new in f["moves"]:
            self._update("machines", host, cluster=new)

    def _health(self, t_us: int, f: dict[str, Any]) -> None:
        for host in f["hosts"]:
            self._update("machines", host, healthy=bool(f["healthy"]))

    def _start_job(self, t_us: int, f: dict[str, Any]) -> None:
        result = f["result"]
        if result is None:
            return
        wid, job, now = f["workload_id"], f["job_name"], f["now_us"]
        for host, n in f["gpus"]:
            self._alloc(host, wid, job, n, False, now)
        for host in f["cpu_hosts"]:
            self._alloc(host, wid, job, 0, True, now)
        attempt, saved_us = result
        self._put(
            "jobs",
            key(wid, job),
            {
                "workload_id": wid,
                "job": job,
                "cluster": f["cluster"],
                "attempt": attempt,
                "state": "STARTING",
                "priority": f["priority"],
                "checkpoint_us": saved_us,
                "started_us": now,
                "cm_epoch": f["fence"]["epoch"],
            },
        )

    def _alloc(self, host: str, wid: str, job: str, gpus: int, cpu: bool, now: int) -> None:
        k = key(host, wid, job)
        row = {"host": host, "workload_id": wid, "job": job, "gpus": gpus, "cpu": cpu}
        self._put("allocations", k, {**row, "since_us": now})
        self._held.setdefault((wid, job), set()).add(k)

    def _job_state(self, t_us: int, f: dict[str, Any]) -> None:
        if f["result"]:
            self._update("jobs", key(f["workload_id"], f["job_name"]), state=f["state"])

    def _checkpoint(self, t_us: int, f: dict[str, Any]) -> None:
        if f["result"]:
            k = key(f["workload_id"], f["job_name"])
            self._update("jobs", k, checkpoint_us=f["progress_us"])

    def _release(self, t_us: int, f: dict[str, Any]) -> None:
        if not f["result"]:
            return
        wid, job = f["workload_id"], f["job_name"]
        k = key(wid, job)
        row = self.state.table("jobs").get(k)
        attempt = f.get("attempt")
        # The fence held (True): the row changed iff it exists at that attempt.
        if row is not None and (attempt is None or row["attempt"] == attempt):
            self._put("jobs", k, {**row, "state": f["state"]})
        for held in sorted(self._held.pop((wid, job), ())):
            self._drop("allocations", held)

    def _leftovers(self, t_us: int, f: dict[str, Any]) -> None:
        for host, wid, job in f["result"] or []:
            self._drop("allocations", key(host, wid, job))
            self._held.get((wid, job), set()).discard(key(host, wid, job))

    # -- the catalog and copies -------------------------------------------------------------
    def _replica(self, t_us: int, f: dict[str, Any]) -> None:
        k = key(f["table"], f["region"])
        old = self.state.table("replicas").get(k)
        ready = f["now_us"] if f["state"] == "ready" else None
        lag = old["lag_s"] if old is not None else 0.0
        self._put(
            "replicas",
            k,
            {
                "table_name": f["table"],
                "region": f["region"],
                "state": f["state"],
                "ready_us": ready,
                "lag_s": lag,
            },
        )

    def _home(self, t_us: int, f: dict[str, Any]) -> None:
        if f["result"]:
            self.state.homes[f["table"]] = f["region"]

    def _delete_replica(self, t_us: int, f: dict[str, Any]) -> None:
        if f["result"]:
            self._drop("replicas", key(f["table"], f["region"]))

    def _order(self, t_us: int, f: dict[str, Any]) -> None:
        cid = f["result"]
        table, dst = f["table"], f["dst"]
        if cid is None:
            # `dst` holds the table already: a live copy's priority and deadline may tighten.
            for k, c in self.state.table("copies").items():
                if c["table"] == table and c["dst"] == dst and c["state"] in ("queued", "copying"):
                    deadline, given = c["deadline_us"], f["deadline_us"]
                    if deadline is None or (given is not None and given < deadline):
                        deadline = given
                    priority = min(c["priority"], f["priority"])
                    self._put("copies", k, {**c, "priority": priority, "deadline_us": deadline})
            return
        self._put(
            "replicas",
            key(table, dst),
            {
                "table_name": table,
                "region": dst,
                "state": "copying",
                "ready_us": None,
                "lag_s": 0.0,
            },
        )
        self._put(
            "copies",
            str(cid),
            {
                "id": cid,
                "table": table,
                "src": f["src"],
                "dst": dst,
                "size_bytes": self.state.table_sizes.get(table, 0),
                "bytes_done": 0,
                "priority": f["priority"],
                "deadline_us": f["deadline_us"],
                "created_us": f["now_us"],
                "reason": f["reason"],
                "workload_id": f.get("workload_id"),
                "state": "queued",
                "finished_us": None,
            },
        )

    def _progress(self, t_us: int, f: dict[str, Any]) -> None:
        for cid, done, state in f["updates"]:
            c = self.state.table("copies").get(str(cid))
            if c is None or c["state"] not in ("queued", "copying"):
                continue
            new = min(max(done, c["bytes_done"]), c["size_bytes"] or done)
            self._put("copies", str(cid), {**c, "bytes_done": new, "state": state})

    def _copy_done(self, t_us: int, f: dict[str, Any]) -> None:
        result = f["result"]
        if result is None:
            return
        c = self.state.table("copies").get(str(f["copy_id"]))
        if c is not None:
            done = c["size_bytes"] or c["bytes_done"]
            self._put(
                "copies",
                str(f["copy_id"]),
                {**c, "bytes_done": done, "state": "done", "finished_us": f["now_us"]},
            )
        table, dst, _rest = result
        self._update(
            "replicas", key(table, dst), state="ready", ready_us=f["now_us"], lag_s=f["lag_s"]
        )

    def _cancel(self, t_us: int, f: dict[str, Any]) -> None:
        result = f["result"]
        if result is None:
            return
        k = str(f["copy_id"])
        c = self.state.table("copies").get(k)
        if c is not None:
            self._put("copies", k, {**c, "state": "cancelled", "finished_us": f["now_us"]})
        table, region = result
        replica = self.state.table("replicas").get(key(table, region))
        if replica is not None and replica["state"] == "copying":
            self._drop("replicas", key(table, region))

    # -- leases ------------------------------------------------------------------------------
    def _acquire(self, t_us: int, f: dict[str, Any]) -> None:
        lease = f["result"]
        if lease is not None:
            self._put("leases", lease["role"], dict(lease))

    def _release_lease(self, t_us: int, f: dict[str, Any]) -> None:
        if not f["result"]:
            return
        row = self.state.table("leases").get(f["role"])
        if row is not None:
            expires = min(row["expires_at_us"], f["now_us"])
            self._put("leases", f["role"], {**row, "expires_at_us": expires})

    # -- the world around -------------------------------------------------------------------
    def _actor(self, address: str, state: str) -> None:
        if not address or address.startswith(_UNLISTED):
            return
        old = self.state.table("actors").get(address)
        if old is None or old["state"] != state:
            self._put("actors", address, {"address": address, "state": state})

    def _fault(self, row: TraceRow) -> None:
        if row.type in ("down", "up"):
            # The kernel's own down/up of a node: a region or a machine.
            if row.type == "down":
                self._put("down", row.dst, {"node": row.dst, "since_us": row.t_us})
            else:
                self._drop("down", row.dst)
            return
        action, _, phase = row.type.rpartition(".")
        if not action:
            return
        target = _JSON.encode(fault_key(row.payload)).decode()
        k = key(action, target)
        if phase == "start":
            p = row.payload if isinstance(row.payload, dict) else {}
            self._put(
                "faults",
                k,
                {
                    "action": action,
                    "target": target,
                    "since_us": row.t_us,
                    "regions": p.get("regions") or p.get("between"),
                },
            )
        elif phase == "end":
            self._drop("faults", k)
            if action in ("heal", "final-heal"):
                # A heal ends every window still open.
                for k2 in list(self.state.table("faults")):
                    self._drop("faults", k2)

    def _flow(self, row: TraceRow) -> None:
        f = named(row).fields
        k = str(f["flow_id"])
        if row.type == "start":
            self._put(
                "flows",
                k,
                {
                    "id": f["flow_id"],
                    "src": f["src_region"],
                    "dst": f["dst_region"],
                    "bytes": f["nbytes"],
                    "since_us": row.t_us,
                },
            )
        elif row.type in ("cancel", "done"):
            self._drop("flows", k)


_STORE = {
    "queue.submit": StateFold._submit,
    "queue.rank": StateFold._rank,
    "queue.award": StateFold._award,
    "queue.transition": StateFold._transition,
    "auction.open": StateFold._open_auction,
    "auction.close": StateFold._close_auction,
    "fleet.membership": StateFold._membership,
    "fleet.health": StateFold._health,
    "fleet.start": StateFold._start_job,
    "fleet.state": StateFold._job_state,
    "fleet.checkpoint": StateFold._checkpoint,
    "fleet.release": StateFold._release,
    "fleet.leftovers": StateFold._leftovers,
    "catalog.replica": StateFold._replica,
    "catalog.home": StateFold._home,
    "catalog.delete": StateFold._delete_replica,
    "migration.order": StateFold._order,
    "migration.progress": StateFold._progress,
    "migration.done": StateFold._copy_done,
    "migration.cancel": StateFold._cancel,
    "lease.acquire": StateFold._acquire,
    "lease.release": StateFold._release_lease,
}
