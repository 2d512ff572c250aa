"""The data warehouse behind the workloads: what Tetris and the migration service work on.

Built on top of `actors.mast.workload.generator.generate`, which already chose the tables,
their sizes, home regions and which ML workloads read them (the 3/17/45
sharing of MAST Fig. 3). `build_warehouse` keeps all of that unchanged and
adds, as a pure function of the `random.Random` passed in (MAST §2, §3):

- Namespaces → tables → partitions. The generator's ML tables plus
  `analytics_only_share` as many tables that only analytics read (`atb…`).
  Tables go to `ceil(tables / tables_per_namespace)` namespaces (at most
  `namespaces_max`, none empty) with log-normal namespace sizes. A table has
  daily partitions (`age_days` 0 is the newest), their count log-uniform in
  [`partitions_per_table_min`, `partitions_per_table_max`], their sizes
  log-normally uneven and summing exactly to the table's size.
- Access history (`Warehouse.readers`): what Tetris knows of who reads each
  table, "estimated from the past history of the tables and jobs" (§3.3):
  per table and GPU type, how many distinct ML jobs of the history read it.
  A recurring template is one job per GPU type it uses (it reads the same
  tables every day).
  First-time workloads of the run cannot be known in advance, but the past
  had its own: `history_days` of them, at the input's rate of first-time
  workloads (their count over `span_us`), each a fresh draw — its GPU types
  those of a random first-time input workload, its table count that of
  another, its tables drawn without replacement in proportion to their
  popularity (distinct ML readers in the input: `actors.mast.workload.generator` deals
  reads by each table's target popularity). The history depends on the
  input only through these marginals — the mix of GPU types, of table
  counts, and each table's popularity — never on which run workload reads
  which table on which GPU: Tetris learns what kinds of jobs read a table,
  not what a given future workload will read.
- Replicas outside the home region. DR rule: every table has one DR replica
  in a region other than its home, chosen for the hardware its past readers
  need (`actors.policies.mast.tetris.replicas.dr_preference`: GPU types the home
  lacks first, then all the readers' types), ties drawn in proportion to
  storage (equal weights if no region has storage). Extra replicas for hot
  tables: one per `readers_per_extra_replica` ML readers, at most
  `extra_replicas_max`, in regions other than home and DR, drawn in
  proportion to the region's GPUs of the types the table's past readers used
  (storage if none) — Tetris replicates hot tables per GPU type (§3.5). A
  replica is `copying` with probability `copying_share` (partly copied, no
  lag) and otherwise `ready`.
- Lag rule: a ready replica is behind its home by `lag_base_s` plus the time
  to ship the newest daily partition at `refresh_bytes_s`. The defaults fit
  the paper's transfer times (§3.4: 2.1 h for 565 MB, 4.9 h for 7.5 TB: about
  2 h whatever the size, plus ~750 MB/s).
- Analytics (Spark/Presto-like): `ceil(tables / tables_per_app)` apps
  (at most `apps_max`) of `jobs_per_app_min..max` jobs; a job reads 1 to
  `tables_per_analytics_job_max` tables, each an ML table (chosen by ML
  readers: hot data is hot for everyone) with probability `analytics_ml_share`
  and else an analytics-only table, and uses log-normal CPU-hours per day.
  An app's CPU capacity in region r (expression 5 of MAST Fig. 4) is
  `cpu_capacity_headroom × max(demand now in r, app total × r's CPU share)`:
  today's placement fits, and the app may grow into CPU-rich regions.
- `Table.ml_readers` counts distinct workload ids reading the table, as the
  generator's sharing statistics do (over a multi-day span each re-submission
  of a recurring template is a workload of its own).
- Recurring ML usage: one `RecurringMlJob` per recurring template and GPU type,
  with the GPU-hours per day its submissions ask for.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from actors.mast import distributions as dist
from actors.mast.world import WorldModel
from actors.policies.mast.tetris.replicas import dr_preference
from actors.policies.mast.tetris.settings import WarehouseParams
from emulator.units import US_PER_S
from store.mast.records import DataTable, WorkloadSpec

DAY_S = 86_400.0
DAY_US = round(DAY_S * US_PER_S)


class _Out(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the warehouse records (subclasses repeat kw_only: msgspec does not inherit it)."""


