"""The run database's one connection: SQLite called in the kernel's own thread.

The kernel awaits every store call itself while emulated time stands still and
no actor runs (docs/design.md §2), so nothing can use the time a statement
takes. Handing each statement to a worker thread, as aiosqlite does, only
added a thread round trip per call: on a day of `meta-day` about a third of
the run's wall time went to waiting on that thread (317k calls in 6 emulated
hours). This connection keeps aiosqlite's async interface, which the
repository modules are written against, and runs each statement at once:
every coroutine here completes without suspending.

What must stay true: the same statements in the same order on every run (one
connection per run, as before); the connection is closed on every exit path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

Params = tuple[Any, ...] | dict[str, Any]


class Cursor:
    """The outcome of one statement: its rows (fetched on demand), rowcount, lastrowid."""

    __slots__ = ("_cur",)

    def __init__(self, cur: sqlite3.Cursor) -> None:
        self._cur = cur

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cur.lastrowid

    async def fetchone(self) -> tuple[Any, ...] | None:
        return self._cur.fetchone()

    async def fetchall(self) -> list[tuple[Any, ...]]:
        return self._cur.fetchall()


class Connection:
    """An SQLite connection in autocommit mode with the async methods the store uses."""

    __slots__ = ("_db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    @property
    def isolation_level(self) -> str | None:
        return self._db.isolation_level

    @property
    def in_transaction(self) -> bool:
        return self._db.in_transaction

    async def execute(self, sql: str, params: Params = ()) -> Cursor:
        return Cursor(self._db.execute(sql, params))

    async def execute_fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        return self._db.execute(sql, params).fetchall()

    async def executemany(self, sql: str, rows: Iterable[Params]) -> Cursor:
        return Cursor(self._db.executemany(sql, rows))

    async def executescript(self, script: str) -> None:
        self._db.executescript(script)

    def serialize(self) -> bytes:
        """The main database's bytes (of an in-memory database: its whole content)."""
        return self._db.serialize()

    def deserialize(self, data: bytes) -> None:
        """Replace the main database with `data` (as `serialize` gave it)."""
        self._db.deserialize(data)

    async def close(self) -> None:
        self._db.close()


async def connect(path: str) -> Connection:
    """Open `path` (or `":memory:"`) in autocommit mode; sqlite3.Error if it cannot."""
    # Statements with lists of bound values come in many lengths (a change log's
    # sync): a bigger statement cache keeps the fixed ones from being re-prepared.
    return Connection(sqlite3.connect(path, isolation_level=None, cached_statements=1024))
