"""The data catalog: tables, their home region, and replicas per region.

A replica is `copying` until its migration completes, then `ready`. The
fast path only asks whether a region holds ready replicas of every table a
workload reads (Tetris proper comes with the slow path).
"""

from __future__ import annotations

from collections.abc import Iterable

from store.db import Store
from store.events import store_event
from store.mast.records import DataTable


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


async def ready_tables_since(
    store: Store, region: str, seen: int | None
) -> tuple[int, set[str] | None]:
    """`ready_tables` unless no replica changed since the catalog change `seen`.

    Returns the catalog's change count now and the tables (None: as when
    `seen` was read). Replicas change a few hundred times a day while every
    RMS asks at every scan pass.
    """
    row = await store.fetchone("SELECT n FROM catalog_seq")
    seq = int(row[0]) if row else 0
    if seq == seen:
        return seq, None
    return seq, await ready_tables(store, region)


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


async def put_regions(store: Store, storage_bytes: dict[str, int]) -> None:
    """Each region's warehouse capacity (the storage hard quota, MAST expression 4)."""
    async with store.transaction() as conn:
        await conn.executemany(
            "INSERT OR REPLACE INTO regions (name, storage_bytes) VALUES (?, ?)",
            sorted(storage_bytes.items()),
        )


async def storage(store: Store) -> dict[str, tuple[int, int]]:
    """Region → (bytes held or on their way, capacity in bytes)."""
    rows = await store.fetchall(
        "SELECT g.name, g.storage_bytes, coalesce(sum(t.size_bytes), 0) FROM regions g "
        "LEFT JOIN replicas r ON r.region = g.name "
        "LEFT JOIN data_tables t ON t.name = r.table_name GROUP BY g.name ORDER BY g.name"
    )
    return {name: (used, cap) for name, cap, used in rows}


async def placement(store: Store) -> dict[str, tuple[int, str, dict[str, str]]]:
    """Table → (size, home region, {region: replica state}) for every table."""
    out: dict[str, tuple[int, str, dict[str, str]]] = {}
    for name, size, home in await store.fetchall(
        "SELECT name, size_bytes, home_region FROM data_tables ORDER BY name"
    ):
        out[name] = (size, home, {})
    for name, region, state in await store.fetchall(
        "SELECT table_name, region, state FROM replicas ORDER BY table_name, region"
    ):
        out[name][2][region] = state
    return out


@store_event("catalog.home")
async def set_home(store: Store, table: str, region: str, now_us: int) -> bool:
    """Make `region`, which must hold a ready replica, the table's home."""
    changed = await store.write(
        "UPDATE data_tables SET home_region = ? WHERE name = ? AND EXISTS (SELECT 1 FROM "
        "replicas WHERE table_name = ? AND region = ? AND state = 'ready')",
        (region, table, table, region),
    )
    return changed == 1


@store_event("catalog.delete")
async def delete_replica(store: Store, table: str, region: str, now_us: int) -> bool:
    """Drop a ready replica that is not the table's home (never the last copy)."""
    changed = await store.write(
        "DELETE FROM replicas WHERE table_name = ? AND region = ? AND state = 'ready' "
        "AND region != (SELECT home_region FROM data_tables WHERE name = ?)",
        (table, region, table),
    )
    return changed == 1