class Partition(_Out, kw_only=True):
    """One immutable daily partition; `age_days` 0 is the newest."""

    age_days: int
    size_bytes: int


class Table(_Out, kw_only=True):
    """A table: its partitions' sizes sum to `size_bytes`; all live in its home region."""

    name: str
    namespace: str
    size_bytes: int
    home_region: str
    ml_readers: int  # distinct ML workloads (ids) reading it; 0 for analytics-only
    partitions: tuple[Partition, ...]


class Namespace(_Out, kw_only=True):
    name: str
    tables: tuple[str, ...]


ReplicaState = Literal["copying", "ready"]


class Replica(_Out, kw_only=True):
    """A copy of a table outside its home region.

    `lag_s` is how far a ready replica is behind the home (None while copying);
    `bytes_done` is the copy's progress (`size_bytes` once ready).
    """

    table: str
    region: str
    kind: Literal["dr", "extra"]
    state: ReplicaState
    lag_s: float | None
    bytes_done: int


class AnalyticsJob(_Out, kw_only=True):
    id: str
    app: str
    tables: tuple[str, ...]
    cpu_hours: float  # per day


class AnalyticsApp(_Out, kw_only=True):
    """An application; Σ CPU-hours of its jobs placed in r must stay below `cpu_capacity[r]`."""

    name: str
    jobs: tuple[str, ...]
    cpu_capacity: dict[str, float]  # region → CPU-hours per day, every region listed


class RecurringMlJob(_Out, kw_only=True):
    """The daily GPU demand of one recurring template on one GPU type (None: CPU only)."""

    id: str  # the template's first workload id, plus "/<gpu type>" if it uses several
    tenant: str
    tables: tuple[str, ...]
    gpu_type: str | None
    gpu_hours: float  # per day: Σ gpus × work hours × submissions per day
    submissions_per_day: float
    priority: int


class TableReaders(_Out, kw_only=True):
    """From the access history: `jobs` distinct ML jobs read `table` on `gpu_type`."""

    table: str
    gpu_type: str
    jobs: int


class Warehouse(_Out, kw_only=True):
    namespaces: tuple[Namespace, ...]
    tables: tuple[Table, ...]
    replicas: tuple[Replica, ...]
    apps: tuple[AnalyticsApp, ...]
    analytics_jobs: tuple[AnalyticsJob, ...]
    ml_jobs: tuple[RecurringMlJob, ...]
    readers: tuple[TableReaders, ...]  # the access history, by table then GPU type

    def catalog(self) -> list[DataTable]:
        """The tables as store records, with their ready replicas' regions."""
        ready: dict[str, list[str]] = {}
        for r in self.replicas:
            if r.state == "ready":
                ready.setdefault(r.table, []).append(r.region)
        return [
            DataTable(
                name=t.name,
                size_bytes=t.size_bytes,
                home_region=t.home_region,
                replicas=tuple(ready.get(t.name, ())),
            )
            for t in self.tables
        ]


def _split(total: int, weights: Sequence[float]) -> list[int]:
    """Integers summing exactly to `total`, roughly proportional to `weights`."""
    cum = [0.0]
    for w in weights:
        cum.append(cum[-1] + w)
    cuts = [round(total * c / cum[-1]) for c in cum[:-1]] + [total]
    return [b - a for a, b in itertools.pairwise(cuts)]


def _pick(rng: random.Random, options: list[str], weights: list[float]) -> str:
    if not any(w > 0 for w in weights):
        weights = [1.0] * len(options)
    return rng.choices(options, weights=weights)[0]


def majority_home(tables: Sequence[str], homes: Mapping[str, str], sizes: Mapping[str, int]) -> str:
    """R(job) of an analytics job (§3.3): the home region of most of its tables.

    Ties go to the region holding more of the job's bytes, then to the name.
    """
    count: dict[str, tuple[int, int]] = {}
    for t in tables:
        n, b = count.get(homes[t], (0, 0))
        count[homes[t]] = (n + 1, b + sizes[t])
    return min(count, key=lambda r: (-count[r][0], -count[r][1], r))


