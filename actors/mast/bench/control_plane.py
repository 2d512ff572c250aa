"""`mastemu bench gms|rms|day`: the scalability figures of MAST §5.4, measured here.

- `gms`: one GMS-scan pass's computation over a queue of pending workloads
  (10,000 of 500 tenants by default): the usage window, the credits of
  expressions 10 and 11, the quota scan and the ⟨priority, credit⟩ order —
  exactly what `GlobalScheduler` computes between its store reads and its
  store write. The paper's production GMS took ~34 s for 6,000-10,000
  workloads; the target here is 50 ms.
- `rms`: one placement decision (`place_workload`, what an RMS bids with) in
  a region the size of MAST's largest: 20 dynamic clusters, 20,000 GPUs
  (2,500 8-GPU machines) and 64,000 CPU machines, about 90% allocated.
  Once for a workload that fits in free resources and once for one that must
  preempt; targets 1.3 ms and 5.5 ms (§5.4, Fig. 10). Building the snapshots
  (and their per-snapshot placement indices) is not part of a decision — the
  RMS caches them until its view changes — and is reported separately.
- `day`: the whole emulator on the `meta-day` preset for 24 emulated hours
  (run database in a temporary folder); targets 144x compression (a day in
  ten minutes) and a peak RSS within 4 GiB.
- `chaos-sweep`: the `chaos` scenario over 200 seeds (`--seeds`, `--jobs`),
  every invariant checked; zero violations expected (exit 1 otherwise).

The small benchmarks report the best of `repeat` runs (steadier than the mean
on a shared machine). Every benchmark takes its sizes from `options`, so the
tests can run them small. Importing this module registers them
(`actors.plugin` does).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.common.cm.ledger import ClusterLedger
from actors.mast import distributions as dist
from actors.mast.workload.tenants import PRIORITY_SHARES
from actors.policies.mast.placement.capacity import index_of
from actors.policies.mast.placement.snapshot import JobRequest, WorkloadPlan
from emulator.units import US_PER_S
from store.mast.records import GPUS_PER_MACHINE, Machine

DAY_US = 86_400 * US_PER_S


def _best_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The fastest of `repeat` calls of `fn`, in ms, and its (last) result."""
    best = float("inf")
    out = None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000, out


def _opt(options: dict[str, Any], name: str, default: Any) -> Any:
    value = options.get(name)
    return default if value is None else value


