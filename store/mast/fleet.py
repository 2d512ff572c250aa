"""The fleet: dynamic clusters, machines, jobs placed in clusters, allocations.

A cluster manager owns its cluster's rows and writes them under its lease
(`cm/CLUSTER`); the region's RAS owns membership (which cluster a machine is
in) and writes it under its own (`ras/REGION`). Starting a job re-checks
capacity inside the transaction, so no GPU is ever handed to two running jobs
even if two plans raced, nor a machine to jobs of two clusters: capacity
counts every allocation on the host, whichever cluster's job holds it.

Left-over allocations: when the GMS gives a dark region up (`actors/mast/gms.py`),
its jobs start again elsewhere (the job's one row moves there, a new
attempt) while the allocations of the dead attempt stay on the dark
region's machines, still counted as used. The region's CM frees them when
it comes back (`free_leftovers`); until then they keep their GPUs from
anyone else, which errs on the side of never promising a machine twice.
Writes that concern one attempt of a job take its number, so a CM acting on
an attempt that another cluster has since replaced changes nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from store.db import Store
from store.events import store_event
from store.mast.queue import FENCE, Fence
from store.mast.queue import spec as workload_spec
from store.mast.records import DynamicCluster, Machine


class Allocation(msgspec.Struct, frozen=True):
    """`gpus` GPUs of `host` (or the whole CPU machine when `cpu`) held by one job."""

    host: str
    workload_id: str
    job: str
    gpus: int
    cpu: bool
    since_us: int


class JobRow(msgspec.Struct, frozen=True, kw_only=True):
    """A job placed in a cluster: STARTING, RUNNING, CHECKPOINTING, STOPPED or DONE."""

    workload_id: str
    job: str
    cluster: str | None
    attempt: int
    state: str
    priority: int
    checkpoint_us: int
    started_us: int | None
    cm_epoch: int | None


MACHINE_COLS = "host, region, rack, fault_domain, gpu_type, gpus, cpu_cores, memory_gb, cluster"
JOB_COLS = (
    "workload_id, job, cluster, attempt, state, priority, checkpoint_us, started_us, cm_epoch"
)


async def put_clusters(store: Store, clusters: Iterable[DynamicCluster]) -> None:
    async with store.transaction() as conn:
        await conn.executemany(
            "INSERT OR REPLACE INTO clusters (id, region, ml, intended) VALUES (?, ?, ?, ?)",
            [(c.id, c.region, int(c.ml), c.intended_machines) for c in clusters],
        )


async def put_machines(store: Store, machines: Iterable[Machine]) -> None:
    async with store.transaction() as conn:
        await conn.executemany(
            f"INSERT OR REPLACE INTO machines ({MACHINE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    m.host,
                    m.region,
                    m.rack,
                    m.fault_domain,
                    m.gpu_type,
                    m.gpus,
                    m.cpu_cores,
                    m.memory_gb,
                    m.cluster,
                )
                for m in machines
            ],
        )


async def clusters(store: Store, region: str | None = None) -> list[DynamicCluster]:
    sql = "SELECT id, region, ml, intended FROM clusters"
    rows = await (
        store.fetchall(sql + " WHERE region = ? ORDER BY id", (region,))
        if region is not None
        else store.fetchall(sql + " ORDER BY id")
    )
    return [DynamicCluster(id=i, region=r, ml=bool(m), intended_machines=n) for i, r, m, n in rows]


async def machines(store: Store, cluster: str) -> list[tuple[Machine, bool]]:
    """The cluster's machines with their health, by host name."""
    rows = await store.fetchall(
        f"SELECT {MACHINE_COLS}, healthy FROM machines WHERE cluster = ? ORDER BY host",
        (cluster,),
    )
    return [(machine_of(row[:-1]), bool(row[-1])) for row in rows]


@functools.lru_cache(maxsize=1 << 19)
def machine_of(row: tuple[Any, ...]) -> Machine:
    """The record of a `machines` row (cached: schedulers read every machine at every scan)."""
    return Machine(**dict(zip(Machine.__struct_fields__, row, strict=True)))