def _partitions(p: WarehouseParams, rng: random.Random, size: int) -> tuple[Partition, ...]:
    lo, hi = math.log(p.partitions_per_table_min), math.log(p.partitions_per_table_max)
    n = max(1, min(round(math.exp(rng.uniform(lo, hi))), size))
    weights = [rng.lognormvariate(0.0, p.partition_size_sigma) for _ in range(n)]
    # One byte each first, so that no partition is empty.
    return tuple(
        Partition(age_days=i, size_bytes=1 + s) for i, s in enumerate(_split(size - n, weights))
    )


def _ml_jobs(
    p: WarehouseParams, workloads: Sequence[WorkloadSpec], tenant_priority: Mapping[str, int]
) -> list[RecurringMlJob]:
    # A recurring template re-submits the same tenant, jobs and tables.
    groups: dict[tuple[str, tuple[object, ...]], list[WorkloadSpec]] = {}
    for w in sorted(workloads, key=lambda w: (w.submit_at_us, w.id)):
        if w.recurring:
            groups.setdefault((w.tenant, w.jobs), []).append(w)
    out: list[RecurringMlJob] = []
    for (tenant, _), subs in groups.items():
        if tenant not in tenant_priority:
            raise ValueError(f"workload {subs[0].id}: tenant {tenant!r} not in tenant_priority")
        times = [w.submit_at_us for w in subs]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        period_s = statistics.median(gaps) / US_PER_S if gaps else p.recurring_period_s
        per_day = DAY_S / max(period_s, 1.0)
        gpu_hours: dict[str | None, float] = {}
        for j in subs[0].jobs:
            if j.gpus:
                hours = j.gpus * j.work_us / (3600 * US_PER_S) * per_day
                gpu_hours[j.gpu_type] = gpu_hours.get(j.gpu_type, 0.0) + hours
        types: list[str | None] = sorted(t for t in gpu_hours if t is not None) or [None]
        for t in types:
            out.append(
                RecurringMlJob(
                    id=subs[0].id if len(types) == 1 else f"{subs[0].id}/{t}",
                    tenant=tenant,
                    tables=subs[0].input_tables,
                    gpu_type=t,
                    gpu_hours=gpu_hours.get(t, 0.0),
                    submissions_per_day=per_day,
                    priority=tenant_priority[tenant],
                )
            )
    return out


def _history(
    p: WarehouseParams,
    rng: random.Random,
    workloads: Sequence[WorkloadSpec],
    ml_jobs: Sequence[RecurringMlJob],
    popularity: Mapping[str, int],
    span_us: int,
) -> dict[str, dict[str, int]]:
    """Jobs in the access history per table and GPU type (module docstring)."""
    readers: dict[str, dict[str, int]] = {}

    def read(table: str, gpu_type: str) -> None:
        per_type = readers.setdefault(table, {})
        per_type[gpu_type] = per_type.get(gpu_type, 0) + 1

    for job in ml_jobs:
        if job.gpu_type is not None:
            for t in job.tables:
                read(t, job.gpu_type)
    once = [w for w in workloads if not w.recurring]
    names = sorted(t for t, n in popularity.items() if n > 0)
    if not once or not names or p.history_days <= 0:
        return readers
    past = round(len(once) * p.history_days * DAY_US / max(span_us, 1))
    if past > p.history_workloads_max:
        raise ValueError(f"{past:,} past workloads in the history; raise history_workloads_max")
    cum = list(itertools.accumulate(popularity[t] for t in names))
    # Only the marginals of the input enter the draw, sorted so that which run
    # workload read which table on which GPU cannot matter.
    gpu_mix = sorted(tuple(sorted({j.gpu_type for j in w.jobs if j.gpu_type})) for w in once)
    table_counts = sorted(len(w.input_tables) for w in once)
    for _ in range(past):
        gpu_types = rng.choice(gpu_mix)
        wanted = min(rng.choice(table_counts), len(names))
        chosen: set[str] = set()
        # A draw without replacement by rejection; a popular table can crowd the
        # rest out, so the tries are bounded and the workload may read fewer.
        for _ in range(wanted * p.history_tries_per_table):
            if len(chosen) == wanted:
                break
            chosen.add(names[bisect.bisect_right(cum, rng.random() * cum[-1])])
        for t in sorted(chosen):
            for g in gpu_types:
                read(t, g)
    return readers


