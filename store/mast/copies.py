"""The migration service's copies: cross-region replication orders and their progress.

A copy is `queued` until the service admits it, `copying` while its WAN flow
runs, then `done` (the destination replica is `ready`) or `cancelled`. Its
`bytes_done` is the progress last persisted: a restarted service, or one
whose flow a partition paused, resumes from there instead of from zero.
Bytes are counted per emulated day in `migration_days` for the daily cap.
An ordered copy reserves its bytes in the destination at once (the replica
row is `copying`), so storage quota checks see what is on its way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from store.db import Store
from store.events import store_event

DAY_US = 86_400_000_000

CopyReason = Literal["move", "dr", "colocation", "hot", "on-demand"]


class Copy(msgspec.Struct, frozen=True, kw_only=True):
    """A row of `copies`."""

    id: int
    table: str
    src: str
    dst: str
    size_bytes: int
    bytes_done: int
    priority: int
    deadline_us: int | None
    created_us: int
    reason: str
    workload_id: str | None
    state: str

    @property
    def remaining_bytes(self) -> int:
        return self.size_bytes - self.bytes_done


_COLS = (
    "id, table_name, src, dst, size_bytes, bytes_done, priority, deadline_us, created_us, "
    "reason, workload_id, state"
)


def _copy(row: Sequence[Any]) -> Copy:
    return Copy(**dict(zip(Copy.__struct_fields__, row, strict=True)))


@store_event("migration.order")
async def order(
    store: Store,
    now_us: int,
    table: str,
    src: str,
    dst: str,
    priority: int,
    deadline_us: int | None,
    reason: str,
    workload_id: str | None = None,
) -> int | None:
    """Order a copy of `table` from `src` into `dst`; returns its id.

    Returns None, changing nothing, if `dst` already holds the table (ready or
    on its way): the live copy's higher priority and earlier deadline are
    kept instead.
    """
    async with store.transaction() as conn:
        cur = await conn.execute(
            "SELECT state FROM replicas WHERE table_name = ? AND region = ?", (table, dst)
        )
        if await cur.fetchone() is not None:
            await conn.execute(
                "UPDATE copies SET priority = min(priority, ?), deadline_us = CASE "
                "WHEN deadline_us IS NULL THEN ? WHEN ? IS NULL THEN deadline_us "
                "ELSE min(deadline_us, ?) END "
                "WHERE table_name = ? AND dst = ? AND state IN ('queued', 'copying')",
                (priority, deadline_us, deadline_us, deadline_us, table, dst),
            )
            return None
        cur = await conn.execute("SELECT size_bytes FROM data_tables WHERE name = ?", (table,))
        row = await cur.fetchone()
        if row is None:
            raise KeyError(f"no table {table!r} in the catalog")
        await conn.execute(
            "INSERT INTO replicas (table_name, region, state, ready_us) "
            "VALUES (?, ?, 'copying', NULL)",
            (table, dst),
        )
        cur = await conn.execute(
            "INSERT INTO copies (table_name, src, dst, size_bytes, priority, deadline_us, "
            "created_us, reason, workload_id, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued')",
            (table, src, dst, row[0], priority, deadline_us, now_us, reason, workload_id),
        )
        return cur.lastrowid


async def live(store: Store) -> list[Copy]:
    """Copies queued or copying, oldest first."""
    rows = await store.fetchall(
        f"SELECT {_COLS} FROM copies WHERE state IN ('queued', 'copying') ORDER BY id"
    )
    return [_copy(r) for r in rows]


async def get(store: Store, copy_id: int) -> Copy | None:
    row = await store.fetchone(f"SELECT {_COLS} FROM copies WHERE id = ?", (copy_id,))
    return _copy(row) if row else None


@store_event("migration.progress")
async def progress(store: Store, now_us: int, updates: Sequence[tuple[int, int, str]]) -> int:
    """Persist progress: `(copy id, bytes done, state)` per copy; returns the bytes added.

    Bytes done never go backwards and never exceed the size; the bytes added
    since the last persist count toward the day of `now_us`.
    """
    added = 0
    async with store.transaction() as conn:
        for copy_id, done, state in updates:
            cur = await conn.execute(
                "SELECT bytes_done, size_bytes FROM copies WHERE id = ? "
                "AND state IN ('queued', 'copying')",
                (copy_id,),
            )
            row = await cur.fetchone()
            if row is None:
                continue
            new = min(max(done, row[0]), row[1])
            added += new - row[0]
            await conn.execute(
                "UPDATE copies SET bytes_done = ?, state = ? WHERE id = ?", (new, state, copy_id)
            )
        if added:
            await conn.execute(
                "INSERT INTO migration_days (day, bytes) VALUES (?, ?) "
                "ON CONFLICT (day) DO UPDATE SET bytes = bytes + excluded.bytes",
                (now_us // DAY_US, added),
            )
    return added


@store_event("migration.done")
async def finish(
    store: Store, now_us: int, copy_id: int, lag_s: float
) -> tuple[str, str, int] | None:
    """The last byte is in: the copy is done and its replica `ready`.

    Returns `(table, region, bytes)`: the new ready replica and the bytes not
    persisted before, which count toward today; None if the copy was not live.
    """
    async with store.transaction() as conn:
        cur = await conn.execute(
            "SELECT table_name, dst, size_bytes - bytes_done FROM copies WHERE id = ? "
            "AND state IN ('queued', 'copying')",
            (copy_id,),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        table, dst, rest = row
        await conn.execute(
            "UPDATE copies SET bytes_done = size_bytes, state = 'done', finished_us = ? "
            "WHERE id = ?",
            (now_us, copy_id),
        )
        if rest:
            await conn.execute(
                "INSERT INTO migration_days (day, bytes) VALUES (?, ?) "
                "ON CONFLICT (day) DO UPDATE SET bytes = bytes + excluded.bytes",
                (now_us // DAY_US, rest),
            )
        await conn.execute(
            "UPDATE replicas SET state = 'ready', ready_us = ?, lag_s = ? "
            "WHERE table_name = ? AND region = ?",
            (now_us, lag_s, table, dst),
        )
        return table, dst, rest


@store_event("migration.cancel")
async def cancel(store: Store, now_us: int, copy_id: int) -> tuple[str, str] | None:
    """Give a copy up; its reserved replica goes. Returns `(table, region)` or None."""
    async with store.transaction() as conn:
        cur = await conn.execute(
            "SELECT table_name, dst FROM copies WHERE id = ? AND state IN ('queued', 'copying')",
            (copy_id,),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        await conn.execute(
            "UPDATE copies SET state = 'cancelled', finished_us = ? WHERE id = ?", (now_us, copy_id)
        )
        await conn.execute(
            "DELETE FROM replicas WHERE table_name = ? AND region = ? AND state = 'copying'", row
        )
        return row[0], row[1]


async def day_bytes(store: Store, day: int) -> int:
    row = await store.fetchone("SELECT bytes FROM migration_days WHERE day = ?", (day,))
    return row[0] if row else 0