async def region_hardware(store: Store) -> dict[str, dict[str, int]]:
    """Region → {GPU type or "cpu": machines} over ML clusters (for hardware checks)."""
    rows = await store.fetchall(
        "SELECT m.region, coalesce(m.gpu_type, 'cpu'), count(*) FROM machines m "
        "JOIN clusters c ON c.id = m.cluster WHERE c.ml = 1 GROUP BY 1, 2"
    )
    out: dict[str, dict[str, int]] = {}
    for region, kind, n in rows:
        out.setdefault(region, {})[kind] = n
    return out


async def region_machines(store: Store, region: str) -> list[tuple[Machine, bool]]:
    """Every machine of a region, in a cluster or not, with its health, by host name."""
    rows = await store.fetchall(
        f"SELECT {MACHINE_COLS}, healthy FROM machines WHERE region = ? ORDER BY host", (region,)
    )
    return [(machine_of(row[:-1]), bool(row[-1])) for row in rows]


class _Moved(Exception):
    """A membership move found a machine no longer in the cluster it was moved from."""


@store_event("fleet.membership")
async def set_membership(
    store: Store,
    fence: Fence,
    now_us: int,
    moves: Sequence[tuple[str, str | None, str | None]],
    intended: dict[str, int],
) -> bool:
    """Apply one RAS pass: machines change cluster, clusters get their intended sizes.

    `moves` are (host, from cluster, to cluster); `intended` maps a cluster
    to its intended machines (all kinds). All or nothing, fenced by the RAS
    lease (`ras/REGION`): False, and no change, if the fence does not hold or
    a machine is no longer in the cluster the move starts from.
    """
    params = fence.params(now_us)
    try:
        async with store.transaction() as conn:
            ok = next(iter(await conn.execute_fetchall(f"SELECT {FENCE}", params)))[0]
            if not ok:
                return False
            for host, old, new in moves:
                cur = await conn.execute(
                    "UPDATE machines SET cluster = ? WHERE host = ? AND cluster IS ?",
                    (new, host, old),
                )
                if cur.rowcount != 1:
                    raise _Moved(host)
            await conn.executemany(
                "UPDATE clusters SET intended = ? WHERE id = ?",
                [(n, cluster) for cluster, n in sorted(intended.items())],
            )
    except _Moved:
        return False
    return True


async def strays(store: Store, cluster: str) -> list[tuple[str, str]]:
    """Jobs placed in `cluster` that hold a machine no longer in it (RAS moved it away)."""
    rows = await store.fetchall(
        "SELECT DISTINCT j.workload_id, j.job FROM jobs j "
        "JOIN allocations a ON a.workload_id = j.workload_id AND a.job = j.job "
        "JOIN machines m ON m.host = a.host "
        "WHERE j.cluster = ? AND m.cluster IS NOT j.cluster ORDER BY 1, 2",
        (cluster,),
    )
    return [(w, j) for w, j in rows]


@store_event("fleet.health")
async def set_health(store: Store, hosts: Sequence[str], healthy: bool) -> None:
    async with store.transaction() as conn:
        await conn.executemany(
            "UPDATE machines SET healthy = ? WHERE host = ?", [(int(healthy), h) for h in hosts]
        )


async def allocations(store: Store, cluster: str) -> list[Allocation]:
    rows = await store.fetchall(
        "SELECT a.host, a.workload_id, a.job, a.gpus, a.cpu, a.since_us FROM allocations a "
        "JOIN machines m ON m.host = a.host WHERE m.cluster = ? "
        "ORDER BY a.host, a.workload_id, a.job",
        (cluster,),
    )
    return [allocation_of(row) for row in rows]


@functools.lru_cache(maxsize=1 << 17)
def allocation_of(row: tuple[Any, ...]) -> Allocation:
    """The record of an `allocations` row (cached like `machine_of`)."""
    host, workload_id, job, gpus, cpu, since_us = row
    return Allocation(host, workload_id, job, gpus, bool(cpu), since_us)