def _analytics(
    p: WarehouseParams,
    rng: random.Random,
    world: WorldModel,
    n_tables: int,
    ml_weights: Mapping[str, float],
    only: Sequence[tuple[str, int, str]],
    homes: Mapping[str, str],
    sizes: Mapping[str, int],
) -> tuple[list[AnalyticsApp], list[AnalyticsJob]]:
    """Apps, their jobs and each app's CPU capacity per region (module docstring)."""
    ml_names = list(ml_weights)
    weights = list(ml_weights.values()) if any(ml_weights.values()) else [1.0] * len(ml_names)
    cum = list(itertools.accumulate(weights))
    only_names = [name for name, _, _ in only]
    regions = [r.name for r in world.regions]
    cpu = [float(r.cpu_machines) for r in world.regions]
    cpu_share = [c / sum(cpu) if sum(cpu) else 1.0 / len(cpu) for c in cpu]
    n_apps = min(p.apps_max, max(1, math.ceil(n_tables / p.tables_per_app))) if n_tables else 0
    apps: list[AnalyticsApp] = []
    jobs: list[AnalyticsJob] = []
    for a in range(n_apps):
        app = f"app{a:0{max(4, len(str(n_apps)))}d}"
        demand = dict.fromkeys(regions, 0.0)
        mine: list[str] = []
        for j in range(rng.randint(p.jobs_per_app_min, p.jobs_per_app_max)):
            chosen: set[str] = set()
            for _ in range(rng.randint(1, p.tables_per_analytics_job_max)):
                if ml_names and (not only_names or rng.random() < p.analytics_ml_share):
                    chosen.add(rng.choices(ml_names, cum_weights=cum)[0])
                else:
                    chosen.add(rng.choice(only_names))
            draw = p.cpu_hours_median * rng.lognormvariate(0.0, p.cpu_hours_sigma)
            job = AnalyticsJob(
                id=f"{app}/j{j}",
                app=app,
                tables=tuple(sorted(chosen)),
                cpu_hours=min(p.cpu_hours_max, draw),
            )
            jobs.append(job)
            mine.append(job.id)
            demand[majority_home(job.tables, homes, sizes)] += job.cpu_hours
        total = sum(demand.values())
        capacity = {
            r: p.cpu_capacity_headroom * max(demand[r], total * cpu_share[i])
            for i, r in enumerate(regions)
        }
        apps.append(AnalyticsApp(name=app, jobs=tuple(mine), cpu_capacity=capacity))
    return apps, jobs


