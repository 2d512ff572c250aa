"""The run database: one SQLite file, one connection, explicit transactions.

A `Store` models the durable side of an emulated run: MAST's shared replicated
database plus the run's trace and metrics. There is exactly one connection
per run so that SQLite sees the same statements in the same order on every
run (docs/kernel-notes.md: a second connection lets thread completion order
leak into the trace); it runs in the kernel's thread (`store/connection.py`).

What must stay true:
- the connection is in autocommit mode (`isolation_level=None`); every write
  happens inside an explicit `BEGIN IMMEDIATE ... COMMIT` (`transaction()`)
  or is a single statement, which SQLite commits on its own;
- the connection is always closed (`open_ctx`, or `close()` in a `finally`);
- `leases` mirrors the `leases` table, never an uncommitted state; it may
  run ahead of the table only by deferred writes (`defer`), which the store
  writes, in order, before its next statement of any kind — so no statement
  ever sees the difference;
- in group-commit mode (`begin_group`, used by a run), writes accumulate in
  one open transaction that `commit_group` commits together with the trace
  chunk describing them: a process killed mid-run leaves a database whose
  emulated state and trace end at the same event (`transaction()` then nests
  as a savepoint, and the lease mirror may run ahead of the file by the
  uncommitted group, which a killed process loses along with the mirror).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from store.connection import Connection, connect
from store.lease_view import Lease, LeaseView
from store.migrations import APPLICATION_ID, LEGACY_PART, MIGRATIONS, SchemaPart

MEMORY = ":memory:"

# A fresh in-memory database starts as a copy of one this process migrated
# with the same scripts: migrating takes ~7 ms (table rebuilds, triggers), a
# copy well under one, and unit tests open hundreds (one per generated example).
_MEMORY_TEMPLATES: dict[tuple[tuple[str, ...], tuple[SchemaPart, ...]], bytes] = {}
# The page cache of a run's connection, in KiB (see `Store._configure`).
PAGE_CACHE_KIB = 64 * 1024
# Pages the WAL may hold before SQLite checkpoints it (see `Store._configure`): 40 MB.
WAL_CHECKPOINT_PAGES = 10_000


class StoreError(Exception):
    """The database is in a state this code cannot work with.

    Examples: the file is not a mastemu run database, its schema is newer than
    this version of mastemu knows, or run metadata is missing.
    """


class NestedTransactionError(StoreError):
    """A transaction was opened while another one is open on the same Store.

    A bug in the caller, not a database state: repository calls each commit
    their own transaction and must not be composed inside one another.
    """


class Store:
    """One run database: a single connection plus the lease mirror.

    Open it with `await Store.open(path)` (and `await store.close()` in a
    `finally`) or `async with Store.open_ctx(path) as store:`. The SQL helpers
    (`write`, `insert`, `fetchall`, `fetchone`) are for the repository modules
    of this package; other code calls those modules, never SQL.
    """

    conn: Connection
    path: str
    leases: LeaseView
    # Seeded protocol bugs the run enables (`emulator/bugs.py`): a repository
    # function asks `bug(name)` next to the right behaviour, as an actor does.
    bugs: frozenset[str] = frozenset()

    def __init__(self, conn: Connection, path: str) -> None:
        # Use `open`; the constructor only assembles an already opened store.
        self.conn = conn
        self.path = path
        self.leases = LeaseView()
        self._in_transaction = False
        self._group = False
        self._closed = False
        self._deferred: list[tuple[str, tuple[Any, ...]]] = []

    # -- lifecycle -------------------------------------------------------------

    @classmethod
    async def open(cls, path: str | os.PathLike[str], parts: Sequence[SchemaPart] = ()) -> Store:
        """Open (creating if needed) the run database at `path` and migrate it.

        `parts` are the schema parts (a system's own tables) to create or
        bring up to date as well; a reader of an existing database needs none.

        Raises StoreError if the file is not a mastemu run database or was
        written by a newer mastemu. `":memory:"` gives a private in-memory
        database (no WAL), handy for unit tests.
        """
        spath = os.fspath(path)
        if spath != MEMORY:
            Path(spath).parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = await connect(spath)
        except sqlite3.Error as e:
            raise StoreError(f"{spath}: cannot open as an SQLite database: {e}") from e
        store = cls(conn, spath)
        template_key = (tuple(MIGRATIONS), tuple(parts)) if spath == MEMORY else None
        try:
            template = _MEMORY_TEMPLATES.get(template_key) if template_key else None
            if template is not None:
                conn.deserialize(template)
            await store._check_identity()
            await store._configure()
            await store._migrate()
            for part in parts:
                await store._migrate_part(part)
            if template_key and template is None:
                _MEMORY_TEMPLATES[template_key] = conn.serialize()
            await store._load_leases()
        except BaseException:
            # The worker thread must be stopped even when opening fails.
            await store.close()
            raise
        return store

    @classmethod
    @asynccontextmanager
    async def open_ctx(
        cls, path: str | os.PathLike[str], parts: Sequence[SchemaPart] = ()
    ) -> AsyncIterator[Store]:
        """`async with Store.open_ctx(path) as store:` — closed on every exit."""
        store = await cls.open(path, parts)
        try:
            yield store
        finally:
            await store.close()

    async def close(self) -> None:
        """Close the connection. Idempotent; buffered writers are not flushed.

        Deferred writes (`defer`) are written first.
        """
        if self._closed:
            return
        self._closed = True
        try:
            await self._write_deferred()
        finally:
            await self.conn.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- transactions ----------------------------------------------------------

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """`BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` if the body raises.

        IMMEDIATE takes the write lock at BEGIN, so a read-then-write inside
        the body cannot be overtaken by another writer. Not reentrant.
        """
        if self._in_transaction:
            raise NestedTransactionError(
                f"{self.path}: a transaction is already open on this Store; "
                "transactions are not reentrant and a Store serves one task at a time"
            )
        self._in_transaction = True
        try:
            await self._write_deferred()
            if self._group:
                # Inside the open group: all or nothing as a savepoint; the
                # group's next commit makes it durable.
                await self.conn.execute("SAVEPOINT tx")
                try:
                    yield self.conn
                except BaseException:
                    await self.conn.execute("ROLLBACK TO tx")
                    await self.conn.execute("RELEASE tx")
                    raise
                await self.conn.execute("RELEASE tx")
                return
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                await self._rollback_if_open()
                raise
            try:
                await self.conn.execute("COMMIT")
            except BaseException:
                # A failed COMMIT can leave the transaction open (SQLITE_BUSY).
                await self._rollback_if_open()
                raise
        finally:
            self._in_transaction = False

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction

    # -- group commit ------------------------------------------------------------

    async def begin_group(self) -> None:
        """Open a group: later writes commit only at `commit_group`/`end_group`.

        A run uses it so that its emulated state and its trace become durable
        together (module docstring). Also fewer commits than one per write.
        """
        if self._group or self._in_transaction:
            raise NestedTransactionError(f"{self.path}: begin_group inside a transaction")
        await self._write_deferred()
        await self.conn.execute("BEGIN IMMEDIATE")
        self._group = True

    async def commit_group(self) -> None:
        """Commit everything written since the group (re)opened, and reopen it."""
        if not self._group:
            return
        await self._write_deferred()
        await self.conn.execute("COMMIT")
        await self.conn.execute("BEGIN IMMEDIATE")

    async def end_group(self) -> None:
        """Commit the group and go back to one commit per write. Idempotent."""
        if not self._group:
            return
        await self._write_deferred()
        self._group = False
        await self.conn.execute("COMMIT")

    @property
    def in_group(self) -> bool:
        return self._group

    def seed_bugs(self, names: frozenset[str]) -> None:
        """Enable the run's seeded bugs (the runner's, when it builds the kernel)."""
        self.bugs = frozenset(names)

    def bug(self, name: str) -> bool:
        """Whether the run enables the seeded bug `name` (always False in an ordinary run)."""
        return name in self.bugs

    def defer(self, sql: str, params: tuple[Any, ...]) -> None:
        """Queue a single-statement write whose outcome the caller already knows.

        It is written before the store's next statement of any kind (reads
        included), after the writes deferred before it; consecutive writes of
        the same statement go in one `executemany`, one round trip to
        SQLite instead of one each. For writes that cannot fail
        and whose result is known from memory (a lease renewal, see
        `leases.acquire`); a database error surfaces in the next statement.
        """
        self._deferred.append((sql, params))

    async def _write_deferred(self) -> None:
        deferred = self._deferred
        if not deferred:
            return
        self._deferred = []
        start = 0
        for end in range(1, len(deferred) + 1):
            if end == len(deferred) or deferred[end][0] != deferred[start][0]:
                await self.conn.executemany(deferred[start][0], [p for _, p in deferred[start:end]])
                start = end

    async def write(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        """Run one write statement as its own transaction; return rows changed.

        A single statement is atomic in autocommit mode, so this costs one
        statement instead of three.
        """
        if self._in_transaction:
            raise NestedTransactionError(
                f"{self.path}: single-statement write issued inside an open transaction"
            )
        await self._write_deferred()
        cur = await self.conn.execute(sql, params)
        return cur.rowcount

    async def insert(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        """Run one INSERT as its own transaction; return the new row's rowid."""
        if self._in_transaction:
            raise NestedTransactionError(
                f"{self.path}: single-statement insert issued inside an open transaction"
            )
        await self._write_deferred()
        cur = await self.conn.execute(sql, params)
        if cur.lastrowid is None:
            raise StoreError(f"{self.path}: INSERT produced no row: {sql}")
        return cur.lastrowid

    async def write_returning(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Run one write statement with a RETURNING clause as its own transaction.

        Returns the rows it returned: one round trip for a conditional write
        and its outcome.
        """
        if self._in_transaction:
            raise NestedTransactionError(
                f"{self.path}: single-statement write issued inside an open transaction"
            )
        await self._write_deferred()
        return list(await self.conn.execute_fetchall(sql, params))

    async def fetchall(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Run a query and return all rows as tuples (one round trip)."""
        await self._write_deferred()
        return list(await self.conn.execute_fetchall(sql, params))

    async def fetchone(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> tuple[Any, ...] | None:
        await self._write_deferred()
        rows = await self.conn.execute_fetchall(sql, params)
        for row in rows:
            return tuple(row)
        return None

    # -- opening steps ---------------------------------------------------------

    async def _check_identity(self) -> None:
        # Read-only checks first: nothing is written to a file that is not ours.
        try:
            app_id = await self._pragma("application_id")
            version = await self._pragma("user_version")
            row = await self.fetchone("SELECT count(*) FROM sqlite_master")
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: not an SQLite database ({e})") from e
        n_objects = row[0] if row else 0
        if version == 0 and n_objects > 0:
            raise StoreError(
                f"{self.path}: not a mastemu run database "
                f"(it already holds {n_objects} tables/indexes and no mastemu schema version)"
            )
        if version > 0 and app_id != APPLICATION_ID:
            raise StoreError(
                f"{self.path}: not a mastemu run database "
                f"(application_id is {app_id:#x}, expected {APPLICATION_ID:#x})"
            )
        legacy = version > 1 and not await self._has_table("schema_parts")
        if version > len(MIGRATIONS) and not legacy:
            raise StoreError(
                f"{self.path}: schema version {version} is newer than this mastemu "
                f"knows (up to {len(MIGRATIONS)}); open it with a newer mastemu"
            )

    async def _configure(self) -> None:
        row = await self.fetchone("PRAGMA journal_mode=WAL")
        mode = str(row[0]).lower() if row else ""
        if self.path != MEMORY and mode != "wal":
            raise StoreError(f"{self.path}: could not switch to WAL (journal_mode={mode})")
        # NORMAL: a WAL commit is durable against a process crash (the case we
        # model), not against power loss; FULL costs ~10x per awaited write.
        await self.conn.execute("PRAGMA synchronous=NORMAL")
        await self.conn.execute("PRAGMA foreign_keys=ON")
        # SQLite's default page cache is 2 MB; a day of `meta-day` reads a
        # database of ~200 MB, mostly its live tables (allocations, jobs, the
        # queue), and re-read their pages through the OS at every statement.
        # 64 MB (allocated only as used) keeps them: 3-4% of the day's wall time.
        await self.conn.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        # SQLite copies the WAL back into the database (and syncs it) once the WAL
        # holds 1,000 pages; a run's group commit writes hundreds at a time, so
        # that was nearly every commit. The WAL goes when the run's connection closes.
        await self.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")

    async def _migrate(self) -> None:
        version = await self._pragma("user_version")
        if version > 1 and not await self._has_table("schema_parts"):
            # Written before schema parts: its scripts 2.. were MAST's.
            await self._script(
                "CREATE TABLE schema_parts (name TEXT PRIMARY KEY, "
                "version INTEGER NOT NULL CHECK (version >= 0));\n"
                f"INSERT INTO schema_parts VALUES ('{LEGACY_PART}', {version - 1});\n"
                "PRAGMA user_version = 2;",
                "version 2 (schema parts)",
            )
            version = 2
        for target, script in enumerate(MIGRATIONS[version:], start=version + 1):
            await self._script(f"{script}\nPRAGMA user_version = {target};", f"version {target}")

    async def _migrate_part(self, part: SchemaPart) -> None:
        row = await self.fetchone("SELECT version FROM schema_parts WHERE name = ?", (part.name,))
        version = int(row[0]) if row else 0
        if version > len(part.migrations):
            raise StoreError(
                f"{self.path}: the {part.name} tables are at version {version}, newer than "
                f"this mastemu knows (up to {len(part.migrations)}); open it with a newer mastemu"
            )
        for target, script in enumerate(part.migrations[version:], start=version + 1):
            await self._script(
                f"{script}\nINSERT INTO schema_parts VALUES ('{part.name}', {target}) "
                f"ON CONFLICT (name) DO UPDATE SET version = excluded.version;",
                f"{part.name} version {target}",
            )

    async def _script(self, script: str, what: str) -> None:
        # executescript would COMMIT any open transaction first, so the
        # transaction is written into the script itself.
        try:
            await self.conn.executescript(f"BEGIN IMMEDIATE;\n{script}\nCOMMIT;")
        except sqlite3.Error as e:
            await self._rollback_if_open()
            raise StoreError(f"{self.path}: migration to {what} failed: {e}") from e

    async def _has_table(self, name: str) -> bool:
        row = await self.fetchone(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        )
        return bool(row and row[0])

    async def _load_leases(self) -> None:
        rows = await self.fetchall("SELECT role, holder, epoch, expires_at_us FROM leases")
        for role, holder, epoch, expires_at_us in rows:
            self.leases.apply_committed(Lease(role, holder, epoch, expires_at_us))

    async def _pragma(self, name: str) -> int:
        row = await self.fetchone(f"PRAGMA {name}")
        return int(row[0]) if row else 0

    async def _rollback_if_open(self) -> None:
        if self.conn.in_transaction:
            await self.conn.execute("ROLLBACK")

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Store({self.path!r}, {state})"
