"""The trace and metric tables: buffered appends, paged reads.

A trace event is one msgpack array `[t_us, kind, src, dst, type, payload]`,
encoded once by the kernel's tracer (which hashes those same bytes). Events
are stored in chunks: one `trace_chunks` row holds about a thousand
consecutive events as one msgpack array, with the seq and time range it
covers. Binding one SQL row per event cost about 3 µs, more than the kernel
spends on the delivery itself; a chunk costs one insert.

A chunk's bytes are zlib-compressed (level 1: a day of `meta-day`, 4.3
million events, goes from ~870 MB to ~80 MB for ~2 s of compression);
`chunk_events` undoes it. A chunk written before compression starts with
msgpack's array byte (0xdd), a compressed one with zlib's header (0x78), so
both read back.

Each chunk carries a digest that chains it to the chunks before it
(`chunk_digest`): what `store/verify.py` checks before a run is read.

Metric samples `(t_us, name, labels_json, value)` are plain rows of `metrics`,
written in batches with `executemany`.

What must stay true: events reach the database in the order they were
appended, seqs are consecutive, and a flush writes its whole batch or nothing
(a failed flush leaves the events buffered).
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import msgspec

from store.db import Store, StoreError

MetricTuple = tuple[int, str, str, float]

_DECODER = msgspec.msgpack.Decoder()
# A chunk as its events' own bytes, undecoded.
_RAW_RECORDS = msgspec.msgpack.Decoder(list[msgspec.Raw])


class TraceRow(msgspec.Struct, array_like=True):
    """One kernel event read back; `payload` is decoded msgpack (builtins)."""

    seq: int
    t_us: int
    kind: str
    src: str
    dst: str
    type: str
    payload: Any


# A chunk's events with their payloads left undecoded: a reader that wants some
# kinds only (a report folds decisions and store writes, a quarter of the events)
# decodes the payloads of those alone; decoding was most of a report's time.
_LAZY_EVENTS = msgspec.msgpack.Decoder(list[tuple[int, str, str, str, str, msgspec.Raw]])


def _events(records: bytes, lazy: bool) -> tuple[list[Any], bool]:
    """A chunk's events, payloads as Raw when `lazy` (and every event has the usual shape)."""
    if lazy:
        try:
            return _LAZY_EVENTS.decode(records), True
        except msgspec.ValidationError:
            pass  # not the tracer's six fields: decode it whole, as ever
    return _DECODER.decode(records), False


def chunk_events(blob: bytes) -> bytes:
    """A stored chunk's msgpack array of events (decompressed if it is compressed)."""
    return zlib.decompress(blob) if blob[:1] == b"\x78" else blob


def chunk_digest(previous: bytes, first_seq: int, last_seq: int, blob: bytes) -> bytes:
    """A chunk's link in the trace's chain: what came before, its seq range, its stored bytes."""
    h = hashlib.blake2b(previous, digest_size=16)
    h.update(struct.pack(">qq", first_seq, last_seq))
    h.update(blob)
    return h.digest()


async def last_digest(store: Store) -> bytes:
    """The digest of the last stored chunk (b"" for none, or one written without digests)."""
    row = await store.fetchone("SELECT digest FROM trace_chunks ORDER BY first_seq DESC LIMIT 1")
    return bytes(row[0]) if row and row[0] is not None else b""


# While a run goes on, the group commits every `COMMIT_EVERY` chunks, or sooner
# once its chunks span `COMMIT_SPAN_US` of emulated time (`TraceWriter.flush`): a
# process killed mid-run loses at most that much, with the state it changed. A
# small world's chunk spans minutes and commits at once, as every chunk used to.
COMMIT_EVERY = 4
COMMIT_SPAN_US = 60_000_000


def _array_header(n: int) -> bytes:
    # msgpack array32: the records that follow are its items.
    return b"\xdd" + struct.pack(">I", n)