def build_warehouse(
    tables: Sequence[DataTable],
    workloads: Sequence[WorkloadSpec],
    world: WorldModel,
    params: WarehouseParams,
    rng: random.Random,
    *,
    tenant_priority: Mapping[str, int],
    span_us: int = DAY_US,
) -> Warehouse:
    """The warehouse around `generate`'s tables and workloads (module docstring).

    `workloads` were submitted over `span_us`; the access history draws
    first-time workloads at their rate over that span.

    Raises:
        ValueError: duplicate table names, a home region not in `world`, a
            workload reading an unknown table, a recurring workload's tenant
            missing from `tenant_priority`, more partitions than
            `params.partitions_max`, or more past workloads than
            `params.history_workloads_max`.
    """
    # Re-check the declared bounds: a Struct built in code skips them.
    p = msgspec.convert(msgspec.structs.asdict(params), WarehouseParams)
    regions = [r.name for r in world.regions]
    storage = [r.storage_pb for r in world.regions]
    hw = {r.name: r for r in world.regions}
    ml = {t.name: t for t in tables}
    if len(ml) != len(tables):
        raise ValueError("duplicate table names in the input")
    readers: dict[str, set[str]] = {name: set() for name in ml}
    for w in workloads:
        for name in w.input_tables:
            if name not in ml:
                raise ValueError(f"workload {w.id} reads unknown table {name!r}")
            readers[name].add(w.id)
    ml_jobs = _ml_jobs(p, workloads, tenant_priority)
    # The history draws from a stream of its own, so how long it is does not
    # shift the draws that follow.
    history_rng = random.Random(rng.getrandbits(64))
    popularity = {name: len(ids) for name, ids in readers.items()}
    history = _history(p, history_rng, workloads, ml_jobs, popularity, span_us)
    gpus_of = {r.name: frozenset(g for g, n in r.gpu_machines.items() if n) for r in world.regions}

    # Tables: the input's, then the analytics-only ones.
    base: list[tuple[str, int, str]] = []
    for t in tables:
        if t.home_region not in regions:
            raise ValueError(f"table {t.name}: home region {t.home_region!r} not in the world")
        base.append((t.name, t.size_bytes, t.home_region))
    n_only = round(p.analytics_only_share * len(tables))
    width = max(5, len(str(n_only)))
    for i in range(n_only):
        size = round(dist.TABLE_SIZE_BYTES.sample(rng))
        base.append((f"atb{i:0{width}d}", size, _pick(rng, regions, storage)))

    n_ns = min(p.namespaces_max, max(1, math.ceil(len(base) / p.tables_per_namespace)))
    ns_names = [f"ns{i:0{max(3, len(str(n_ns)))}d}" for i in range(n_ns)]
    ns_weights = [rng.lognormvariate(0.0, p.namespace_size_sigma) for _ in range(n_ns)]
    counts = [1 + c for c in _split(max(0, len(base) - n_ns), ns_weights)]
    order = list(range(len(base)))
    rng.shuffle(order)
    ns_of: dict[str, str] = {}
    at = 0
    for ns, c in zip(ns_names, counts, strict=True):
        for i in order[at : at + c]:
            ns_of[base[i][0]] = ns
        at += c

    out_tables: list[Table] = []
    replicas: list[Replica] = []
    total_parts = 0
    for name, size, home in base:
        parts = _partitions(p, rng, size)
        total_parts += len(parts)
        if total_parts > p.partitions_max:
            raise ValueError(f"more than {p.partitions_max:,} partitions; raise partitions_max")
        n_readers = len(readers.get(name, ()))
        out_tables.append(
            Table(
                name=name,
                namespace=ns_of[name],
                size_bytes=size,
                home_region=home,
                ml_readers=n_readers,
                partitions=parts,
            )
        )
        others = [r for r in regions if r != home]
        if not others:
            continue
        past = history.get(name, {})
        score = {r: dr_preference(past, gpus_of[home], gpus_of[r]) for r in others}
        best = [r for r in others if score[r] == max(score.values())]
        dr = _pick(rng, best, [hw[r].storage_pb for r in best])
        picked = [dr]
        wanted = min(p.extra_replicas_max, n_readers // p.readers_per_extra_replica)
        for _ in range(min(wanted, len(others) - 1)):
            left = [r for r in others if r not in picked]
            gpu_types = {g for g, n in past.items() if n > 0}
            gpu = [float(sum(hw[r].gpu_machines.get(g, 0) for g in gpu_types)) for r in left]
            if not any(gpu):
                gpu = [hw[r].storage_pb for r in left]
            picked.append(_pick(rng, left, gpu))
        lag_s = p.lag_base_s + parts[0].size_bytes / p.refresh_bytes_s
        for k, region in enumerate(picked):
            copying = rng.random() < p.copying_share
            replicas.append(
                Replica(
                    table=name,
                    region=region,
                    kind="dr" if k == 0 else "extra",
                    state="copying" if copying else "ready",
                    lag_s=None if copying else lag_s,
                    bytes_done=math.floor(size * rng.random()) if copying else size,
                )
            )

    homes = {t.name: t.home_region for t in out_tables}
    sizes = {t.name: t.size_bytes for t in out_tables}
    ml_weights = {t.name: float(len(readers[t.name])) for t in tables}
    apps, jobs = _analytics(p, rng, world, len(base), ml_weights, base[len(tables) :], homes, sizes)
    members: dict[str, list[str]] = {ns: [] for ns in ns_names}
    for t in out_tables:
        members[t.namespace].append(t.name)
    return Warehouse(
        namespaces=tuple(Namespace(name=ns, tables=tuple(members[ns])) for ns in ns_names),
        tables=tuple(out_tables),
        replicas=tuple(replicas),
        apps=tuple(apps),
        analytics_jobs=tuple(jobs),
        ml_jobs=tuple(ml_jobs),
        readers=tuple(
            TableReaders(table=t, gpu_type=g, jobs=n)
            for t in sorted(history)
            for g, n in sorted(history[t].items())
        ),
    )
