"""Store lifecycle: opening, migrations, PRAGMAs, transactions, refusing foreign files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from store import NestedTransactionError, Store, StoreError
from store.db import PAGE_CACHE_KIB
from store.mast.schema import MAST_SCHEMA
from store.migrations import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

TABLES = {
    "run_meta",
    "trace_chunks",
    "metrics",
    "leases",
    "lease_history",
    "lease_effects",
    "kv",
    "violations",
}


async def pragma(store: Store, name: str) -> object:
    row = await store.fetchone(f"PRAGMA {name}")
    assert row is not None
    return row[0]


async def test_open_creates_parent_dir_and_schema(store: Store, db_path: Path) -> None:
    assert db_path.exists()
    assert store.path == str(db_path)
    assert await pragma(store, "user_version") == SCHEMA_VERSION == len(MIGRATIONS)
    assert await pragma(store, "application_id") == APPLICATION_ID
    names = {r[0] for r in await store.fetchall("SELECT name FROM sqlite_master")}
    assert names >= TABLES


async def test_pragmas_wal_normal_foreign_keys(store: Store) -> None:
    assert await pragma(store, "journal_mode") == "wal"
    assert await pragma(store, "synchronous") == 1  # NORMAL
    assert await pragma(store, "foreign_keys") == 1
    # A page cache sized for a day of meta-day's live tables (negative: KiB).
    assert await pragma(store, "cache_size") == -PAGE_CACHE_KIB
    assert store.conn.isolation_level is None


async def test_reopen_is_idempotent(db_path: Path) -> None:
    async with Store.open_ctx(db_path) as s:
        await s.write("INSERT INTO kv VALUES ('ns', 'k', x'01')")
    async with Store.open_ctx(db_path) as s:
        assert await pragma(s, "user_version") == SCHEMA_VERSION
        assert await s.fetchall("SELECT namespace, key FROM kv") == [("ns", "k")]


async def test_close_is_idempotent(db_path: Path) -> None:
    s = await Store.open(db_path)
    await s.close()
    await s.close()
    assert s.closed


async def test_open_ctx_closes_on_exception(db_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        async with Store.open_ctx(db_path) as s:
            raise RuntimeError("boom")
    assert s.closed


async def test_transaction_commits(store: Store) -> None:
    async with store.transaction() as conn:
        await conn.execute("INSERT INTO kv VALUES ('ns', 'a', x'01')")
        await conn.execute("INSERT INTO kv VALUES ('ns', 'b', x'02')")
    assert not store.conn.in_transaction
    assert len(await store.fetchall("SELECT * FROM kv")) == 2


async def test_transaction_rolls_back_on_exception(store: Store) -> None:
    with pytest.raises(ValueError, match="abort"):
        async with store.transaction() as conn:
            await conn.execute("INSERT INTO kv VALUES ('ns', 'a', x'01')")
            raise ValueError("abort")
    assert not store.conn.in_transaction
    assert not store.in_transaction
    assert await store.fetchall("SELECT * FROM kv") == []


async def test_transaction_rolls_back_on_sql_error(store: Store) -> None:
    with pytest.raises(sqlite3.IntegrityError):
        async with store.transaction() as conn:
            await conn.execute("INSERT INTO kv VALUES ('ns', 'a', x'01')")
            await conn.execute("INSERT INTO kv VALUES ('ns', 'a', x'02')")
    assert await store.fetchall("SELECT * FROM kv") == []
    # The store is usable afterwards.
    async with store.transaction() as conn:
        await conn.execute("INSERT INTO kv VALUES ('ns', 'a', x'03')")
    assert await store.fetchall("SELECT value FROM kv") == [(b"\x03",)]


async def test_nested_transaction_is_refused(store: Store) -> None:
    async with store.transaction() as conn:
        await conn.execute("INSERT INTO kv VALUES ('ns', 'outer', x'01')")
        with pytest.raises(NestedTransactionError, match="not reentrant"):
            async with store.transaction():
                pass
        with pytest.raises(NestedTransactionError):
            await store.write("DELETE FROM kv")
    # The outer transaction was not disturbed.
    assert await store.fetchall("SELECT key FROM kv") == [("outer",)]


async def test_not_an_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are not the bytes of an SQLite database\n" * 100)
    with pytest.raises(StoreError, match="not an SQLite database"):
        await Store.open(path)


async def test_foreign_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    c.close()
    with pytest.raises(StoreError, match="not a mastemu run database"):
        await Store.open(path)
    with sqlite3.connect(path) as c:
        # Still in rollback-journal mode: nothing was written to it.
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    c.close()


async def test_foreign_application_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    c = sqlite3.connect(path)
    c.execute("PRAGMA user_version = 1")
    c.close()
    with pytest.raises(StoreError, match="application_id"):
        await Store.open(path)


async def test_newer_schema_version_is_refused(db_path: Path) -> None:
    async with Store.open_ctx(db_path):
        pass
    c = sqlite3.connect(db_path)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.close()
    with pytest.raises(StoreError, match=r"newer than this mastemu knows"):
        await Store.open(db_path)


async def test_memory_store(tmp_path: Path) -> None:
    async with Store.open_ctx(":memory:") as s:
        assert await pragma(s, "user_version") == SCHEMA_VERSION
    assert list(tmp_path.iterdir()) == []


async def test_memory_stores_start_fresh_and_migrated_whatever_was_opened_before(
    db_path: Path,
) -> None:
    # In-memory databases start as copies of one migrated earlier in the process:
    # a copy must hold the schema and none of another store's rows.
    async with Store.open_ctx(db_path, (MAST_SCHEMA,)) as on_disk:
        expected = await on_disk.fetchall("SELECT type, name, sql FROM sqlite_master ORDER BY 2")
    for _ in range(2):
        async with Store.open_ctx(":memory:", (MAST_SCHEMA,)) as s:
            schema = await s.fetchall("SELECT type, name, sql FROM sqlite_master ORDER BY 2")
            assert schema == expected
            assert await s.fetchall("SELECT * FROM tenants") == []
            assert await s.fetchall("SELECT name, version FROM schema_parts") == [
                ("mast", len(MAST_SCHEMA.migrations))
            ]
            await s.write("INSERT INTO tenants VALUES ('t', 1, 0, 0)")
            await s.write("INSERT INTO kv VALUES ('n', 'k', 'v')")
            assert await s.fetchall("SELECT name FROM tenants") == [("t",)]
    async with Store.open_ctx(":memory:") as bare:
        names = {r[0] for r in await bare.fetchall("SELECT name FROM sqlite_master")}
        assert "tenants" not in names and names >= TABLES
        assert await bare.fetchall("SELECT * FROM kv") == []


# ---- schema parts: a system's tables, versioned apart from the run database's ----
async def test_a_store_opened_without_parts_has_only_the_run_databases_tables(
    tmp_path: Path,
) -> None:
    async with Store.open_ctx(tmp_path / "bare.db") as s:
        names = {r[0] for r in await s.fetchall("SELECT name FROM sqlite_master")}
        assert "workloads" not in names and "trace_chunks" in names
        assert await s.fetchall("SELECT * FROM schema_parts") == []


async def test_parts_are_created_once_and_recorded_with_their_version(db_path: Path) -> None:
    for _ in range(2):
        async with Store.open_ctx(db_path, (MAST_SCHEMA,)) as s:
            assert await s.fetchall("SELECT name, version FROM schema_parts") == [
                ("mast", len(MAST_SCHEMA.migrations))
            ]
            assert await s.fetchone("SELECT count(*) FROM workloads") == (0,)


async def test_a_part_newer_than_this_mastemu_is_refused(db_path: Path) -> None:
    async with Store.open_ctx(db_path, (MAST_SCHEMA,)):
        pass
    c = sqlite3.connect(db_path)
    c.execute("UPDATE schema_parts SET version = 99 WHERE name = 'mast'")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match=r"mast tables are at version 99, newer"):
        await Store.open(db_path, (MAST_SCHEMA,))


async def test_a_database_from_before_schema_parts_keeps_its_mast_tables(db_path: Path) -> None:
    # Before parts, MAST's three scripts were the run database's versions 2-4.
    db_path.parent.mkdir(parents=True)
    c = sqlite3.connect(db_path)
    c.executescript(
        f"{MIGRATIONS[0]}\n{chr(10).join(MAST_SCHEMA.migrations[:3])}\nPRAGMA user_version = 4;"
    )
    c.execute("INSERT INTO tenants VALUES ('t', 1, 8, 8)")
    c.commit()
    c.close()
    async with Store.open_ctx(db_path, (MAST_SCHEMA,)) as s:
        assert await pragma(s, "user_version") == SCHEMA_VERSION
        assert await s.fetchall("SELECT name, version FROM schema_parts") == [
            ("mast", len(MAST_SCHEMA.migrations))
        ]
        assert await s.fetchall("SELECT name FROM tenants") == [("t",)]


def _at_mast_version(db_path: Path, version: int) -> sqlite3.Connection:
    """A new run database with MAST's tables as schema version `version` left them."""
    db_path.parent.mkdir(parents=True)
    c = sqlite3.connect(db_path)
    c.executescript(
        f"{MIGRATIONS[0]}\n{chr(10).join(MAST_SCHEMA.migrations[:version])}\n"
        f"PRAGMA user_version = {SCHEMA_VERSION};\n"
        "CREATE TABLE schema_parts (name TEXT PRIMARY KEY, version INTEGER NOT NULL);\n"
        f"INSERT INTO schema_parts VALUES ('mast', {version});"
    )
    return c


