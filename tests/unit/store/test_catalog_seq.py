"""An RMS re-reads its region's ready replicas only when some replica changed."""

from __future__ import annotations

from store import Store
from store.mast import catalog
from store.mast.records import DataTable


async def test_ready_tables_are_read_again_only_after_a_replica_changes(store: Store) -> None:
    await catalog.put_tables(
        store,
        [
            DataTable(name="t1", size_bytes=1, home_region="a"),
            DataTable(name="t2", size_bytes=1, home_region="b", replicas=("a",)),
        ],
    )
    seq, ready = await catalog.ready_tables_since(store, "a", None)
    assert ready == {"t1", "t2"}
    assert await catalog.ready_tables_since(store, "a", seq) == (seq, None)
    # A copy of t1 to b starts, then lands: each change is seen by every region.
    await catalog.set_replica(store, "t1", "b", "copying", 5)
    seq2, ready_b = await catalog.ready_tables_since(store, "b", seq)
    assert seq2 > seq and ready_b == {"t2"}
    await catalog.set_replica(store, "t1", "b", "ready", 9)
    seq3, ready_b = await catalog.ready_tables_since(store, "b", seq2)
    assert seq3 > seq2 and ready_b == {"t1", "t2"}
    assert await catalog.ready_tables_since(store, "b", seq3) == (seq3, None)
