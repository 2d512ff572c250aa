"""`mastemu bench tetris`: one daily Tetris pass (MAST §3.4-3.5) at production-like size.

A seeded synthetic warehouse of 100,000 tables in 20 regions read by 50,000
recurring jobs; the pass is the hill climbing (`plan_tetris`) followed by
the extra replicas (`plan_replicas`), timed once (a pass is seconds long, so
best-of-repeat would only multiply the wait). The paper's production pass
takes about five hours; the target here is 60 s.

The instance, all drawn from `random.Random("bench-tetris:<seed>")`:
- tables in namespaces of 50 (a team's tables); sizes from the paper's
  replication sizes (p50/p90/p99 = 565 MB / 103 GB / 7.5 TB); popularity
  from Fig. 3's workloads per partition;
- homes skewed: a namespace's home is region i with weight 1/(i+1), and 85%
  of its tables live there, the rest anywhere (with the same skew) — so jobs
  straddle regions and the first regions are crowded; 85% of the tables
  have a DR replica in another region;
- jobs read 1-8 tables of one namespace, popular ones more often, and 15%
  also read one table from elsewhere; 70% are ML jobs (H100/A100/V100,
  priorities from the paper's mix, daily GPU-hours from its sizes), the
  rest Spark or Presto jobs;
- GPU types are spread unevenly (a region has each type with probability
  0.4-0.6) and the supply of each type is 1/1.2 of its demand: GPUs are
  scarce, as in §3.2. Storage capacity is 1.6x the bytes held overall but
  only 1.1x what the crowded regions hold; CPU caps leave 5-100% headroom.
"""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

from actors.mast import distributions as dist
from actors.mast.workload.tenants import PRIORITY_SHARES
from actors.policies.mast.tetris.cost import (
    TetrisJob,
    TetrisParams,
    TetrisRegion,
    TetrisSnapshot,
    TetrisTable,
    job_region,
)
from actors.policies.mast.tetris.plan import plan_tetris
from actors.policies.mast.tetris.replicas import plan_replicas

NAMESPACE_TABLES = 50
GPU_TYPES = (("H100", 0.5, 0.5), ("A100", 0.35, 0.6), ("V100", 0.15, 0.4))  # demand share, presence
APPS = ("presto", "spark")


def _opt(options: dict[str, Any], name: str, default: Any) -> Any:
    value = options.get(name)
    return default if value is None else value


