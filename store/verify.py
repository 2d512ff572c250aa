"""Is this file a whole run database? Checked before any command reads or continues a run.

A run database can be damaged after the fact: a disk error, a copy cut
short, bytes overwritten, a WAL file deleted while the run was killed. Read
as it is, such a file gives tracebacks, wrong reports, or a `resume` that
says the run finished. So every command that opens a run (report, check,
replay, export, resume) first asks `verify_run`, which raises `DamagedRun`
saying what is wrong:

- SQLite's own `PRAGMA integrity_check`: pages, b-trees, indexes (about a
  millisecond per megabyte);
- the run's metadata row is there and readable;
- the trace is one sequence: chunks in seq order without gaps or overlaps
  (a sparse trace, whose chunks list their seqs, may skip seqs), times that
  never go back, and a run that ended says it wrote as many events as the
  chunks hold;
- the digest chain (`store.trace.chunk_digest`): each chunk's digest covers
  the chunk before it, its seq range and its bytes, so a chunk that was
  changed, dropped or moved shows. Chunks written before digests existed
  carry none and are checked for the rest.

It opens the file read-only, so a damaged file is never made worse.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from store.db import StoreError
from store.migrations import APPLICATION_ID, SCHEMA_VERSION
from store.trace import chunk_digest

# How many of SQLite's integrity complaints a message quotes.
_SHOWN = 3
# A run that ended wrote its whole trace (status "running": it may have been killed).
# The first bytes of every SQLite 3 database file.
_SQLITE_HEADER = b"SQLite format 3\x00"
_ENDED = ("ok", "violated", "error", "interrupted", "failed")


class DamagedRun(StoreError):
    """The file is not a whole run database; the message says what is wrong."""


def verify_run(db: Path) -> None:
    """Raise DamagedRun (or StoreError if it is no run database at all) unless `db` is whole."""
    if db.is_dir():
        raise StoreError(f"{db}: is a folder, not a run database")
    if not db.is_file():
        raise StoreError(f"{db}: no such run database")
    if db.stat().st_size == 0:
        raise StoreError(f"{db}: empty file: not a mastemu run database")
    with open(db, "rb") as file:
        header = file.read(len(_SQLITE_HEADER))
    if header != _SQLITE_HEADER:
        # Text, another format, or a first page overwritten: SQLite would say
        # "file is not a database" at the first query.
        raise StoreError(f"{db}: not an SQLite database (no SQLite header): not a run database")
    try:
        uri = db.resolve().as_uri() + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as error:
        raise StoreError(f"{db}: cannot open as an SQLite database: {error}") from None
    try:
        with contextlib.closing(conn):
            _check(conn, db)
    except sqlite3.DatabaseError as error:
        raise DamagedRun(f"{db}: damaged: SQLite cannot read it ({error})") from None


def _check(conn: sqlite3.Connection, db: Path) -> None:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if app_id != APPLICATION_ID or version == 0:
        raise StoreError(f"{db}: not a mastemu run database")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{db}: schema version {version} is newer than this mastemu knows "
            f"(up to {SCHEMA_VERSION}); open it with a newer mastemu"
        )
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    if problems != ["ok"]:
        shown = "; ".join(str(p) for p in problems[:_SHOWN])
        more = f" (+{len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
        raise DamagedRun(f"{db}: damaged: SQLite's integrity check says {shown}{more}")
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_meta'"
    ).fetchone()
    meta = (
        conn.execute("SELECT status, events FROM run_meta WHERE id = 1").fetchone()
        if has_meta
        else None
    )
    if meta is None:
        # A store no run was started in, or one whose run_meta row is gone.
        raise DamagedRun(f"{db}: no run metadata: not a run database (or its run_meta row is gone)")
    status, events = meta
    columns = {row[1] for row in conn.execute("PRAGMA table_info(trace_chunks)")}
    has_seqs, has_digest = "seqs" in columns, "digest" in columns
    sql = (
        "SELECT first_seq, last_seq, t_first_us, t_last_us, events, "
        f"{'seqs IS NOT NULL' if has_seqs else '0'}, {'digest' if has_digest else 'NULL'} "
        "FROM trace_chunks ORDER BY first_seq"
    )
    last_seq, last_t, previous = 0, 0, b""
    for first, last, t_first, t_last, blob, sparse, digest in conn.execute(sql):
        where = f"trace chunk at seq {first}"
        if not isinstance(blob, bytes) or not blob:
            raise DamagedRun(f"{db}: damaged: {where} has no events")
        if last < first or (first <= last_seq) or (not sparse and first != last_seq + 1):
            raise DamagedRun(
                f"{db}: damaged: {where} (to {last}) does not follow the chunk before "
                f"(which ends at seq {last_seq}): the trace has a gap or an overlap"
            )
        if t_last < t_first or t_first < last_t:
            raise DamagedRun(f"{db}: damaged: {where}: its times go back")
        if digest is not None:
            if bytes(digest) != chunk_digest(previous, first, last, blob):
                raise DamagedRun(
                    f"{db}: damaged: {where}: its bytes do not match its digest "
                    "(changed or moved after it was written)"
                )
            previous = bytes(digest)
        else:
            previous = b""
        last_seq, last_t = last, t_last
    if status in _ENDED and last_seq != events:
        raise DamagedRun(
            f"{db}: damaged: the run ended ({status}) with {events} events but the trace "
            f"holds {last_seq}"
        )