async def jobs(store: Store, cluster: str, states: Sequence[str] | None = None) -> list[JobRow]:
    sql = f"SELECT {JOB_COLS} FROM jobs WHERE cluster = ?"
    params: tuple[str, ...] = (cluster,)
    if states:
        sql += f" AND state IN ({', '.join('?' for _ in states)})"
        params += tuple(states)
    rows = await store.fetchall(sql + " ORDER BY workload_id, job", params)
    return [JobRow(**dict(zip(JobRow.__struct_fields__, r, strict=True))) for r in rows]


async def job(store: Store, workload_id: str, job_name: str) -> JobRow | None:
    row = await store.fetchone(
        f"SELECT {JOB_COLS} FROM jobs WHERE workload_id = ? AND job = ?", (workload_id, job_name)
    )
    return JobRow(**dict(zip(JobRow.__struct_fields__, row, strict=True))) if row else None


# A job holds machines in these states (STOPPED and DONE ones hold none).
LIVE_JOB_STATES = ("STARTING", "RUNNING", "CHECKPOINTING")


async def dispatches(
    store: Store,
    cluster: str,
    region: str,
    states: Sequence[str],
    workload_id: str | None = None,
) -> list[tuple[JobRow, int | None]]:
    """The cluster's jobs in `states`, each with the auction of the dispatch it still serves.

    None instead of the auction when the job's workload is no longer
    DISPATCHING or RUNNING in `region` under the dispatch this attempt was
    started for: it went back to the queue after the attempt started (the
    queue's `queued_us` is later than the job's `started_us`), and perhaps
    on to another region or to its end. Such an attempt is nobody's work
    any more: its CM releases it and restarts nothing. With `workload_id`,
    that workload's jobs only.
    """
    marks = ", ".join("?" for _ in states)
    sql = (
        f"SELECT {', '.join('j.' + c.strip() for c in JOB_COLS.split(','))}, "
        "CASE WHEN w.state IN ('DISPATCHING', 'RUNNING') AND w.region = ? "
        "AND coalesce(j.started_us, 0) >= w.queued_us THEN w.auction_id END "
        "FROM jobs j LEFT JOIN workloads w ON w.id = j.workload_id "
        f"WHERE j.cluster = ? AND j.state IN ({marks})"
    )
    params: tuple[Any, ...] = (region, cluster, *states)
    if workload_id is not None:
        sql += " AND j.workload_id = ?"
        params += (workload_id,)
    rows = await store.fetchall(sql + " ORDER BY j.workload_id, j.job", params)
    return [
        (JobRow(**dict(zip(JobRow.__struct_fields__, r[:-1], strict=True))), r[-1]) for r in rows
    ]


async def gang_placed(store: Store, workload_id: str) -> bool:
    """Whether every job of the workload holds machines, so that its gang may train.

    True when each job named in the workload's spec is in a live state, or
    when the queue already holds the workload RUNNING: its gang was placed
    whole, and a job that ended since (done, or restarted after a machine
    failure) does not undo that.
    """
    row = await store.fetchone("SELECT state FROM workloads WHERE id = ?", (workload_id,))
    if row is None:
        return False
    if row[0] == "RUNNING":
        return True
    spec = await workload_spec(store, workload_id)
    marks = ", ".join("?" for _ in LIVE_JOB_STATES)
    live = await store.fetchall(
        f"SELECT job FROM jobs WHERE workload_id = ? AND state IN ({marks})",
        (workload_id, *LIVE_JOB_STATES),
    )
    return spec is not None and {j.name for j in spec.jobs} <= {name for (name,) in live}


