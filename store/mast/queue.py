"""The global job queue: tenants, workloads and their states, auctions.

Every workload is in exactly one state at any time. Changes are
compare-and-set transitions (`from` states → `to`), and the writes only a
leader may make (ranking, awards) are fenced by its lease: they take effect
only while the writer holds the role's lease at the epoch it claims, so a
deposed GMS's late write changes nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from store.db import Store
from store.events import store_event
from store.mast.records import QueueEntry, Tenant, WorkloadSpec

QUEUED = ("PENDING", "WAITING", "WAITING_DATA")
# WITHDRAWN: its owner gave up on it before it ever ran (a scenario's `patience`).
ENDED = ("DONE", "FAILED", "WITHDRAWN")
STATES = (*QUEUED, "DISPATCHING", "RUNNING", *ENDED)

_ENC = msgspec.msgpack.Encoder(order="deterministic")
_SPEC = msgspec.msgpack.Decoder(WorkloadSpec)

# A write is fenced by this condition: the writer holds `role` at `epoch` now.
FENCE = (
    "EXISTS (SELECT 1 FROM leases WHERE role = :role AND holder = :holder "
    "AND epoch = :epoch AND expires_at_us > :now)"
)


class Fence(msgspec.Struct, frozen=True):
    """Who writes: the lease (role, holder, epoch) the write is conditional on."""

    role: str
    holder: str
    epoch: int

    def params(self, now_us: int) -> dict[str, Any]:
        return {"role": self.role, "holder": self.holder, "epoch": self.epoch, "now": now_us}


_COLUMNS = (
    "id, tenant, state, priority, credit, within_quota, region, auction_id, gms_epoch, "
    "submitted_us, queued_us, attempts, preemptions, started_us, finished_us, version"
)


@functools.lru_cache(maxsize=1 << 14)
def _entry(row: Sequence[Any]) -> QueueEntry:
    # Keyword by keyword, in `_COLUMNS` order. Cached by row (entries are frozen):
    # the GMS reads its whole queue and every running workload at every scan
    # pass, and most rows are as the pass before left them.
    (wid, tenant, state, priority, credit, within, region, auction, epoch) = row[:9]
    (submitted, queued, attempts, preemptions, started, finished, version) = row[9:]
    return QueueEntry(
        id=wid,
        tenant=tenant,
        state=state,
        priority=priority,
        credit=credit,
        within_quota=bool(within),
        region=region,
        auction_id=auction,
        gms_epoch=epoch,
        submitted_us=submitted,
        queued_us=queued,
        attempts=attempts,
        preemptions=preemptions,
        started_us=started,
        finished_us=finished,
        version=version,
    )


# ---- tenants -----------------------------------------------------------------
async def put_tenants(store: Store, tenants: Iterable[Tenant]) -> None:
    async with store.transaction() as conn:
        await conn.executemany(
            "INSERT OR REPLACE INTO tenants (name, priority, gpu_quota, cpu_quota) "
            "VALUES (?, ?, ?, ?)",
            [(t.name, t.priority, t.gpu_quota, t.cpu_quota) for t in tenants],
        )


async def get_tenants(store: Store) -> list[Tenant]:
    rows = await store.fetchall(
        "SELECT name, priority, gpu_quota, cpu_quota FROM tenants ORDER BY name"
    )
    return [Tenant(name=n, priority=p, gpu_quota=g, cpu_quota=c) for n, p, g, c in rows]


# ---- workloads ------------------------------------------------------------------
@store_event("queue.submit")
async def submit(store: Store, spec: WorkloadSpec, priority: int, now_us: int) -> bool:
    """Enter a workload in the queue as PENDING; False if its id is already there."""
    changed = await store.write(
        "INSERT OR IGNORE INTO workloads (id, tenant, spec, state, submitted_us, queued_us, "
        "priority) VALUES (?, ?, ?, 'PENDING', ?, ?, ?)",
        (spec.id, spec.tenant, _ENC.encode(spec), now_us, now_us, priority),
    )
    return changed == 1


async def get(store: Store, workload_id: str) -> QueueEntry | None:
    row = await store.fetchone(f"SELECT {_COLUMNS} FROM workloads WHERE id = ?", (workload_id,))
    return _entry(row) if row else None


async def spec(store: Store, workload_id: str) -> WorkloadSpec | None:
    row = await store.fetchone("SELECT spec FROM workloads WHERE id = ?", (workload_id,))
    return _SPEC.decode(row[0]) if row else None


# Ids per statement of a read by id (SQLite's default limit on variables is far above).
_IDS_PER_READ = 500


async def _rows_by_id(store: Store, columns: str, workload_ids: Sequence[str]) -> list[Any]:
    """`columns` of the workloads of `workload_ids` the queue holds, in no set order."""
    rows: list[Any] = []
    for start in range(0, len(workload_ids), _IDS_PER_READ):
        chunk = tuple(workload_ids[start : start + _IDS_PER_READ])
        marks = ", ".join("?" for _ in chunk)
        sql = f"SELECT {columns} FROM workloads WHERE id IN ({marks})"
        rows += await store.fetchall(sql, chunk)
    return rows


async def specs(store: Store, workload_ids: Sequence[str]) -> dict[str, WorkloadSpec]:
    rows = await _rows_by_id(store, "id, spec", workload_ids)
    return {wid: _SPEC.decode(blob) for wid, blob in rows}


async def entries(store: Store, workload_ids: Sequence[str]) -> list[QueueEntry]:
    """The queue rows of `workload_ids` (those the queue holds), by id."""
    rows = await _rows_by_id(store, _COLUMNS, workload_ids)
    return sorted((_entry(r) for r in rows), key=lambda e: e.id)


async def in_states(store: Store, states: Sequence[str]) -> list[QueueEntry]:
    marks = ", ".join("?" for _ in states)
    rows = await store.fetchall(
        f"SELECT {_COLUMNS} FROM workloads WHERE state IN ({marks}) ORDER BY id", tuple(states)
    )
    return [_entry(r) for r in rows]


async def count_by_state(store: Store) -> dict[str, int]:
    rows = await store.fetchall("SELECT state, count(*) FROM workloads GROUP BY state")
    return {state: n for state, n in rows}


@store_event("queue.rank")
async def rank(
    store: Store, fence: Fence, now_us: int, ranking: Sequence[tuple[str, int, float, bool]]
) -> bool:
    """Store a GMS-scan pass's ⟨priority, credit⟩ per queued workload (fenced)."""
    async with store.transaction() as conn:
        rows = await conn.execute_fetchall(f"SELECT {FENCE}", fence.params(now_us))
        if not next(iter(rows))[0]:
            return False
        await conn.executemany(
            "UPDATE workloads SET priority = ?, credit = ?, within_quota = ? "
            f"WHERE id = ? AND state IN {QUEUED}",
            [(p, c, int(w), wid) for wid, p, c, w in ranking],
        )
    return True


