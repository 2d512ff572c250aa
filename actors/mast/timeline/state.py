"""The system's state at one instant: the value `fold.StateFold` builds from a trace.

`SystemState.tables` is `name → key → row`, string keys and JSON-able rows:
the MAST store's own tables as they stood (workloads, jobs, allocations,
leases, replicas, copies, machines, clusters) and what only the trace knows
(actors down or paused, nodes down, fault windows, flows, the latest
auctions, the violation count). `store_tables` gives the store's tables
exactly as `SELECT *` would have at that instant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from store.mast.records import WorkloadSpec

# The store tables the fold rebuilds, with each one's primary key columns.
STORE_KEYS: dict[str, tuple[str, ...]] = {
    "workloads": ("id",),
    "jobs": ("workload_id", "job"),
    "allocations": ("host", "workload_id", "job"),
    "leases": ("role",),
    "replicas": ("table_name", "region"),
}
# The player shows the latest auctions only: the store keeps every one (a day
# of quickstart opens ~17,000), which would make every snapshot of the page huge.
AUCTIONS_KEPT = 12
SEP = "\x1f"  # joins a composite key; no name from a scenario holds it in practice

_SPEC_ENC = msgspec.msgpack.Encoder(order="deterministic")


def key(*parts: Any) -> str:
    """The string key of a composite primary key (JSON maps need string keys)."""
    return SEP.join(str(p) for p in parts)


@dataclass
class SystemState:
    """The folded state: `tables[name][key] = row`, at `t_us` after event `seq`."""

    t_us: int = 0
    seq: int = 0
    tables: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # Workload specs as traced (for the `workloads.spec` column only; the player has none).
    specs: dict[str, Any] = field(default_factory=dict)
    table_sizes: dict[str, int] = field(default_factory=dict)
    homes: dict[str, str] = field(default_factory=dict)
    violations: int = 0

    def table(self, name: str) -> dict[str, dict[str, Any]]:
        return self.tables.setdefault(name, {})

    def leaders(self) -> dict[str, tuple[str, int]]:
        """Role → (holder, epoch) of every lease whose holder still held it at `t_us`."""
        return {
            role: (row["holder"], row["epoch"])
            for role, row in sorted(self.table("leases").items())
            if row["expires_at_us"] > self.t_us
        }

    def store_tables(self) -> dict[str, list[dict[str, Any]]]:
        """The store's tables as `SELECT *` gives them, rows ordered by primary key."""
        out: dict[str, list[dict[str, Any]]] = {}
        for name, cols in STORE_KEYS.items():
            rows = [_store_row(self, name, row) for row in self.table(name).values()]
            out[name] = sorted(rows, key=lambda r, c=cols: tuple(r[k] for k in c))
        return out


def _store_row(state: SystemState, name: str, row: dict[str, Any]) -> dict[str, Any]:
    if name == "workloads":
        spec = msgspec.convert(state.specs[row["id"]], WorkloadSpec)
        return {**_only(row, _WORKLOAD_COLUMNS), "spec": _SPEC_ENC.encode(spec)}
    if name == "allocations":
        return {**_only(row, _ALLOC_COLUMNS), "cpu": int(row["cpu"])}
    if name == "replicas":
        return _only(row, ("table_name", "region", "state", "ready_us", "lag_s"))
    if name == "jobs":
        return _only(row, _JOB_COLUMNS)
    return dict(row)


_WORKLOAD_COLUMNS = (
    "id",
    "tenant",
    "state",
    "submitted_us",
    "queued_us",
    "priority",
    "credit",
    "within_quota",
    "region",
    "auction_id",
    "gms_epoch",
    "attempts",
    "preemptions",
    "started_us",
    "finished_us",
    "version",
)
_JOB_COLUMNS = (
    "workload_id",
    "job",
    "cluster",
    "attempt",
    "state",
    "priority",
    "checkpoint_us",
    "started_us",
    "cm_epoch",
)
_ALLOC_COLUMNS = ("host", "workload_id", "job", "gpus", "cpu", "since_us")


def _only(row: dict[str, Any], cols: tuple[str, ...]) -> dict[str, Any]:
    return {c: row[c] for c in cols}