# ---- gms ---------------------------------------------------------------------------
def bench_gms(options: dict[str, Any]) -> dict[str, Any]:
    """One GMS-scan pass's computation over a queue (see the module docstring).

    The queue holds `workloads` pending workloads (the generator's, on the
    `meta-day` world, of `tenants` tenants) and `running` running ones; the
    usage window already holds a day of samples, one per 5-minute pass.
    """
    from actors.mast.gms import GMSParams, scan_pass
    from actors.mast.workload.generator import GeneratorParams, generate, load_for_world
    from actors.mast.workload.tenants import make_tenants
    from actors.mast.world import preset
    from actors.policies.mast import ranking
    from store.mast.records import QueueEntry

    n_workloads = int(_opt(options, "workloads", 10_000))
    n_tenants = int(_opt(options, "tenants", 500))
    n_running = int(_opt(options, "running", n_workloads // 5))
    repeat = int(_opt(options, "repeat", 20))
    rng = random.Random("bench-gms:1")
    world = preset("meta-day")
    tenants = make_tenants(n_tenants, rng, world)
    specs: list[Any] = []
    # `meta-day` draws about 10,000 workloads a day.
    span_us = max(3_600 * US_PER_S, DAY_US * (n_workloads + n_running) // 9_000)
    while len(specs) < n_workloads + n_running:
        gen = GeneratorParams(load=load_for_world(world))
        specs, _ = generate(gen, rng, tenants=tenants, world=world, span_us=span_us)
        span_us *= 2
    now_us = span_us

    def entry(spec: Any, state: str) -> QueueEntry:
        return QueueEntry(
            id=spec.id,
            tenant=spec.tenant,
            state=state,
            priority=0,
            credit=0.0,
            within_quota=False,
            region=None,
            auction_id=None,
            gms_epoch=None,
            submitted_us=spec.submit_at_us,
            queued_us=spec.submit_at_us,
            attempts=0,
            preemptions=0,
            started_us=None,
            finished_us=None,
            version=0,
        )

    rng.shuffle(specs)
    queued = sorted((entry(s, "PENDING") for s in specs[:n_workloads]), key=lambda e: e.id)
    active = sorted(
        (entry(s, "RUNNING") for s in specs[n_workloads : n_workloads + n_running]),
        key=lambda e: e.id,
    )
    sizes = {s.id: (s.gpus, s.cpu_machines) for s in specs[: n_workloads + n_running]}
    quotas = {t.name: (t.priority, t.gpu_quota, t.cpu_quota) for t in tenants}
    params = GMSParams(regions=["bench"])
    pass_us = 300 * US_PER_S
    window = ranking.UsageWindow()
    passes = params.usage_window // pass_us  # a day of 5-minute passes, this one the last
    for k in range(1, passes):
        past = active[: len(active) * (k % 7 + 3) // 10]
        at_us = now_us - (passes - k) * pass_us
        _, window = scan_pass(window, at_us, [], past, sizes, quotas, params)
    scan_ms, (rows, after) = _best_ms(
        lambda: scan_pass(window, now_us, queued, active, sizes, quotas, params), repeat
    )
    within = sum(1 for row in rows if row[4])
    return {
        "workloads": len(queued),
        "tenants": len(tenants),
        "running_workloads": len(active),
        "window_samples": len(after.samples),
        "within_quota": within,
        "scan_ms": round(scan_ms, 3),
        "target_ms": 50,
        "ratio": round(scan_ms / 50, 3),
        "repeat": repeat,
    }


# ---- rms ---------------------------------------------------------------------------
RACK_MACHINES = 16
GPU_TYPES = (("H100", 0.6), ("A100", 0.4))


def _priority(rng: random.Random) -> int:
    return rng.choices(range(len(PRIORITY_SHARES)), weights=PRIORITY_SHARES)[0]


def build_region(
    *,
    clusters: int = 20,
    gpu_machines: int = 2_500,
    cpu_machines: int = 64_000,
    allocated: float = 0.9,
    now_us: int = 30 * DAY_US,
    seed: int = 1,
) -> list[ClusterLedger]:
    """A region's dynamic clusters as an RMS holds them, about `allocated` in use.

    Every cluster gets an equal share of the GPU machines (60% H100, 40% A100)
    and CPU machines, in racks of 16 of one kind. Jobs drawn from the paper's
    size distributions (GPUs 16/64/128, machines 72/180/205) and priority mix,
    started in the last three days, are packed rack by rack until the cluster
    is full; then random jobs are removed until about `1 - allocated` of each
    kind is free again, which leaves the scattered holes finished jobs leave.
    A few free machines (0.5%) are unhealthy.
    """
    rng = random.Random(f"bench-rms:{seed}")
    views = []
    for c in range(clusters):
        cid = f"bench/c{c:02d}"
        machines: list[Machine] = []
        kinds: list[tuple[str | None, int]] = []
        n_gpu = gpu_machines // clusters + (1 if c < gpu_machines % clusters else 0)
        left = n_gpu
        for i, (gpu_type, share) in enumerate(GPU_TYPES):
            n = left if i == len(GPU_TYPES) - 1 else round(n_gpu * share)
            kinds.append((gpu_type, n))
            left -= n
        kinds.append((None, cpu_machines // clusters + (1 if c < cpu_machines % clusters else 0)))
        rack = 0
        by_kind: dict[str | None, list[str]] = {}
        for gpu_type, n in kinds:
            hosts = by_kind.setdefault(gpu_type, [])
            for start in range(0, n, RACK_MACHINES):
                rack_id = f"{cid}/r{rack:04d}"
                rack += 1
                for m in range(min(RACK_MACHINES, n - start)):
                    host = f"{rack_id}/m{m:02d}"
                    hosts.append(host)
                    machines.append(
                        Machine(
                            host=host,
                            region="bench",
                            rack=rack_id,
                            fault_domain=f"{cid}/fd0",
                            gpu_type=gpu_type,
                            gpus=GPUS_PER_MACHINE if gpu_type else 0,
                            cluster=cid,
                        )
                    )
        jobs: list[tuple[tuple[str, str], list[tuple[str, int]], list[str]]] = []
        for gpu_type, hosts in by_kind.items():
            if gpu_type is None:
                i = 0
                while i < len(hosts):
                    n = min(400, max(1, round(dist.MACHINES_PER_WORKLOAD.sample(rng))))
                    jobs.append(((f"w{len(jobs):05d}", "preprocess"), [], hosts[i : i + n]))
                    i += n
                continue
            free = [(h, GPUS_PER_MACHINE) for h in hosts]
            i = 0
            while i < len(free):
                need = min(512, dist.round_gpus(dist.GPUS_PER_GPU_WORKLOAD.sample(rng)))
                taken: list[tuple[str, int]] = []
                while need and i < len(free):
                    host, units = free[i]
                    n = min(units, need)
                    taken.append((host, n))
                    need -= n
                    if n == units:
                        i += 1
                    else:
                        free[i] = (host, units - n)
                jobs.append(((f"w{len(jobs):05d}", "trainer"), taken, []))
        rng.shuffle(jobs)
        gpus_total = GPUS_PER_MACHINE * n_gpu
        cpus_total = kinds[-1][1]
        gpus_used, cpus_used = gpus_total, cpus_total
        low = allocated - 0.01
        kept = []
        for key, gpus, cpus in jobs:
            # Remove jobs while above the target, none that would go >1% below it.
            g, n = sum(x for _, x in gpus), len(cpus)
            gpu_out = gpus_used > allocated * gpus_total and gpus_used - g >= low * gpus_total
            cpu_out = cpus_used > allocated * cpus_total and cpus_used - n >= low * cpus_total
            if (g and gpu_out) or (n and cpu_out):
                gpus_used, cpus_used = gpus_used - g, cpus_used - n
                continue
            kept.append((key, gpus, cpus))
        busy = {h for _, gpus, cpus in kept for h in [*(h for h, _ in gpus), *cpus]}
        idle = sorted(m.host for m in machines if m.host not in busy)
        sick = set(rng.sample(idle, len(machines) // 200))
        view = ClusterLedger(cid, [(m, m.host not in sick) for m in machines])
        for key, gpus, cpus in sorted(kept):
            started = now_us - rng.randrange(1, 3 * DAY_US)
            view.allocate(key, _priority(rng), started, gpus, cpus)
        views.append(view)
    return views


def _workload(workload_id: str, priority: int, jobs: list[tuple[str, str | None, int, int]]):
    return [
        JobRequest(
            workload_id=workload_id,
            job=name,
            gpu_type=gpu_type,
            gpus=gpus,
            cpu_machines=cpus,
            priority=priority,
        )
        for name, gpu_type, gpus, cpus in jobs
    ]


def _decision_mix(snaps: list[Any], n: int, now_us: int) -> dict[str, Any]:
    """Decisions for `n` generated workloads (H100/A100 ones), averaged by outcome.

    The workloads come from the generator (sizes, jobs) with priorities from
    the paper's mix; each is decided on the same snapshots (nothing is
    booked), best of 3. Closer to the paper's Fig. 10, an average over what
    arrives, than the two fixed decisions.
    """
    from actors.mast.workload.generator import GeneratorParams, generate
    from actors.mast.workload.tenants import make_tenants
    from actors.mast.world import preset
    from actors.policies.mast.placement.place import place_workload

    rng = random.Random("bench-rms-mix:1")
    world = preset("meta-day")
    tenants = make_tenants(12, rng, world)
    specs, _ = generate(
        GeneratorParams(workloads_per_day=max(1, n) * 2.0),
        rng,
        tenants=tenants,
        world=world,
        span_us=DAY_US,
    )
    times: dict[str, list[float]] = {"no_preemption": [], "preemption": [], "unschedulable": []}
    for spec in specs:
        if sum(map(len, times.values())) >= n:
            break
        if any(j.gpus and j.gpu_type not in ("H100", "A100") for j in spec.jobs):
            continue
        priority = _priority(rng)
        jobs = [(j.name, j.gpu_type, j.gpus, j.cpu_machines) for j in spec.jobs]
        requests = _workload(spec.id, priority, jobs)
        ms, plan = _best_ms(lambda r=requests: place_workload(snaps, r, now_us), 3)
        if not isinstance(plan, WorkloadPlan):
            times["unschedulable"].append(ms)
        else:
            times["preemption" if plan.preempts else "no_preemption"].append(ms)
    out: dict[str, Any] = {}
    for outcome, values in times.items():
        out[f"mix_{outcome}"] = len(values)
        out[f"mix_{outcome}_ms_avg"] = round(sum(values) / len(values), 3) if values else None
        out[f"mix_{outcome}_ms_max"] = round(max(values), 3) if values else None
    return out


def bench_rms(options: dict[str, Any]) -> dict[str, Any]:
    """One placement decision without and with preemption (see the module docstring).

    Also timed, apart from the decision: building the region's snapshots and
    their placement indices from scratch (what a scan's refresh costs at
    most), and bringing the awarded cluster's snapshot and index up to date
    after an award (what the next decision waits for).
    """
    from actors.policies.mast.placement.place import place_workload

    clusters = int(_opt(options, "clusters", 20))
    gpu_machines = int(_opt(options, "gpu_machines", 2_500))
    cpu_machines = int(_opt(options, "cpu_machines", 64_000))
    repeat = int(_opt(options, "repeat", 20))
    now_us = 30 * DAY_US

    def region() -> list[ClusterLedger]:
        return build_region(
            clusters=clusters, gpu_machines=gpu_machines, cpu_machines=cpu_machines, now_us=now_us
        )

    t0 = time.perf_counter()
    views = region()
    setup_s = time.perf_counter() - t0
    snapshot_ms = index_ms = float("inf")
    for _ in range(max(1, repeat // 5)):
        views = region()
        t0 = time.perf_counter()
        snaps = [v.snapshot() for v in views]
        t1 = time.perf_counter()
        for s in snaps:
            index_of(s)  # built on first use, then kept with the snapshot
        t2 = time.perf_counter()
        snapshot_ms = min(snapshot_ms, (t1 - t0) * 1000)
        index_ms = min(index_ms, (t2 - t1) * 1000)
    gpus = GPUS_PER_MACHINE * gpu_machines
    per_cluster = gpus // clusters
    # Fits in the free tenth of most clusters (~60 H100 GPUs, ~320 CPU
    # machines): a 32-GPU trainer, an 8-GPU evaluator and a preprocess job of
    # 72 CPU machines (the paper's median workload), at the commonest level.
    fits = _workload(
        "bench-free",
        3,
        [("trainer", "H100", 32, 0), ("evaluator", "H100", 8, 0), ("preprocess", None, 0, 72)],
    )
    # Needs more than any cluster has free: an H100 trainer of 40% of a
    # cluster's GPUs and a preprocess job of a sixth of its CPU machines, at
    # priority 1 (it may preempt levels 2-7).
    big_gpus = max(8, (per_cluster * 4 // 10) // 8 * 8)
    big_cpus = max(1, cpu_machines // clusters // 6)
    preempts = _workload(
        "bench-preempt", 1, [("trainer", "H100", big_gpus, 0), ("preprocess", None, 0, big_cpus)]
    )
    free_ms, free_plan = _best_ms(lambda: place_workload(snaps, fits, now_us), repeat)
    preempt_ms, preempt_plan = _best_ms(lambda: place_workload(snaps, preempts, now_us), repeat)
    for name, plan, want in (("free", free_plan, False), ("preemption", preempt_plan, True)):
        if not isinstance(plan, WorkloadPlan) or plan.preempts is not want:
            raise RuntimeError(f"bench rms: the {name} workload got {plan!r}")
    mix = _decision_mix(snaps, int(_opt(options, "mix", 200)), now_us)
    # The award, as `RegionalScheduler.award` books it; then the next decision's
    # snapshots (only the awarded clusters changed).
    by_id = {v.cluster: v for v in views}
    for job_plan in preempt_plan.jobs:
        view = by_id[job_plan.cluster_id]
        for victim in job_plan.victims:
            view.release(victim)
        view.allocate(("bench-preempt", job_plan.job), 1, now_us, job_plan.gpus, job_plan.cpu_hosts)
    t0 = time.perf_counter()
    for view in views:
        index_of(view.snapshot())
    update_ms = (time.perf_counter() - t0) * 1000
    allocated_gpus = sum(m.gpus_total - m.gpus_free for s in snaps for m in s.machines)
    cpu_hosts = [m for s in snaps for m in s.machines if not m.is_gpu]
    return {
        "clusters": clusters,
        "gpus": gpus,
        "cpu_machines": cpu_machines,
        "running_jobs": sum(len(s.running) for s in snaps),
        "gpu_allocated": round(allocated_gpus / max(1, gpus), 3),
        "cpu_allocated": round(
            sum(1 for m in cpu_hosts if not m.cpu_free) / max(1, len(cpu_hosts)), 3
        ),
        "no_preemption_ms": round(free_ms, 3),
        "preemption_ms": round(preempt_ms, 3),
        "no_preemption_target_ms": 1.3,
        "preemption_target_ms": 5.5,
        "no_preemption_ratio": round(free_ms / 1.3, 3),
        "preemption_ratio": round(preempt_ms / 5.5, 3),
        "preemption_victims": len(preempt_plan.victims),
        "snapshot_build_ms": round(snapshot_ms, 3),
        "index_build_ms": round(index_ms, 3),
        "update_after_award_ms": round(update_ms, 3),
        **mix,
        "setup_s": round(setup_s, 2),
        "repeat": repeat,
    }


# ---- chaos-sweep ---------------------------------------------------------------------
def bench_chaos_sweep(options: dict[str, Any]) -> dict[str, Any]:
    """`chaos` (the random nemesis) over `seeds` (default 1-200) in `jobs` processes
    (or on the Dask cluster of `cluster`).

    Zero violations are expected: the JSON counts them and names, per failing
    seed and invariant, the first message and the command that reproduces
    it; failing runs' databases are kept in `keep_dir` (default `runs/`).
    Each failing seed is also printed on stderr as soon as it is known.
    """
    import os
    import sys

    from emulator.run.sweep import INTERNAL_ERROR, SeedRun, seed_lines, sweep

    seeds: range = _opt(options, "seeds", range(1, 201))
    cluster = options.get("cluster")
    # On Dask, one run per worker thread unless --jobs caps it.
    jobs = int(_opt(options, "jobs", 0 if cluster is not None else os.cpu_count() or 1))

    def show(run: SeedRun) -> None:
        if run.failed:
            for line in seed_lines(run, f"mastemu run chaos --seed {run.seed}"):
                print(line, file=sys.stderr)

    result = sweep(
        "chaos",
        seeds,
        jobs=jobs,
        keep_dir=Path(_opt(options, "keep_dir", "runs")),
        on_result=show,
        cluster=cluster,
    )
    seed_wall = [r.wall_s for r in result.runs] or [0.0]
    return {
        "scenario": "chaos",
        "seeds": len(result.runs),
        "seed_range": f"{seeds.start}-{seeds.stop - 1}",
        "jobs": jobs,
        "on": cluster.describe() if cluster is not None else "local processes",
        "clean": sum(not r.failed for r in result.runs),
        "violations": result.violations,
        "internal_errors": sum(r.status == INTERNAL_ERROR for r in result.runs),
        "failures": result.failures(),
        "sometimes": result.to_json()["sometimes"],
        "wall_s": round(result.wall_s, 1),
        "seeds_per_min": round(60 * len(result.runs) / max(result.wall_s, 1e-9), 1),
        "seed_wall_s": {
            "mean": round(sum(seed_wall) / len(seed_wall), 2),
            "max": round(max(seed_wall), 2),
        },
    }
