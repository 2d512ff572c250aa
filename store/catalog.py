"""The data catalog: tables, their home region, and replicas per region.

A replica is `copying` until its migration completes, then `ready`. The
fast path only asks whether a region holds ready replicas of every table a
workload reads (Tetris proper comes with the slow path).
"""

from __future__ import annotations

from collections.abc import Iterable

from store.db import Store
from store.events import store_event
from store.records import DataTable


async def put_tables(store: Store, tables: Iterable[DataTable], now_us: int = 0) -> None:
    """Register tables; the home region and every listed replica start `ready`."""
    tables = list(tables)
    async with store.transaction() as conn:
        await conn.executemany(
            "INSERT OR REPLACE INTO data_tables (name, size_bytes, home_region) VALUES (?, ?, ?)",
            [(t.name, t.size_bytes, t.home_region) for t in tables],
        )
        await conn.executemany(
            "INSERT OR REPLACE INTO replicas (table_name, region, state, ready_us) "
            "VALUES (?, ?, 'ready', ?)",
            [(t.name, r, now_us) for t in tables for r in sorted({t.home_region, *t.replicas})],
        )


async def ready_tables(store: Store, region: str) -> set[str]:
    """Names of the tables with a ready replica in `region`."""
    rows = await store.fetchall(
        "SELECT table_name FROM replicas WHERE region = ? AND state = 'ready'", (region,)
    )
    return {name for (name,) in rows}


async def tables(store: Store) -> list[DataTable]:
    rows = await store.fetchall(
        "SELECT t.name, t.size_bytes, t.home_region, "
        "(SELECT group_concat(region) FROM (SELECT region FROM replicas r "
        " WHERE r.table_name = t.name AND r.state = 'ready' ORDER BY region)) "
        "FROM data_tables t ORDER BY t.name"
    )
    return [
        DataTable(name=n, size_bytes=s, home_region=h, replicas=tuple((regs or "").split(",")))
        for n, s, h, regs in rows
    ]


@store_event("catalog.replica")
async def set_replica(store: Store, table: str, region: str, state: str, now_us: int) -> None:
    await store.write(
        "INSERT INTO replicas (table_name, region, state, ready_us) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (table_name, region) DO UPDATE SET state = excluded.state, "
        "ready_us = excluded.ready_us",
        (table, region, state, now_us if state == "ready" else None),
    )
