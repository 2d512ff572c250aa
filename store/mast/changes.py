"""A cluster's changes, for the schedulers that keep a working copy of it.

The `fleet_changes` table (MAST schema script 4) logs, per cluster, every
job whose row or allocations changed and every machine whose row changed,
each with the sequence number of its latest change. `changes` says what
changed after a reader's last number; `rows_for` reads the machine,
allocation and job rows the reader needs to bring its copy up to date
(`actors/common/cm/ledger.py`, `ClusterLedger.sync`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from store.db import Store
from store.mast.fleet import (
    JOB_COLS,
    MACHINE_COLS,
    Allocation,
    JobRow,
    allocation_of,
    machine_of,
)
from store.mast.records import Machine


class ClusterChanges(msgspec.Struct, frozen=True):
    """What changed in a cluster after change `after`, up to change `seq`: machines, jobs."""

    seq: int
    hosts: tuple[str, ...]
    jobs: tuple[tuple[str, str], ...]


class ClusterRows(msgspec.Struct, frozen=True):
    """The rows a working copy re-reads for some hosts and jobs (`rows_for`).

    `machines` are the hosts' machine rows (whatever cluster they are in now);
    `allocations` every allocation on those hosts, on the jobs' hosts and on
    the hosts of the jobs found there; `jobs` the rows of all those jobs.
    """

    machines: tuple[tuple[Machine, bool], ...]
    allocations: tuple[Allocation, ...]
    jobs: tuple[JobRow, ...]
    # The hosts every allocation of which is in `allocations`.
    complete_hosts: tuple[str, ...]


# SQLite allows a few thousand bound values per statement; lists go in chunks.
_CHUNK = 500


def _keys(part: Sequence[tuple[str, str]]) -> tuple[str, tuple[str, ...]]:
    """A VALUES list of (workload, job) pairs and its parameters (joined, so indexed)."""
    return ", ".join("(?, ?)" for _ in part), tuple(x for key in part for x in key)


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


async def change_seq(store: Store) -> int:
    """The sequence number of the latest change of any cluster (0 before the first)."""
    row = await store.fetchone("SELECT n FROM fleet_seq")
    return int(row[0]) if row else 0


async def changes(store: Store, cluster: str, after: int) -> ClusterChanges:
    """The machines and jobs of `cluster` changed after change `after` (`fleet_changes`)."""
    rows = await store.fetchall(
        "SELECT seq, host, workload_id, job FROM fleet_changes WHERE cluster = ? AND seq > ? "
        "ORDER BY seq",
        (cluster, after),
    )
    hosts = sorted({h for _, h, _, _ in rows if h})
    jobs = sorted({(w, j) for _, h, w, j in rows if not h})
    return ClusterChanges(rows[-1][0] if rows else after, tuple(hosts), tuple(jobs))


async def rows_for(
    store: Store,
    machine_hosts: Sequence[str],
    hosts: Sequence[str],
    jobs: Sequence[tuple[str, str]],
) -> ClusterRows:
    """The rows a working copy needs: the machines of `machine_hosts`, every
    allocation on `hosts` and on the machines `jobs` hold, and the jobs found."""
    machines: list[tuple[Machine, bool]] = []
    for part in _chunks(machine_hosts):
        marks = ", ".join("?" for _ in part)
        for row in await store.fetchall(
            f"SELECT {MACHINE_COLS}, healthy FROM machines WHERE host IN ({marks}) ORDER BY host",
            tuple(part),
        ):
            machines.append((machine_of(row[:-1]), bool(row[-1])))
    # Hosts whose holders matter: the changed ones and every host of the jobs.
    touched = set(hosts)
    for part in _chunks(jobs):
        keys, flat = _keys(part)
        for (host,) in await store.fetchall(
            f"WITH k(w, j) AS (VALUES {keys}) SELECT DISTINCT a.host FROM k "
            "JOIN allocations a ON a.workload_id = k.w AND a.job = k.j",
            flat,
        ):
            touched.add(host)
    allocations: list[Allocation] = []
    for part in _chunks(sorted(touched)):
        marks = ", ".join("?" for _ in part)
        allocations.extend(
            allocation_of(row)
            for row in await store.fetchall(
                "SELECT host, workload_id, job, gpus, cpu, since_us FROM allocations "
                f"WHERE host IN ({marks})",
                tuple(part),
            )
        )
    # The jobs found on those hosts may hold others too: all their allocations count.
    # Those of `jobs` are in already: every host they hold was read whole above.
    asked = set(jobs)
    found = sorted({(a.workload_id, a.job) for a in allocations} - asked)
    seen = {(a.host, a.workload_id, a.job) for a in allocations}
    for part in _chunks(found):
        values, flat = _keys(part)
        for row in await store.fetchall(
            f"WITH k(w, j) AS (VALUES {values}) SELECT a.host, a.workload_id, a.job, a.gpus, "
            "a.cpu, a.since_us FROM k JOIN allocations a ON a.workload_id = k.w AND a.job = k.j",
            flat,
        ):
            if (row[0], row[1], row[2]) not in seen:
                allocations.append(allocation_of(row))
    keys = sorted(asked.union(found))
    rows: list[JobRow] = []
    job_cols = ", ".join(f"j.{c.strip()}" for c in JOB_COLS.split(","))
    for part in _chunks(keys):
        values, flat = _keys(part)
        for row in await store.fetchall(
            f"WITH k(w, j) AS (VALUES {values}) SELECT {job_cols} FROM k "
            "JOIN jobs j ON j.workload_id = k.w AND j.job = k.j",
            flat,
        ):
            rows.append(JobRow(**dict(zip(JobRow.__struct_fields__, row, strict=True))))
    allocations.sort(key=lambda a: (a.host, a.workload_id, a.job))
    rows.sort(key=lambda r: (r.workload_id, r.job))
    return ClusterRows(tuple(machines), tuple(allocations), tuple(rows), tuple(sorted(touched)))
