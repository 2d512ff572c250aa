"""Trace and metric writers: chunked batching, flush atomicity, paged and filtered reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest

from store import Store
from store import trace as store_trace
from store.trace import (
    MetricWriter,
    TraceRow,
    TraceWriter,
    chunk_events,
    count_trace,
    iter_trace,
    read_metrics,
)


def event(t_us: int, kind: str = "deliver", payload: object = 1) -> bytes:
    """An event encoded as the kernel's tracer encodes it."""
    return msgspec.msgpack.encode((t_us, kind, "gms/0", "rms/us-east/0", "Bid", payload))


async def collect(store: Store, **kw: object) -> list[TraceRow]:
    return [row async for row in iter_trace(store, **kw)]  # type: ignore[arg-type]


async def test_writer_batches_and_flushes_one_chunk(store: Store) -> None:
    w = TraceWriter(store, batch_size=3)
    records = w.records  # the kernel keeps this reference and appends to it
    records.append(event(10))
    records.append(event(10))
    assert not w.full()
    records.append(event(20))
    assert w.full()
    assert await count_trace(store) == 0  # nothing written before flush
    await w.flush()
    assert w.records is records and records == []
    assert (w.written, w.first_seq) == (3, 4)
    assert await count_trace(store) == 3
    chunks = await store.fetchall(
        "SELECT first_seq, last_seq, t_first_us, t_last_us FROM trace_chunks"
    )
    assert chunks == [(1, 3, 10, 20)]
    await w.flush()  # nothing buffered: no-op
    assert w.written == 3


async def test_failed_flush_writes_nothing_and_keeps_events(store: Store) -> None:
    w = TraceWriter(store)
    w.records.append(event(0))
    await w.flush()
    w.first_seq = 1  # a bug of the caller: the seq range collides with the stored chunk
    w.records.extend([event(1), event(2)])
    with pytest.raises(sqlite3.IntegrityError):
        await w.flush()
    assert await count_trace(store) == 1
    assert len(w.records) == 2 and w.written == 1


async def test_iter_trace_in_seq_order_across_pages(store: Store) -> None:
    w = TraceWriter(store, batch_size=2)
    for t in range(7):
        w.records.append(event(t * 100, payload={"n": t}))
        if w.full():
            await w.flush()
    await w.flush()
    rows = await collect(store, batch=1)
    assert [r.seq for r in rows] == [1, 2, 3, 4, 5, 6, 7]
    assert rows[0] == TraceRow(1, 0, "deliver", "gms/0", "rms/us-east/0", "Bid", {"n": 0})


async def test_iter_trace_time_window_is_half_open(store: Store) -> None:
    w = TraceWriter(store, batch_size=2)
    for t in [0, 10, 10, 20, 30, 40]:
        w.records.append(event(t))
        if w.full():
            await w.flush()
    window = await collect(store, t_from_us=10, t_to_us=30, batch=1)
    assert [(r.seq, r.t_us) for r in window] == [(2, 10), (3, 10), (4, 20)]
    assert [r.seq for r in await collect(store, t_from_us=30)] == [5, 6]
    assert [r.seq for r in await collect(store, t_to_us=10)] == [1]
    # Adjacent windows tile the trace without repeats.
    a = await collect(store, t_to_us=20)
    b = await collect(store, t_from_us=20)
    assert [r.seq for r in a + b] == [1, 2, 3, 4, 5, 6]


async def test_iter_trace_kind_filter(store: Store) -> None:
    w = TraceWriter(store)
    for i, k in enumerate(["deliver", "drop", "timer", "deliver", "crash", "drop"]):
        w.records.append(event(i, k))
    await w.flush()
    got = await collect(store, kinds=["drop", "crash"])
    assert [(r.seq, r.kind) for r in got] == [(2, "drop"), (5, "crash"), (6, "drop")]
    assert await collect(store, kinds=[]) == []


