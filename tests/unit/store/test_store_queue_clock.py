"""The queueing clock: a workload's age in its credit runs from when it (re)joined the queue."""

from __future__ import annotations

from emulator.units import MIN
from store import Store
from store.mast import queue
from store.mast.records import JobSpec, Tenant, WorkloadSpec


async def _submitted(store: Store) -> None:
    await queue.put_tenants(store, [Tenant(name="t", priority=1, gpu_quota=8, cpu_quota=0)])
    job = JobSpec(name="trainer", gpu_type="A100", gpus=8, work_us=MIN)
    spec = WorkloadSpec(id="W", tenant="t", submit_at_us=0, jobs=(job,))
    assert await queue.submit(store, spec, 1, 0)


async def _queued_us(store: Store) -> int:
    entry = await queue.get(store, "W")
    assert entry is not None
    return entry.queued_us


async def test_passes_that_leave_a_workload_waiting_keep_its_queueing_clock(store: Store) -> None:
    await _submitted(store)
    assert await queue.transition(store, "W", queue.QUEUED, "WAITING", 5 * MIN)
    assert await queue.transition(store, "W", queue.QUEUED, "WAITING_DATA", 10 * MIN)
    assert await queue.transition(store, "W", queue.QUEUED, "WAITING", 15 * MIN)
    assert await _queued_us(store) == 0


async def test_coming_back_to_the_queue_restarts_the_clock(store: Store) -> None:
    await _submitted(store)
    assert await queue.transition(store, "W", queue.QUEUED, "RUNNING", 5 * MIN)
    assert await queue.transition(store, "W", ("RUNNING",), "PENDING", 20 * MIN)
    assert await _queued_us(store) == 20 * MIN
    assert await queue.transition(store, "W", queue.QUEUED, "WAITING", 25 * MIN)
    assert await _queued_us(store) == 20 * MIN