@store_event("fleet.start")
async def start_job(
    store: Store,
    fence: Fence,
    now_us: int,
    workload_id: str,
    job_name: str,
    cluster: str,
    priority: int,
    gpus: Sequence[tuple[str, int]],
    cpu_hosts: Sequence[str],
) -> tuple[int, int] | None:
    """Allocate a job's GPUs and CPU machines and mark it STARTING, or change nothing.

    Returns `(attempt, checkpoint_us)`: the attempt number (1 for the first
    start) and the saved progress it resumes from. Refused (None) when the CM
    no longer holds its lease, a machine is unhealthy or outside the cluster,
    the request exceeds what is free, or a machine still holds a left-over
    allocation of the same job (module docstring) until its CM frees it.
    """
    params = fence.params(now_us)
    async with store.transaction() as conn:
        hosts = sorted({h for h, _ in gpus} | set(cpu_hosts))
        marks = ", ".join(f":h{i}" for i in range(len(hosts)))
        # The fence and the machines' state in one round trip (the fence is the
        # same in every row; with no row, it is asked for on its own).
        rows = await conn.execute_fetchall(
            f"SELECT {FENCE}, m.host, m.gpus, m.healthy, m.cluster, "
            "coalesce((SELECT sum(a.gpus) FROM allocations a WHERE a.host = m.host), 0), "
            "(SELECT count(*) FROM allocations a WHERE a.host = m.host AND a.cpu = 1), "
            "EXISTS (SELECT 1 FROM allocations a WHERE a.host = m.host "
            "AND a.workload_id = :w AND a.job = :j) "
            f"FROM machines m WHERE m.host IN ({marks})",
            {
                **params,
                **{f"h{i}": h for i, h in enumerate(hosts)},
                "w": workload_id,
                "j": job_name,
            },
        )
        rows = list(rows)
        if rows:
            ok = rows[0][0]
        else:
            ok = next(iter(await conn.execute_fetchall(f"SELECT {FENCE}", params)))[0]
        if not ok:
            return None
        if any(row[-1] for row in rows):
            return None  # a left-over allocation of this job: the row would collide
        state = {h: (g, bool(ok_), c, used, cpu) for _, h, g, ok_, c, used, cpu, _ in rows}
        for host, n in gpus:
            total, healthy, in_cluster, used, _ = state.get(host, (0, False, None, 0, 0))
            if not healthy or in_cluster != cluster or used + n > total:
                return None
        for host in cpu_hosts:
            total, healthy, in_cluster, used, cpu_used = state.get(host, (1, False, None, 0, 1))
            if not healthy or in_cluster != cluster or total != 0 or cpu_used:
                return None
        await conn.executemany(
            "INSERT INTO allocations (host, workload_id, job, gpus, cpu, since_us) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(h, workload_id, job_name, n, 0, now_us) for h, n in gpus]
            + [(h, workload_id, job_name, 0, 1, now_us) for h in cpu_hosts],
        )
        rows = await conn.execute_fetchall(
            "INSERT INTO jobs (workload_id, job, cluster, attempt, state, priority, started_us, "
            "cm_epoch) VALUES (?, ?, ?, 1, 'STARTING', ?, ?, ?) "
            "ON CONFLICT (workload_id, job) DO UPDATE SET cluster = excluded.cluster, "
            "attempt = attempt + 1, state = 'STARTING', priority = excluded.priority, "
            "started_us = excluded.started_us, cm_epoch = excluded.cm_epoch "
            "RETURNING attempt, checkpoint_us",
            (workload_id, job_name, cluster, priority, now_us, fence.epoch),
        )
        attempt, saved_us = next(iter(rows))
    return int(attempt), int(saved_us)


@store_event("fleet.state")
async def set_job_state(
    store: Store,
    fence: Fence,
    now_us: int,
    workload_id: str,
    job_name: str,
    state: str,
    attempt: int | None = None,
) -> bool:
    """Move a job to RUNNING or CHECKPOINTING (fenced by the CM lease, and `attempt` if given)."""
    changed = await store.write(
        "UPDATE jobs SET state = :state WHERE workload_id = :w AND job = :j "
        "AND (:attempt IS NULL OR attempt = :attempt) "
        f"AND state NOT IN ('STOPPED', 'DONE') AND {FENCE}",
        {
            **fence.params(now_us),
            "state": state,
            "w": workload_id,
            "j": job_name,
            "attempt": attempt,
        },
    )
    return changed == 1


@store_event("fleet.checkpoint")
async def checkpoint(
    store: Store, now_us: int, workload_id: str, job_name: str, attempt: int, progress_us: int
) -> bool:
    """Save a job's progress (work done, µs) from its current attempt's agent.

    Fenced by the attempt: an agent of an earlier attempt writes nothing, and
    progress never moves backwards.
    """
    changed = await store.write(
        "UPDATE jobs SET checkpoint_us = ? WHERE workload_id = ? AND job = ? AND attempt = ? "
        "AND checkpoint_us <= ?",
        (progress_us, workload_id, job_name, attempt, progress_us),
    )
    return changed == 1