@store_event("queue.award")
async def award(
    store: Store,
    fence: Fence,
    now_us: int,
    workload_id: str,
    auction_id: int,
    region: str,
    fenced: bool = True,
) -> bool:
    """Compare-and-set a queued workload to DISPATCHING in `region` (fenced by the GMS lease).

    Committed before the award is announced: at most one region holds a
    workload at a time, whatever messages are lost or repeated. `fenced`
    False leaves the lease out of the condition: only the seeded bug
    `gms-award-forgets-epoch` (`actors/mast/zoo.py`) asks for that.
    """
    condition = f"AND {FENCE}" if fenced else ""
    changed = await store.write(
        "UPDATE workloads SET state = 'DISPATCHING', region = :region, auction_id = :auction, "
        "gms_epoch = :epoch, attempts = attempts + 1, version = version + 1 "
        f"WHERE id = :id AND state IN {QUEUED} {condition}",
        {**fence.params(now_us), "region": region, "auction": auction_id, "id": workload_id},
    )
    return changed == 1


@store_event("queue.transition")
async def transition(
    store: Store,
    workload_id: str,
    from_states: tuple[str, ...],
    to_state: str,
    now_us: int,
    auction_id: int | None = None,
    preempted: bool = False,
) -> bool:
    """Move a workload between states if it is in one of `from_states`.

    With `auction_id`, only the dispatch of that auction may move it (a late
    report about an earlier dispatch changes nothing). Going back to the queue
    clears the region and restarts the queueing clock; RUNNING stamps the
    start, DONE/FAILED/WITHDRAWN the end. Only a workload that never ran can
    be withdrawn.
    """
    if to_state not in STATES or not set(from_states) <= set(STATES):
        raise ValueError(f"unknown state in {from_states} → {to_state}")
    sets = ["state = :to", "version = version + 1"]
    if to_state in QUEUED:
        # The queueing clock (a workload's age in its credit) restarts only when it
        # comes back to the queue, not at every pass that leaves it waiting.
        queued = ", ".join(f"'{s}'" for s in QUEUED)
        sets += [
            "region = NULL",
            f"queued_us = CASE WHEN state IN ({queued}) THEN queued_us ELSE :now END",
        ]
    if to_state == "RUNNING":
        sets.append("started_us = :now")
    if to_state in ENDED:
        sets.append("finished_us = :now")
    if preempted:
        sets.append("preemptions = preemptions + 1")
    marks = ", ".join(f":f{i}" for i in range(len(from_states)))
    where = f"id = :id AND state IN ({marks})"
    params: dict[str, Any] = {"to": to_state, "now": now_us, "id": workload_id}
    params.update({f"f{i}": s for i, s in enumerate(from_states)})
    if to_state == "WITHDRAWN":
        where += " AND started_us IS NULL"
    if auction_id is not None:
        where += " AND auction_id = :auction"
        params["auction"] = auction_id
    changed = await store.write(f"UPDATE workloads SET {', '.join(sets)} WHERE {where}", params)
    return changed == 1


# ---- auctions -----------------------------------------------------------------------
@store_event("auction.open")
async def open_auction(store: Store, fence: Fence, now_us: int, workload_id: str) -> int | None:
    """Record a new auction and return its id (None if the GMS no longer leads)."""
    # One statement: the fence check and the insert cannot be separated by anything.
    rows = await store.write_returning(
        "INSERT INTO auctions (workload_id, gms_epoch, opened_us) "
        f"SELECT :workload, :epoch, :now WHERE {FENCE} RETURNING id",
        {**fence.params(now_us), "workload": workload_id},
    )
    return int(rows[0][0]) if rows else None


@store_event("auction.close")
async def close_auction(
    store: Store, auction_id: int, now_us: int, outcome: str, winner: str | None
) -> None:
    await store.write(
        "UPDATE auctions SET closed_us = ?, outcome = ?, winner = ? "
        "WHERE id = ? AND closed_us IS NULL",
        (now_us, outcome, winner, auction_id),
    )