class TraceWriter:
    """Buffers encoded events in `records` and writes them as one chunk per flush.

    The kernel appends to `records` directly (it never rebinds the list) and
    numbers events from `first_seq` on, one per record.
    """

    def __init__(
        self,
        store: Store,
        batch_size: int = 1000,
        first_seq: int = 1,
        *,
        sparse: bool = False,
        commit_every: int = COMMIT_EVERY,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if commit_every < 1:
            raise ValueError(f"commit_every must be >= 1, got {commit_every}")
        self.store = store
        self.batch_size = batch_size
        self.commit_every = commit_every
        self.uncommitted = 0  # chunks written since the group last committed
        self.written_us = 0  # emulated time of the last event written
        self.committed_us = 0  # and of the last one committed
        self.records: list[bytes] = []
        # A sparse trace keeps some events only: the tracer appends each kept
        # event's seq here, and chunks store them.
        self.seqs: list[int] | None = [] if sparse else None
        self.first_seq = first_seq
        self.written = 0
        # The last chunk's digest: a resumed run's writer starts from the stored one.
        self.digest = b""

    def full(self) -> bool:
        return len(self.records) >= self.batch_size

    async def flush(self, durable: bool = True) -> None:
        """Write every buffered event as one chunk (one statement), and commit.

        `durable=False` (the kernel's flushes while a run goes on) commits only
        every `commit_every` chunks, or once they span `COMMIT_SPAN_US`: a
        commit writes every page the group changed to the WAL, and one per
        chunk was 5% of a day of `meta-day`.
        """
        n = len(self.records)
        if n == 0:
            if durable and self.uncommitted:
                await self._commit()
            return
        batch = self.records[:n]
        blob = zlib.compress(_array_header(n) + b"".join(batch), 1)
        t_first = _DECODER.decode(batch[0])[0]
        t_last = _DECODER.decode(batch[-1])[0]
        first, last, seqs = self.first_seq, self.first_seq + n - 1, None
        if self.seqs is not None:
            first, last = self.seqs[0], self.seqs[n - 1]
            seqs = msgspec.msgpack.encode(self.seqs[:n])
        digest = chunk_digest(self.digest, first, last, blob)
        await self.store.write(
            "INSERT INTO trace_chunks "
            "(first_seq, last_seq, t_first_us, t_last_us, events, seqs, digest) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (first, last, t_first, t_last, blob, seqs, digest),
        )
        self.uncommitted += 1
        self.written_us = t_last
        if (
            durable
            or self.uncommitted >= self.commit_every
            or t_last - self.committed_us >= COMMIT_SPAN_US
        ):
            await self._commit()
        # Only after the write, and only what was written: events appended
        # while the flush was in flight stay buffered.
        del self.records[:n]
        if self.seqs is not None:
            del self.seqs[:n]
        self.first_seq = last + 1
        self.written += n
        self.digest = digest

    async def _commit(self) -> None:
        # In group-commit mode the chunks commit together with the emulated
        # state they describe (`Store.begin_group`); otherwise a no-op.
        await self.store.commit_group()
        self.uncommitted = 0
        self.committed_us = self.written_us


async def last_event_us(store: Store) -> int:
    """Time of the last stored event (0 for an empty trace): where a killed run stopped."""
    row = await store.fetchone("SELECT max(t_last_us) FROM trace_chunks")
    return int(row[0]) if row and row[0] is not None else 0


async def iter_trace(
    store: Store,
    *,
    t_from_us: int | None = None,
    t_to_us: int | None = None,
    kinds: Iterable[str] | None = None,
    batch: int = 16,
) -> AsyncIterator[TraceRow]:
    """Yield stored events in seq order, optionally filtered.

    The time window is half-open, `t_from_us <= t_us < t_to_us`, so adjacent
    windows never repeat an event. Chunks are paged by `first_seq > last`
    (a primary-key seek), `batch` chunks at a time, and skipped whole when
    their time range misses the window.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    kind_set = set(kinds) if kinds is not None else None
    if kind_set is not None and not kind_set:
        return
    where = ["first_seq > ?"]
    params: list[Any] = []
    if t_from_us is not None:
        where.append("t_last_us >= ?")
        params.append(t_from_us)
    if t_to_us is not None:
        where.append("t_first_us < ?")
        params.append(t_to_us)
    sql = (
        f"SELECT first_seq, events, seqs FROM trace_chunks WHERE {' AND '.join(where)} "
        "ORDER BY first_seq LIMIT ?"
    )
    after = -(2**63)
    while True:
        chunks = await store.fetchall(sql, (after, *params, batch))
        for first_seq, blob, packed in chunks:
            seqs = _DECODER.decode(packed) if packed is not None else None
            events, lazy = _events(chunk_events(blob), kind_set is not None)
            for offset, ev in enumerate(events):
                t_us = ev[0]
                if t_from_us is not None and t_us < t_from_us:
                    continue
                if t_to_us is not None and t_us >= t_to_us:
                    break
                if kind_set is not None and ev[1] not in kind_set:
                    continue
                seq = seqs[offset] if seqs is not None else first_seq + offset
                payload = _DECODER.decode(ev[5]) if lazy else ev[5]
                yield TraceRow(seq, t_us, ev[1], ev[2], ev[3], ev[4], payload)
        if len(chunks) < batch:
            return
        after = chunks[-1][0]


async def iter_trace_records(store: Store, batch: int = 16) -> AsyncIterator[tuple[int, bytes]]:
    """Yield `(seq, record)` for every stored event: the exact bytes the tracer hashed.

    For continuing a run's trace hash (`mastemu resume`). Raises StoreError
    if the stored seqs are not consecutive from 1.
    """
    after = 0
    while True:
        chunks = await store.fetchall(
            "SELECT first_seq, events, seqs FROM trace_chunks WHERE first_seq > ? "
            "ORDER BY first_seq LIMIT ?",
            (after, batch),
        )
        for first_seq, blob, seqs in chunks:
            if seqs is not None:
                raise StoreError(
                    f"{store.path}: the trace keeps only some events (level decisions): "
                    "its hash cannot be continued"
                )
            if first_seq != after + 1:
                raise StoreError(f"{store.path}: trace chunk at seq {first_seq} after {after}")
            records = _RAW_RECORDS.decode(chunk_events(blob))
            for offset, record in enumerate(records):
                yield first_seq + offset, bytes(record)
            after = first_seq + len(records) - 1
        if len(chunks) < batch:
            return


async def count_trace(store: Store) -> int:
    """Number of events in the database (buffered events not included)."""
    row = await store.fetchone(
        "SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM trace_chunks"
    )
    return int(row[0]) if row else 0


class MetricWriter:
    """Buffers metric samples `(t_us, name, labels_json, value)` in `rows`.

    `flush` writes them with one `executemany` in one transaction; rows
    appended while a flush is in flight stay buffered.
    """

    INSERT = "INSERT INTO metrics (t_us, name, labels, value) VALUES (?, ?, ?, ?)"

    def __init__(self, store: Store, batch_size: int = 1000) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.store = store
        self.batch_size = batch_size
        self.rows: list[MetricTuple] = []
        self.written = 0

    def full(self) -> bool:
        return len(self.rows) >= self.batch_size

    async def flush(self) -> None:
        n = len(self.rows)
        if n == 0:
            return
        batch = self.rows[:n]
        async with self.store.transaction() as conn:
            await conn.executemany(self.INSERT, batch)
        del self.rows[:n]
        self.written += n


async def read_metrics(store: Store, name: str) -> list[tuple[int, str, float]]:
    """Samples of metric `name` as `(t_us, labels_json, value)`, by time then write order."""
    rows = await store.fetchall(
        "SELECT t_us, labels, value FROM metrics WHERE name = ? ORDER BY t_us, rowid", (name,)
    )
    return [(t, labels, value) for t, labels, value in rows]