async def test_machines_and_allocations_move_to_keyed_tables_with_their_rows_and_triggers(
    db_path: Path,
) -> None:
    # A database at MAST version 5: rowid tables, one machine, one allocation.
    c = _at_mast_version(db_path, 5)
    c.execute("INSERT INTO machines VALUES ('h1', 'r', 'k', 'fd', 'A100', 8, 64, 512, 'c0', 1)")
    c.execute("INSERT INTO allocations VALUES ('h1', 'w', 'j', 4, 0, 7)")
    c.commit()
    c.close()
    async with Store.open_ctx(db_path, (MAST_SCHEMA,)) as s:
        assert await s.fetchall("SELECT version FROM schema_parts") == [
            (len(MAST_SCHEMA.migrations),)
        ]
        for table in ("machines", "allocations"):
            sql = await s.fetchone("SELECT sql FROM sqlite_master WHERE name = ?", (table,))
            assert sql is not None and "WITHOUT ROWID" in sql[0]
        assert await s.fetchall("SELECT host, gpus, cluster FROM machines") == [("h1", 8, "c0")]
        assert await s.fetchall("SELECT * FROM allocations") == [("h1", "w", "j", 4, 0, 7)]
        # The change log's triggers came back: a health change and a freed machine are logged.
        await s.write("UPDATE machines SET healthy = 0 WHERE host = 'h1'")
        await s.write("DELETE FROM allocations WHERE host = 'h1'")
        logged = await s.fetchall("SELECT host, workload_id FROM fleet_changes ORDER BY seq")
        assert logged == [("h1", ""), ("", "w")]


async def test_the_queue_keeps_its_rows_and_takes_withdrawn_workloads_from_version_7(
    db_path: Path,
) -> None:
    c = _at_mast_version(db_path, 6)
    c.execute(
        "INSERT INTO workloads (id, tenant, spec, state, submitted_us, queued_us, priority, "
        "attempts, started_us) VALUES ('w1', 't', x'00', 'RUNNING', 5, 6, 3, 2, 9)"
    )
    with pytest.raises(sqlite3.IntegrityError):  # version 6 knows no WITHDRAWN
        c.execute("UPDATE workloads SET state = 'WITHDRAWN'")
    c.commit()
    c.close()
    async with Store.open_ctx(db_path, (MAST_SCHEMA,)) as s:
        assert await s.fetchall("SELECT version FROM schema_parts") == [(7,)]
        row = await s.fetchone(
            "SELECT id, state, submitted_us, queued_us, priority, attempts, started_us "
            "FROM workloads"
        )
        assert row == ("w1", "RUNNING", 5, 6, 3, 2, 9)
        await s.write("UPDATE workloads SET state = 'WITHDRAWN'")
        indexes = await s.fetchall("SELECT name FROM sqlite_master WHERE tbl_name = 'workloads'")
        assert ("workloads_state",) in indexes
