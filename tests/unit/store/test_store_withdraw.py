"""WITHDRAWN: only a queued workload that never ran can be withdrawn; it ends there."""

from __future__ import annotations

import pytest

from emulator.units import MIN
from store import Store
from store.mast import queue
from store.mast.records import JobSpec, Tenant, WorkloadSpec


async def _submitted(store: Store, wid: str = "W") -> None:
    await queue.put_tenants(store, [Tenant(name="t", priority=7, gpu_quota=8, cpu_quota=0)])
    job = JobSpec(name="trainer", gpu_type="A100", gpus=8, work_us=MIN)
    assert await queue.submit(
        store, WorkloadSpec(id=wid, tenant="t", submit_at_us=0, jobs=(job,)), 7, 0
    )


@pytest.mark.parametrize("waiting", ["PENDING", "WAITING", "WAITING_DATA"])
async def test_a_queued_workload_that_never_ran_is_withdrawn_and_ends(
    store: Store, waiting: str
) -> None:
    await _submitted(store)
    if waiting != "PENDING":
        assert await queue.transition(store, "W", queue.QUEUED, waiting, MIN)
    assert await queue.transition(store, "W", queue.QUEUED, "WITHDRAWN", 9 * MIN)
    entry = await queue.get(store, "W")
    assert entry is not None and (entry.state, entry.finished_us) == ("WITHDRAWN", 9 * MIN)
    # Ended: nothing takes it back to the queue or to a region.
    assert not await queue.transition(store, "W", queue.QUEUED, "RUNNING", 10 * MIN)


async def test_a_workload_that_ran_once_is_not_withdrawn_even_back_in_the_queue(
    store: Store,
) -> None:
    await _submitted(store)
    assert await queue.transition(store, "W", queue.QUEUED, "RUNNING", MIN)
    assert await queue.transition(store, "W", ("RUNNING",), "PENDING", 5 * MIN)  # preempted
    assert not await queue.transition(store, "W", queue.QUEUED, "WITHDRAWN", 9 * MIN)
    entry = await queue.get(store, "W")
    assert entry is not None and entry.state == "PENDING"


async def test_entries_reads_the_rows_asked_for_by_id(store: Store) -> None:
    for wid in ("b", "a", "c"):
        await _submitted(store, wid)
    got = await queue.entries(store, ["c", "a", "missing"])
    assert [e.id for e in got] == ["a", "c"]