@store_event("fleet.release")
async def release_job(
    store: Store,
    fence: Fence,
    now_us: int,
    workload_id: str,
    job_name: str,
    state: str,
    attempt: int | None = None,
) -> bool:
    """Free a job's machines and set it STOPPED (preempted, failed) or DONE.

    With `attempt`, only while that attempt is the job's current one: once
    the job started again elsewhere (module docstring) the row is not this
    caller's any more, and nothing changes (False).
    """
    if state not in ("STOPPED", "DONE"):
        raise ValueError(f"release to {state!r}: expected STOPPED or DONE")
    params = {
        **fence.params(now_us),
        "state": state,
        "w": workload_id,
        "j": job_name,
        "attempt": attempt,
    }
    async with store.transaction() as conn:
        # Fenced UPDATE first: when it changes the job's row, the fence holds
        # and one round trip is saved; otherwise ask for the fence on its own.
        cur = await conn.execute(
            "UPDATE jobs SET state = :state WHERE workload_id = :w AND job = :j "
            f"AND (:attempt IS NULL OR attempt = :attempt) AND {FENCE}",
            params,
        )
        if cur.rowcount != 1:
            ok = next(iter(await conn.execute_fetchall(f"SELECT {FENCE}", params)))[0]
            if not ok or attempt is not None:
                return False
            await conn.execute(
                "DELETE FROM allocations WHERE workload_id = :w AND job = :j", params
            )
            return True
        # The row's update logged the change in the job's cluster: log it in the
        # other clusters its machines are in now (RAS moved them), then delete
        # without a trigger per row (schema: `quiet`).
        await conn.execute("UPDATE fleet_seq SET n = n + 1, quiet = 1")
        await conn.execute(
            "INSERT INTO fleet_changes (cluster, host, workload_id, job, seq) "
            "SELECT DISTINCT m.cluster, '', :w, :j, (SELECT n FROM fleet_seq) "
            "FROM allocations a JOIN machines m ON m.host = a.host "
            "WHERE a.workload_id = :w AND a.job = :j AND m.cluster IS NOT NULL "
            "AND m.cluster IS NOT (SELECT cluster FROM jobs WHERE workload_id = :w AND job = :j) "
            "ON CONFLICT DO UPDATE SET seq = excluded.seq",
            params,
        )
        await conn.execute("DELETE FROM allocations WHERE workload_id = :w AND job = :j", params)
        await conn.execute("UPDATE fleet_seq SET quiet = 0")
    return True


@store_event("fleet.leftovers")
async def free_leftovers(
    store: Store, fence: Fence, now_us: int, cluster: str
) -> list[tuple[str, str, str]]:
    """Free the allocations on the cluster's machines that no current attempt holds.

    Those of an earlier attempt (allocated before the job's row last
    started, whichever cluster it started in) or of a job that holds
    nothing any more (STOPPED, DONE). Fenced by the cluster's CM lease;
    returns the `(host, workload, job)` rows freed, sorted.
    """
    params = {**fence.params(now_us), "cluster": cluster}
    marks = ", ".join(f"'{s}'" for s in LIVE_JOB_STATES)
    async with store.transaction() as conn:
        ok = next(iter(await conn.execute_fetchall(f"SELECT {FENCE}", params)))[0]
        if not ok:
            return []
        rows = await conn.execute_fetchall(
            "SELECT a.host, a.workload_id, a.job FROM allocations a "
            "JOIN machines m ON m.host = a.host "
            "LEFT JOIN jobs j ON j.workload_id = a.workload_id AND j.job = a.job "
            "WHERE m.cluster = :cluster AND (j.job IS NULL "
            f"OR j.state NOT IN ({marks}) OR a.since_us < j.started_us) "
            "ORDER BY 1, 2, 3",
            params,
        )
        freed = [(h, w, j) for h, w, j in rows]
        await conn.executemany(
            "DELETE FROM allocations WHERE host = ? AND workload_id = ? AND job = ?", freed
        )
    return freed
