"""Typed key-value state, run metadata and violations."""

from __future__ import annotations

import msgspec
import pytest

from store import Store, StoreError, kv
from store.events import event_name
from store.runs import (
    RunMeta,
    Violation,
    finish_run,
    get_run_meta,
    list_violations,
    put_run_meta,
    record_violation,
)


class Progress(msgspec.Struct):
    bytes_moved: int
    replicas: set[str]
    done: bool = False


async def test_kv_round_trip(store: Store) -> None:
    assert await kv.get(store, "migration", "t1", Progress) is None
    await kv.put(store, "migration", "t1", Progress(10, {"us-west", "eu"}))
    await kv.put(store, "migration", "t1", Progress(20, {"eu", "us-west"}, done=True))
    await kv.put(store, "migration", "t0", Progress(0, set()))
    got = await kv.get(store, "migration", "t1", Progress)
    assert got == Progress(20, {"eu", "us-west"}, done=True)
    assert [k for k, _ in await kv.items(store, "migration", Progress)] == ["t0", "t1"]
    assert await kv.delete(store, "migration", "t1")
    assert not await kv.delete(store, "migration", "t1")
    assert await kv.get(store, "migration", "t1", Progress) is None


async def test_kv_encoding_is_deterministic(store: Store) -> None:
    # Sets encode in sorted order, so equal values give equal bytes.
    await kv.put(store, "ns", "a", Progress(1, {"b", "a", "c"}))
    await kv.put(store, "ns", "b", Progress(1, {"c", "a", "b"}))
    blobs = [r[0] for r in await store.fetchall("SELECT value FROM kv ORDER BY key")]
    assert blobs[0] == blobs[1]


def test_store_event_tags() -> None:
    assert event_name(kv.put) == "kv.put"
    assert event_name(kv.get) is None


async def test_run_meta_round_trip_and_finish(store: Store) -> None:
    assert await get_run_meta(store) is None
    with pytest.raises(StoreError, match="put_run_meta"):
        await finish_run(store, status="ok", trace_hash="h", end_t_us=1, events=1, violations=0)
    meta = RunMeta(scenario_name="failover", scenario_text="[world]\n", seed=7, version="0.1.0")
    await put_run_meta(store, meta)
    assert await get_run_meta(store) == meta
    await finish_run(
        store, status="violated", trace_hash="abc", end_t_us=3_600_000_000, events=42, violations=1
    )
    done = await get_run_meta(store)
    assert done is not None
    assert (done.status, done.trace_hash, done.end_t_us, done.events, done.violations) == (
        "violated",
        "abc",
        3_600_000_000,
        42,
        1,
    )
    assert done.seed == 7
    with pytest.raises(ValueError, match="run status"):
        await finish_run(store, status="great", trace_hash=None, end_t_us=0, events=0, violations=0)  # type: ignore[arg-type]


async def test_violations(store: Store) -> None:
    assert await list_violations(store) == []
    v1 = await record_violation(store, 17, 1000, "single_leader", "two leaders of gms at epoch 3")
    v2 = await record_violation(store, None, 2000, "no_lost_workload", "w9 missing at end")
    assert await list_violations(store) == [
        Violation(v1, 17, 1000, "single_leader", "two leaders of gms at epoch 3"),
        Violation(v2, None, 2000, "no_lost_workload", "w9 missing at end"),
    ]