async def test_a_kind_filter_reads_the_same_rows_as_filtering_everything_read(
    store: Store,
) -> None:
    # Filtered reads decode only the wanted events' payloads; what they yield must
    # be what a full read yields, payloads of every shape included.
    payloads: list[object] = [1, None, "x", [1, [2, {"a": 3}]], {"k": [1.5, True]}, b"\x00"]
    w = TraceWriter(store, batch_size=4)
    kinds = ["store", "deliver", "decision", "fault", "timer"]
    for i in range(40):
        w.records.append(event(i, kinds[i % len(kinds)], payloads[i % len(payloads)]))
        if w.full():
            await w.flush()
    await w.flush()
    every = await collect(store)
    wanted = {"store", "decision", "fault"}
    assert await collect(store, kinds=sorted(wanted)) == [r for r in every if r.kind in wanted]
    assert len(every) == 40


async def test_a_chunk_of_unusual_events_is_still_read_with_a_kind_filter(store: Store) -> None:
    # An event that is not the tracer's six fields (a foreign or future writer):
    # the filtered read falls back to decoding the chunk whole.
    w = TraceWriter(store)
    w.records.append(event(1, "store"))
    w.records.append(msgspec.msgpack.encode((2, "store", "a", "b", "T", 1, "extra")))
    await w.flush()
    got = await collect(store, kinds=["store"])
    assert [(r.seq, r.payload) for r in got] == [(1, 1), (2, 1)]


async def test_flushed_trace_readable_by_plain_sqlite3(store: Store, db_path: Path) -> None:
    w = TraceWriter(store)
    w.records.extend(event(t) for t in range(1000))
    await w.flush()
    # A second connection (e.g. `mastemu replay` during a run) sees the commit.
    c = sqlite3.connect(db_path)
    try:
        (blob,) = c.execute("SELECT events FROM trace_chunks").fetchone()
    finally:
        c.close()
    assert len(msgspec.msgpack.decode(chunk_events(blob))) == 1000


async def test_metric_writer_and_read(store: Store) -> None:
    m = MetricWriter(store, batch_size=2)
    m.rows.append((20, "gpu_alloc_rate", '{"region":"a"}', 0.5))
    m.rows.append((10, "gpu_alloc_rate", '{"region":"a"}', 0.25))
    assert m.full()
    m.rows.append((10, "queue_len", "{}", 3.0))
    await m.flush()
    assert m.written == 3
    assert await read_metrics(store, "gpu_alloc_rate") == [
        (10, '{"region":"a"}', 0.25),
        (20, '{"region":"a"}', 0.5),
    ]
    assert await read_metrics(store, "missing") == []


def committed_chunks(db_path: Path) -> int:
    """How many chunks another process would see now (an open group's are not)."""
    with sqlite3.connect(db_path) as conn:
        return int(conn.execute("SELECT count(*) FROM trace_chunks").fetchone()[0])


async def cadence(store: Store, db_path: Path, w: TraceWriter) -> list[int]:
    """Chunks committed after each of six flushes while a run goes on, then a durable one."""
    before = committed_chunks(db_path)
    await store.begin_group()
    seen = []
    # Three chunks within a minute, one more, one a minute after the last commit,
    # one more; then a durable flush with nothing buffered.
    for t_s in (1, 2, 3, 4, 64, 65):
        w.records.append(event(t_s * 1_000_000))
        await w.flush(durable=False)
        seen.append(committed_chunks(db_path) - before)
    await w.flush()
    seen.append(committed_chunks(db_path) - before)
    await store.end_group()
    return seen


# Every third chunk commits, or the first a minute after the last commit; a durable
# flush commits what is left even with nothing buffered.
CADENCE = [0, 0, 3, 3, 5, 5, 6]


async def test_a_running_group_commits_every_few_chunks_or_a_minute_of_them(
    store: Store, db_path: Path
) -> None:
    assert await cadence(store, db_path, TraceWriter(store, batch_size=1, commit_every=3)) == (
        CADENCE
    )


async def test_a_writer_committing_every_chunk_or_never_is_caught(
    store: Store, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = TraceWriter(store, batch_size=1, commit_every=1)  # the old cost: a commit per chunk
    assert await cadence(store, db_path, w) == [1, 2, 3, 4, 5, 6, 6]
    lazy = TraceWriter(store, batch_size=1, commit_every=3, first_seq=7)
    monkeypatch.setattr(lazy, "commit_every", 10**9)
    monkeypatch.setattr(store_trace, "COMMIT_SPAN_US", 10**18)
    assert await cadence(store, db_path, lazy) == [0, 0, 0, 0, 0, 0, 6]
