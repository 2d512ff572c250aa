"""A ledger brought up to date by `sync` against one loaded afresh, over generated histories.

An RMS keeps a working copy of every cluster of its region and, at MAST's
scale, cannot re-read each at every scan pass; it re-reads what the store's
change log (`fleet_changes`) says changed. Whatever happened to machines,
allocations and job rows in between, the synced ledger must hold exactly what
a fresh load holds, and give the same placement snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.common.cm.ledger import ClusterLedger
from store import Store
from store.mast import fleet
from store.mast.queue import Fence
from store.mast.records import DynamicCluster, Machine
from store.mast.schema import MAST_SCHEMA
from tests.support.examples import examples

T = TypeVar("T")
CLUSTERS = ("c0", "c1")
HOSTS = tuple(f"m{i}" for i in range(8))  # m0-m3 GPU machines, m4-m7 CPU machines
JOBS = tuple((f"w{i}", "j") for i in range(5))
STATES = ("STARTING", "RUNNING", "CHECKPOINTING", "STOPPED", "DONE")
CM_FENCE = Fence(role="cm", holder="cm/a", epoch=1)


class Direct:
    """Store calls made directly (the ledger reads through whoever it is given)."""

    def __init__(self, store: Store) -> None:
        self.s = store
        self.calls = 0

    async def store(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        self.calls += 1
        return await fn(self.s, *args)


def machine(i: int) -> Machine:
    gpu = i < 4
    return Machine(
        host=HOSTS[i],
        region="r",
        rack=f"r{i % 2}",
        fault_domain="fd0",
        gpu_type="A100" if gpu else None,
        gpus=8 if gpu else 0,
        cluster="c0" if i < 6 else "c1",
    )


OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("alloc"), st.sampled_from(HOSTS), st.sampled_from(JOBS), st.integers(1, 8)
        ),
        # A job taking several GPU machines with no sync in between, as a job starts:
        # with only four GPU machines, jobs often share one, and a change to one job
        # must leave the other's allocations elsewhere in the synced copy.
        st.tuples(
            st.just("gang"),
            st.lists(st.sampled_from(HOSTS[:4]), min_size=2, max_size=3, unique=True).map(tuple),
            st.sampled_from(JOBS),
            st.integers(1, 4),
        ),
        st.tuples(st.just("free"), st.sampled_from(HOSTS), st.sampled_from(JOBS), st.just(0)),
        st.tuples(st.just("free-job"), st.just(""), st.sampled_from(JOBS), st.just(0)),
        st.tuples(st.just("state"), st.sampled_from(STATES), st.sampled_from(JOBS), st.just(0)),
        st.tuples(st.just("priority"), st.integers(0, 7), st.sampled_from(JOBS), st.just(0)),
        st.tuples(
            st.just("move-job"), st.sampled_from(CLUSTERS), st.sampled_from(JOBS), st.just(0)
        ),
        st.tuples(st.just("health"), st.sampled_from(HOSTS), st.booleans(), st.just(0)),
        st.tuples(
            st.just("move-host"), st.sampled_from(HOSTS), st.sampled_from(CLUSTERS), st.just(0)
        ),
        st.tuples(
            st.just("release"),
            st.sampled_from(("STOPPED", "DONE")),
            st.sampled_from(JOBS),
            st.just(0),
        ),
        st.tuples(st.just("sync"), st.just(""), st.just(""), st.just(0)),
    ),
    max_size=40,
)


async def apply(store: Store, op: tuple[Any, ...]) -> None:
    kind, a, b, n = op
    if kind == "gang":
        for host in a:
            await apply(store, ("alloc", host, b, n))
    elif kind == "alloc":
        # As `fleet.start_job` does: allocations go in with a write of the job's row,
        # which places the job in the cluster of the machines it takes.
        gpu = a < "m4"
        async with store.transaction() as conn:
            await conn.execute(
                "INSERT OR IGNORE INTO allocations (host, workload_id, job, gpus, cpu, since_us) "
                "VALUES (?, ?, ?, ?, ?, 0)",
                (a, b[0], b[1], n if gpu else 0, 0 if gpu else 1),
            )
            await conn.execute(
                "UPDATE jobs SET cluster = (SELECT cluster FROM machines WHERE host = ?) "
                "WHERE workload_id = ? AND job = ?",
                (a, *b),
            )
    elif kind == "free":
        await store.write(
            "DELETE FROM allocations WHERE host = ? AND workload_id = ? AND job = ?", (a, *b)
        )
    elif kind == "free-job":
        await store.write("DELETE FROM allocations WHERE workload_id = ? AND job = ?", b)
    elif kind == "state":
        await store.write("UPDATE jobs SET state = ? WHERE workload_id = ? AND job = ?", (a, *b))
    elif kind == "priority":
        await store.write("UPDATE jobs SET priority = ? WHERE workload_id = ? AND job = ?", (a, *b))
    elif kind == "move-job":
        await store.write("UPDATE jobs SET cluster = ? WHERE workload_id = ? AND job = ?", (a, *b))
    elif kind == "health":
        await fleet.set_health(store, [a], b)
    elif kind == "move-host":
        await store.write("UPDATE machines SET cluster = ? WHERE host = ?", (b, a))
    elif kind == "release":
        # The CM's own release: the job's row logs its cluster, the machines
        # other clusters hold now (moved) are logged by the release itself.
        await fleet.release_job(store, CM_FENCE, 0, b[0], b[1], a)


def contents(ledger: ClusterLedger) -> dict[str, Any]:
    return {
        "machines": ledger.machines,
        "healthy": ledger.healthy,
        "jobs": {
            k: (h.priority, h.started_us, h.gpus, sorted(h.cpu_hosts))
            for k, h in ledger.jobs.items()
        },
        "gpus_used": {h: n for h, n in ledger.gpus_used.items() if n},
        "cpu_busy": ledger.cpu_busy,
        "transit": ledger.transit,
        "snapshot": ledger.snapshot(),
    }


async def history(ops: list[tuple[Any, ...]]) -> None:
    async with Store.open_ctx(":memory:", (MAST_SCHEMA,)) as store:
        await fleet.put_clusters(
            store,
            [DynamicCluster(id=c, region="r", ml=True, intended_machines=4) for c in CLUSTERS],
        )
        await fleet.put_machines(store, [machine(i) for i in range(len(HOSTS))])
        for i, (w, j) in enumerate(JOBS):
            await store.write(
                "INSERT INTO jobs (workload_id, job, cluster, attempt, state, priority, "
                "started_us) VALUES (?, ?, ?, 0, 'RUNNING', ?, ?)",
                (w, j, CLUSTERS[i % 2], 3 + i % 3, 10 * i),
            )
        await store.write(
            "INSERT INTO leases (role, holder, epoch, expires_at_us) VALUES (?, ?, ?, ?)",
            (CM_FENCE.role, CM_FENCE.holder, CM_FENCE.epoch, 1 << 60),
        )
        caller = Direct(store)
        ledgers = {c: await ClusterLedger.fetch(caller, c) for c in CLUSTERS}
        for op in [*ops, ("sync", "", "", 0)]:
            if op[0] != "sync":
                await apply(store, op)
                continue
            for c in CLUSTERS:
                ledgers[c] = await ledgers[c].sync(caller)
                fresh = await ClusterLedger.fetch(caller, c)
                assert contents(ledgers[c]) == contents(fresh), (c, op)


@settings(max_examples=examples(250), deadline=None)
@given(OPS)
def test_a_synced_ledger_holds_what_a_fresh_load_holds(ops: list[tuple[Any, ...]]) -> None:
    asyncio.run(history(ops))


def test_a_sync_with_nothing_changed_reads_one_row_set() -> None:
    async def run() -> int:
        async with Store.open_ctx(":memory:", (MAST_SCHEMA,)) as store:
            await fleet.put_clusters(
                store, [DynamicCluster(id="c0", region="r", ml=True, intended_machines=4)]
            )
            await fleet.put_machines(store, [machine(i) for i in range(6)])
            caller = Direct(store)
            ledger = await ClusterLedger.fetch(caller, "c0")
            caller.calls = 0
            assert await ledger.sync(caller) is ledger
            return caller.calls

    assert asyncio.run(run()) == 1


def test_a_release_is_seen_by_the_cluster_a_held_machine_moved_to() -> None:
    # m5 (cluster c0) is held by w0's job; RAS moves it to c1, where it is in
    # transit; the job's release must reach c1's ledger, not only c0's.
    asyncio.run(
        history(
            [
                ("alloc", "m5", JOBS[0], 0),
                ("sync", "", "", 0),
                ("move-host", "m5", "c1", 0),
                ("sync", "", "", 0),
                ("release", "DONE", JOBS[0], 0),
            ]
        )
    )


def test_a_job_sharing_a_machine_with_a_changed_one_keeps_its_other_machines() -> None:
    # w0's job holds m0 and m1, w1's shares m0; w1's job changes: the sync reads
    # m0 whole and finds w0's job there, whose allocation on m1 must be read too.
    asyncio.run(
        history(
            [
                ("alloc", "m0", JOBS[0], 2),
                ("alloc", "m1", JOBS[0], 2),
                ("alloc", "m0", JOBS[1], 2),
                ("sync", "", "", 0),
                ("state", "STOPPED", JOBS[1], 0),
            ]
        )
    )