def build_instance(
    *, tables: int = 100_000, regions: int = 20, jobs: int = 50_000, seed: int = 1
) -> TetrisSnapshot:
    """The synthetic warehouse described in the module docstring."""
    rng = random.Random(f"bench-tetris:{seed}")
    names = [f"r{i:02d}" for i in range(regions)]
    skew = list(itertools.accumulate(1.0 / (i + 1) for i in range(regions)))
    n_ns = max(1, tables // NAMESPACE_TABLES)
    ns_home = rng.choices(names, cum_weights=skew, k=n_ns)
    ns_members: list[list[int]] = [[] for _ in range(n_ns)]
    rows: list[TetrisTable] = []
    popularity: list[float] = []
    for i in range(tables):
        ns = i % n_ns
        ns_members[ns].append(i)
        home = ns_home[ns] if rng.random() < 0.85 else rng.choices(names, cum_weights=skew)[0]
        dr = rng.choice([r for r in names if r != home]) if rng.random() < 0.85 else None
        rows.append(
            TetrisTable(
                name=f"t{i:06d}",
                size_bytes=int(dist.TABLE_SIZE_BYTES.sample(rng)),
                home=home,
                replicas=(dr,) if dr else (),
                dr_region=dr,
            )
        )
        popularity.append(dist.WORKLOADS_PER_TABLE.sample(rng))
    ns_weight = list(itertools.accumulate(sum(popularity[t] for t in m) for m in ns_members))
    all_weight = list(itertools.accumulate(popularity))
    gpu_cum = list(itertools.accumulate(share for _, share, _ in GPU_TYPES))
    job_rows: list[TetrisJob] = []
    for k in range(jobs):
        members = ns_members[rng.choices(range(n_ns), cum_weights=ns_weight)[0]]
        n = min(len(members), 1 + min(7, int(rng.expovariate(0.5))))
        picks = set(rng.choices(members, weights=[popularity[t] for t in members], k=n))
        if rng.random() < 0.15:
            picks.add(rng.choices(range(tables), cum_weights=all_weight)[0])
        read = tuple(rows[t].name for t in sorted(picks))
        priority = rng.choices(range(len(PRIORITY_SHARES)), weights=PRIORITY_SHARES)[0]
        if rng.random() < 0.7:
            gpus = dist.round_gpus(dist.GPUS_PER_GPU_WORKLOAD.sample(rng))
            job_rows.append(
                TetrisJob(
                    id=f"j{k:06d}",
                    kind="ml",
                    tables=read,
                    gpu_type=GPU_TYPES[rng.choices(range(3), cum_weights=gpu_cum)[0]][0],
                    gpu_hours=round(gpus * rng.uniform(2.0, 24.0), 1),
                    priority=priority,
                )
            )
        else:
            job_rows.append(
                TetrisJob(
                    id=f"j{k:06d}",
                    kind="analytics",
                    tables=read,
                    cpu_hours=round(rng.uniform(10.0, 2_000.0), 1),
                    priority=priority,
                    app=rng.choice(APPS),
                )
            )
    # Supply: 1/1.2 of each type's demand, spread over the regions that have it.
    supply: dict[str, dict[str, float]] = {r: {} for r in names}
    for g, _, presence in GPU_TYPES:
        demand = sum(j.gpu_hours for j in job_rows if j.gpu_type == g)
        having = [r for r in names if rng.random() < presence] or [rng.choice(names)]
        weight = {r: rng.uniform(0.3, 1.0) for r in having}
        for r in having:
            supply[r][g] = round(demand / 1.2 * weight[r] / sum(weight.values()), 1)
    held = dict.fromkeys(names, 0)
    for t in rows:
        for r in (t.home, *t.replicas):
            held[r] += t.size_bytes
    mean = sum(held.values()) * 1.6 / regions
    homes = {t.name: t.home for t in rows}
    sizes = {t.name: t.size_bytes for t in rows}
    cpu: dict[tuple[str, str], float] = {}
    for job in job_rows:
        r = job_region(job, homes, sizes)
        if job.app is not None and r is not None:
            cpu[job.app, r] = cpu.get((job.app, r), 0.0) + job.cpu_hours
    region_rows = tuple(
        TetrisRegion(
            name=r,
            storage_bytes=int(max(held[r] * 1.1, mean * rng.uniform(0.5, 1.5))),
            gpu_supply_hours=supply[r],
            cpu_capacity_hours={
                app: round(cpu.get((app, r), 0.0) * rng.uniform(1.05, 2.0) + 500.0, 1)
                for app in APPS
            },
        )
        for r in names
    )
    return TetrisSnapshot(tables=tuple(rows), jobs=tuple(job_rows), regions=region_rows)


def bench_tetris(options: dict[str, Any]) -> dict[str, Any]:
    """One daily Tetris pass on the synthetic warehouse (see the module docstring).

    Options: `tables`, `regions`, `jobs`, `seed`, `version`, `move_quota_bytes`.
    `pass_s` is the hill climbing (state, queue, moves, and the before/after
    costs recomputed from scratch) plus the extra replicas; building the
    instance is `setup_s`.
    """
    n_tables = int(_opt(options, "tables", 100_000))
    n_regions = int(_opt(options, "regions", 20))
    n_jobs = int(_opt(options, "jobs", 50_000))
    seed = int(_opt(options, "seed", 1))
    params = TetrisParams(
        version=str(_opt(options, "version", "tetris-v2")),
        move_quota_bytes=int(_opt(options, "move_quota_bytes", 10**15)),
    )
    t0 = time.perf_counter()
    snap = build_instance(tables=n_tables, regions=n_regions, jobs=n_jobs, seed=seed)
    t1 = time.perf_counter()
    plan = plan_tetris(snap, params)
    t2 = time.perf_counter()
    replicas = plan_replicas(snap, plan, params)
    t3 = time.perf_counter()
    before, after = plan.cost_before, plan.cost_after
    return {
        "tables": n_tables,
        "regions": n_regions,
        "jobs": n_jobs,
        "version": params.version,
        "pass_s": round(t3 - t1, 3),
        "hill_climbing_s": round(t2 - t1, 3),
        "replicas_s": round(t3 - t2, 3),
        "target_s": 60,
        "ratio": round((t3 - t1) / 60, 3),
        "moves": len(plan.moves),
        "bytes_planned": plan.bytes_planned,
        "move_quota_bytes": params.move_quota_bytes,
        "queued": plan.queued,
        "skipped_quota": plan.skipped_quota,
        "skipped_stale": plan.skipped_stale,
        "replicas": len(replicas.orders),
        "replica_bytes": sum(o.size_bytes for o in replicas.orders),
        "replicas_by_reason": {
            reason: sum(1 for o in replicas.orders if o.reason == reason)
            for reason in ("dr", "colocation", "hot")
        },
        "deletions": len(replicas.deletions),
        "unplaced": len(replicas.unplaced),
        "cost_before": round(before.total, 6),
        "cost_after": round(after.total, 6),
        "terms_before": _terms(before),
        "terms_after": _terms(after),
        "home_share_before": round(before.home_share, 4),
        "home_share_after": round(after.home_share, 4),
        "violations_after": len(after.violations),
        "setup_s": round(t1 - t0, 2),
    }


def _terms(cost: Any) -> dict[str, float]:
    return {
        "cross_region": round(cost.cross_region, 6),
        "gpu_balance": round(cost.gpu_balance, 6),
        "storage_balance": round(cost.storage_balance, 6),
    }
