"""Seeded MAST-like tenants, workloads and tables, and CSV traces of workloads.

What is modelled (MAST §2, §5.1; numbers in `actors.mast.distributions`):
- Tenants sit at priority levels 0–6, or 7 ("unspecified", the lowest). A
  workload's level is drawn from the paper's mix, 3/20/16/54/0.2/0.5/0.02 %
  with 6 % unspecified (the paper's shares add up to 99.72 %; we normalise),
  and then a tenant of that level in proportion to its GPU quota.
- Arrivals: first-time workloads arrive as a Poisson process; recurring ones
  are templates that re-submit the same jobs and tables every
  `recurring_period_s` at a random phase. The templates' phases form a Poisson
  process over one period, so the recurring share of submissions is
  `recurring_share` in expectation.
- Busy periods (`busy`): inside each `BusyWindow` the arrival rate is
  multiplied by its `factor` (overlapping windows multiply). The process is
  thinned (Lewis–Shedler): candidates are drawn at the peak rate and each is
  kept with probability rate(t)/peak, which gives an inhomogeneous Poisson
  process with that rate. It applies to first-time arrivals and to the
  phases of recurring templates (their later re-submissions keep their
  phase). Without windows no extra random draws are made, so a generator
  without `busy` produces exactly what it did before.
- A GPU workload (`gpu_share` of them) is a trainer on one GPU type (chosen
  in proportion to the world's supply) with a total GPU count from the
  16/64/128 distribution, plus a CPU preprocess job that brings the
  workload's machine count to a draw from the 72/180/205 distribution (the
  two draws are tied by a Gaussian copula, `size_correlation`), plus
  sometimes an 8-GPU evaluator. A CPU workload is a CPU trainer plus a
  preprocess job. Each request is capped at `region_share_max` of the region
  best supplied with it, since a workload runs in one region.
- Durations: GPU 20 min/6.7 h/66 h, CPU 38 min/7.9 h/38 h; all jobs of a
  workload share one `work_us`.
- Tables: each distinct workload (template) reads 1–4 tables. Every table gets
  a target number of readers from the 3/17/45 distribution (the first
  `hot_tables` from its top 0.1 %), capped at `table_share_max` of the
  templates; reads are dealt to templates so the targets hold exactly. Home
  regions follow region storage, sizes follow 565 MB/103 GB/7.5 TB.

Everything is a pure function of the `random.Random` passed in.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
import random
from collections.abc import Iterator, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from statistics import NormalDist
from typing import Annotated, Any, get_args

import msgspec
from msgspec import Meta

from actors.mast import distributions as dist
from actors.mast.world import WorldModel
from emulator.units import US_PER_S
from store.mast.records import (
    GPUS_PER_MACHINE,
    PRIORITY_LEVELS,
    PRIORITY_LOWEST,
    DataTable,
    JobRole,
    JobSpec,
    Tenant,
    WorkloadSpec,
)

DAY_S = 86_400.0
# MAST §2: share of workloads per priority level 0–6, then "unspecified" (7).
PRIORITY_SHARES = (0.03, 0.20, 0.16, 0.54, 0.002, 0.005, 0.0002, 0.06)
# The paper's 10,000s of workloads a day run on O(100,000) GPUs; our default
# 10,000 a day suits the ~50,000 GPUs of the `meta-day` preset.
REFERENCE_GPUS = 50_000

Probability = Annotated[float, Meta(ge=0.0, le=1.0)]
Share = Annotated[float, Meta(ge=0.0)]
LevelShares = Annotated[
    tuple[Share, ...], Meta(min_length=PRIORITY_LEVELS + 1, max_length=PRIORITY_LEVELS + 1)
]
TableShares = Annotated[tuple[Share, ...], Meta(min_length=1, max_length=64)]


class _Params(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


def _check_shares(name: str, shares: Sequence[float]) -> None:
    if not sum(shares) > 0:
        raise ValueError(f"{name} must not be all zero")


# ---- tenants -------------------------------------------------------------------
class TenantMix(_Params):
    """How `make_tenants` spreads tenants over levels and sizes their quotas.

    Tenants go to levels in proportion to `priority_shares` (at least one per
    level with a positive share while there are tenants left); within a level
    their sizes are log-normal with `size_sigma`. The within-quota GPU quotas
    of levels 0–6 add up to `gpu_quota_fraction` of the world's GPUs (CPU
    quotas likewise), split by tenant size; level-7 tenants have no priority
    to protect and get no quota.
    """

    priority_shares: LevelShares = PRIORITY_SHARES
    gpu_quota_fraction: Probability = 0.8
    cpu_quota_fraction: Probability = 0.8
    size_sigma: Annotated[float, Meta(ge=0.0, le=10.0)] = 1.0

    def __post_init__(self) -> None:
        _check_shares("priority_shares", self.priority_shares)


def _apportion(total: int, weights: Sequence[float]) -> list[int]:
    """Split `total` into integers proportional to `weights` (largest remainder)."""
    wsum = sum(weights)
    if total <= 0 or wsum <= 0:
        return [0] * len(weights)
    exact = [total * w / wsum for w in weights]
    out = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (out[i] - exact[i], i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def make_tenants(
    n: int, rng: random.Random, world: WorldModel, mix: TenantMix | None = None
) -> list[Tenant]:
    """`n` tenants named `team000`…, ordered by level; see `TenantMix`.

    With fewer tenants than levels, only the most common levels get one.
    """
    if n < 1:
        raise ValueError(f"need at least one tenant, got {n}")
    mix = mix or TenantMix()
    shares = mix.priority_shares
    levels = sorted(
        (lvl for lvl in range(len(shares)) if shares[lvl] > 0), key=lambda x: -shares[x]
    )
    levels = levels[:n]
    extra = _apportion(n - len(levels), [shares[lvl] for lvl in levels])
    counts = {lvl: 1 + e for lvl, e in zip(levels, extra, strict=True)}
    slots: list[tuple[int, float]] = []  # (level, weight)
    for lvl in sorted(counts):
        sizes = [rng.lognormvariate(0.0, mix.size_sigma) for _ in range(counts[lvl])]
        slots.extend((lvl, shares[lvl] * s / sum(sizes)) for s in sizes)
    quota_weights = [w if lvl < PRIORITY_LOWEST else 0.0 for lvl, w in slots]
    gpu = _apportion(math.floor(mix.gpu_quota_fraction * world.gpus), quota_weights)
    cpu = _apportion(math.floor(mix.cpu_quota_fraction * world.cpu_machines), quota_weights)
    width = max(3, len(str(n - 1)))
    return [
        Tenant(name=f"team{i:0{width}d}", priority=lvl, gpu_quota=gpu[i], cpu_quota=cpu[i])
        for i, (lvl, _) in enumerate(slots)
    ]


# ---- generator parameters ------------------------------------------------------------
class BusyWindow(_Params):
    """Arrivals at `factor` times the base rate during [start_s, end_s) of the span."""

    start_s: Annotated[float, Meta(ge=0.0)]
    end_s: Annotated[float, Meta(gt=0.0)]
    factor: Annotated[float, Meta(ge=0.0, le=1_000.0)]

    def __post_init__(self) -> None:
        if not self.end_s > self.start_s:
            raise ValueError(f"busy window ends ({self.end_s}) before it starts ({self.start_s})")


def busy_factor(windows: Sequence[BusyWindow], t_s: float) -> float:
    """The arrival-rate multiplier at time `t_s` (1 outside every window)."""
    factor = 1.0
    for w in windows:
        if w.start_s <= t_s < w.end_s:
            factor *= w.factor
    return factor


class GeneratorParams(_Params):
    """Knobs of `generate`; the defaults reproduce MAST §2/§5.1.

    `workloads_per_day` is the paper-scale arrival rate and `load` scales it
    (use `load_for_world` for a world smaller than ~50,000 GPUs).
    """

    workloads_per_day: Annotated[float, Meta(ge=0.0, le=1e7)] = 10_000.0
    load: Annotated[float, Meta(ge=0.0, le=1e4)] = 1.0
    gpu_share: Probability = 0.7
    recurring_share: Probability = 0.3
    recurring_period_s: Annotated[float, Meta(ge=60.0, le=365 * DAY_S)] = DAY_S
    priority_shares: LevelShares = PRIORITY_SHARES
    # Gaussian-copula correlation between a GPU workload's GPUs and its machines.
    size_correlation: Annotated[float, Meta(ge=0.0, le=0.99)] = 0.5
    # Share of GPU workloads with ≥ 32 GPUs that carve an 8-GPU evaluator out of them.
    evaluator_share: Probability = 0.3
    # A CPU workload's trainer gets this share of its machines (at least one).
    cpu_trainer_fraction: Probability = 0.3
    # A workload asks at most this share of the best-supplied region's GPUs of
    # its type, or of its CPU machines.
    region_share_max: Annotated[float, Meta(gt=0.0, le=1.0)] = 0.5
    gpus_per_workload_max: Annotated[int, Meta(ge=1)] | None = None
    checkpoint_every_s: Annotated[float, Meta(gt=0.0, le=365 * DAY_S)] = 1_800.0
    # P(1), P(2), … input tables per distinct workload.
    tables_per_workload_shares: TableShares = (0.45, 0.30, 0.15, 0.10)
    hot_tables: Annotated[int, Meta(ge=0, le=10_000)] = 3
    # No table is read by more than this share of the distinct workloads.
    table_share_max: Annotated[float, Meta(gt=0.0, le=1.0)] = 0.1
    workloads_max: Annotated[int, Meta(ge=0)] = 1_000_000
    tables_max: Annotated[int, Meta(ge=0)] = 1_000_000
    # At most this many CPU machines of preprocessing per GPU machine of a GPU
    # workload (None: as the paper's machines-per-workload statistics give).
    # The paper's sizes ask for far more CPU-machine time than its fleet has
    # (about 7x on `meta-day`), so worlds sized like MAST's run out of CPU
    # machines long before GPUs; a cap near 1 keeps GPUs the binding resource.
    preprocess_per_gpu_machine_max: Annotated[float, Meta(ge=0.0, le=1_000.0)] | None = None
    # Busy (factor > 1) or quiet (factor < 1) periods of the arrival rate.
    busy: Annotated[tuple[BusyWindow, ...], Meta(max_length=64)] = ()

    def __post_init__(self) -> None:
        _check_shares("priority_shares", self.priority_shares)
        _check_shares("tables_per_workload_shares", self.tables_per_workload_shares)


def load_for_world(world: WorldModel) -> float:
    """The `load` that gives `world` the paper-scale arrivals per GPU."""
    return world.gpus / REFERENCE_GPUS


def setup_time_us(rng: random.Random) -> int:
    """Container acquisition and setup of a workload (MAST §5.5: 150/278/449 s)."""
    return round(dist.SETUP_S.sample(rng) * US_PER_S)


# ---- generator -----------------------------------------------------------------------
class _Template(msgspec.Struct, kw_only=True):
    """A distinct workload before its tables are dealt: re-submitted if recurring."""

    tenant: str
    recurring: bool
    jobs: list[JobSpec]
    reader: int  # index of the job that reads the input tables
    inputs: int
    tables: list[str] = []


class _Caps(msgspec.Struct, frozen=True):
    """What one workload may ask for, given the world (see `region_share_max`)."""

    gpu_types: tuple[str, ...]
    gpu_type_weights: tuple[int, ...]
    gpus: dict[str, int]  # per GPU type
    cpu_with_gpu: dict[str, int]  # CPU machines of a GPU workload, per GPU type
    cpu: int  # CPU machines of a CPU workload; 0 if the world has none


def _caps(params: GeneratorParams, world: WorldModel) -> _Caps:
    share = params.region_share_max
    supply = world.gpus_by_type()
    gpus: dict[str, int] = {}
    cpu_with_gpu: dict[str, int] = {}
    for gpu_type in supply:
        best = max(world.regions, key=lambda r: r.gpu_machines.get(gpu_type, 0))
        limit = share * GPUS_PER_MACHINE * best.gpu_machines[gpu_type]
        if params.gpus_per_workload_max is not None:
            limit = min(limit, params.gpus_per_workload_max)
        gpus[gpu_type] = dist.floor_gpus(limit)
        cpu_with_gpu[gpu_type] = math.floor(share * best.cpu_machines)
    most_cpu = max(r.cpu_machines for r in world.regions)
    if not supply and not most_cpu:
        raise ValueError("the world has no machines to generate workloads for")
    # A CPU workload needs at least one machine; 0 means the world cannot run one.
    cpu = max(1, math.floor(share * most_cpu)) if most_cpu else 0
    return _Caps(tuple(supply), tuple(supply.values()), gpus, cpu_with_gpu, cpu)


_NORMAL = NormalDist()


def _gpu_template(
    params: GeneratorParams, rng: random.Random, caps: _Caps, checkpoint_us: int
) -> tuple[list[JobSpec], int]:
    gpu_type = rng.choices(caps.gpu_types, weights=caps.gpu_type_weights)[0]
    rho = params.size_correlation
    z_gpus = rng.gauss(0.0, 1.0)
    z_machines = rho * z_gpus + math.sqrt(1.0 - rho * rho) * rng.gauss(0.0, 1.0)
    gpus = dist.round_gpus(dist.GPUS_PER_GPU_WORKLOAD.quantile(_NORMAL.cdf(z_gpus)))
    gpus = min(gpus, caps.gpus[gpu_type])
    machines = round(dist.MACHINES_PER_WORKLOAD.quantile(_NORMAL.cdf(z_machines)))
    evaluator = gpus >= 32 and rng.random() < params.evaluator_share
    trainer_gpus = gpus - GPUS_PER_MACHINE if evaluator else gpus
    gpu_machines = math.ceil(trainer_gpus / GPUS_PER_MACHINE) + (1 if evaluator else 0)
    preprocess = min(max(0, machines - gpu_machines), caps.cpu_with_gpu[gpu_type])
    if params.preprocess_per_gpu_machine_max is not None:
        preprocess = min(
            preprocess, math.floor(params.preprocess_per_gpu_machine_max * gpu_machines)
        )
    work_us = round(dist.GPU_DURATION_S.sample(rng) * US_PER_S)
    common: dict[str, Any] = {"work_us": work_us, "checkpoint_every_us": checkpoint_us}
    jobs = [JobSpec(name="trainer", role="trainer", gpu_type=gpu_type, gpus=trainer_gpus, **common)]
    reader = 0
    if preprocess:
        reader = len(jobs)
        jobs.append(
            JobSpec(name="preprocess", role="preprocess", cpu_machines=preprocess, **common)
        )
    if evaluator:
        jobs.append(
            JobSpec(
                name="evaluator",
                role="evaluator",
                gpu_type=gpu_type,
                gpus=GPUS_PER_MACHINE,
                **common,
            )
        )
    return jobs, reader


def _cpu_template(
    params: GeneratorParams, rng: random.Random, caps: _Caps, checkpoint_us: int
) -> tuple[list[JobSpec], int]:
    machines = min(max(1, round(dist.MACHINES_PER_WORKLOAD.sample(rng))), caps.cpu)
    trainer = max(1, round(machines * params.cpu_trainer_fraction))
    preprocess = machines - trainer
    work_us = round(dist.CPU_DURATION_S.sample(rng) * US_PER_S)
    common: dict[str, Any] = {"work_us": work_us, "checkpoint_every_us": checkpoint_us}
    jobs = [JobSpec(name="trainer", role="trainer", cpu_machines=trainer, **common)]
    if preprocess:
        jobs.append(
            JobSpec(name="preprocess", role="preprocess", cpu_machines=preprocess, **common)
        )
        return jobs, 1
    return jobs, 0


def _poisson_times(
    rng: random.Random,
    rate_per_s: float,
    span_s: float,
    limit: int,
    busy: Sequence[BusyWindow] = (),
) -> list[float]:
    """Arrival times in [0, span_s) of a Poisson process; at most `limit` of them.

    With `busy` windows the rate is `rate_per_s · busy_factor(t)`, by thinning
    a process at the peak rate (see the module docstring).
    """
    times: list[float] = []
    peak = 1.0
    if busy:
        edges = [0.0, *(w.start_s for w in busy), *(w.end_s for w in busy)]
        peak = max(busy_factor(busy, t) for t in edges)
    if rate_per_s <= 0.0 or peak <= 0.0:
        return times
    t = rng.expovariate(rate_per_s * peak)
    while t < span_s:
        if not busy or rng.random() * peak < busy_factor(busy, t):
            if len(times) >= limit:
                raise ValueError(f"more than {limit:,} workloads in the span; raise workloads_max")
            times.append(t)
        t += rng.expovariate(rate_per_s * peak)
    return times


class _TenantPicker:
    """Level by the priority shares (levels without tenants left out), then tenant by quota."""

    def __init__(self, tenants: Sequence[Tenant], shares: Sequence[float]) -> None:
        if not tenants:
            raise ValueError("generate needs at least one tenant")
        by_level: dict[int, list[Tenant]] = {}
        for t in tenants:
            by_level.setdefault(t.priority, []).append(t)
        self.levels = sorted(lvl for lvl in by_level if lvl < len(shares) and shares[lvl] > 0)
        if not self.levels:
            raise ValueError("no tenant has a priority level with a positive share")
        self.level_weights = [shares[lvl] for lvl in self.levels]
        self.tenants = {lvl: [t.name for t in by_level[lvl]] for lvl in self.levels}
        self.weights: dict[int, list[int]] = {}
        for lvl in self.levels:
            group = by_level[lvl]
            weights = [t.gpu_quota for t in group]
            if not any(weights):
                weights = [t.cpu_quota for t in group]
            self.weights[lvl] = weights if any(weights) else [1] * len(group)

    def pick(self, rng: random.Random) -> str:
        lvl = rng.choices(self.levels, weights=self.level_weights)[0]
        return rng.choices(self.tenants[lvl], weights=self.weights[lvl])[0]


def _deal_tables(
    params: GeneratorParams, rng: random.Random, templates: list[_Template], world: WorldModel
) -> list[DataTable]:
    """Make tables and deal each template its `inputs` distinct tables (module docstring)."""
    slots = sum(t.inputs for t in templates)
    cap = max(1, math.floor(params.table_share_max * len(templates)))
    readers: list[int] = []
    total = 0
    while total < slots:
        if len(readers) >= params.tables_max:
            raise ValueError(f"more than {params.tables_max:,} tables needed; raise tables_max")
        hot = len(readers) < params.hot_tables
        q = 0.999 + 0.001 * rng.random() if hot else rng.random()
        n = min(round(dist.WORKLOADS_PER_TABLE.quantile(q)), cap, slots - total)
        readers.append(n)
        total += n
    pool = [i for i, n in enumerate(readers) for _ in range(n)]
    rng.shuffle(pool)
    starts: list[int] = []
    offset = 0
    for t in templates:
        starts.append(offset)
        offset += t.inputs

    def owner(pos: int) -> int:
        return bisect.bisect_right(starts, pos) - 1

    def held(j: int) -> list[int]:
        return pool[starts[j] : starts[j] + templates[j].inputs]

    # A template dealt the same table twice swaps the copy with a slot of another
    # template that holds neither table; after a bounded number of tries it drops it.
    for j, t in enumerate(templates):
        for pos in range(starts[j], starts[j] + t.inputs):
            table = pool[pos]
            if held(j).count(table) < 2 or table < 0:
                continue
            for _ in range(32):
                other = rng.randrange(slots)
                k = owner(other)
                if (
                    k != j
                    and pool[other] >= 0
                    and pool[other] not in held(j)
                    and table not in held(k)
                ):
                    pool[pos], pool[other] = pool[other], table
                    break
            else:
                pool[pos] = -1
    width = max(5, len(str(len(readers) - 1)))
    names = [f"tbl{i:0{width}d}" for i in range(len(readers))]
    for j, t in enumerate(templates):
        t.tables = sorted(names[i] for i in held(j) if i >= 0)
    regions = [r.name for r in world.regions]
    storage = [r.storage_pb for r in world.regions]
    if not any(storage):
        storage = [1.0] * len(regions)
    return [
        DataTable(
            name=name,
            size_bytes=round(dist.TABLE_SIZE_BYTES.sample(rng)),
            home_region=rng.choices(regions, weights=storage)[0],
        )
        for name in names
    ]


def generate(
    params: GeneratorParams,
    rng: random.Random,
    *,
    tenants: Sequence[Tenant],
    world: WorldModel,
    span_us: int,
    start_us: int = 0,
) -> tuple[list[WorkloadSpec], list[DataTable]]:
    """Workloads submitted in `[start_us, start_us + span_us)` and the tables they read.

    Workloads are sorted by submission time and named `w000000`, `w000001`, …
    in that order; tables `tbl00000`, …. Recurring submissions of one template
    carry the same jobs and tables.
    """
    if span_us < 0 or start_us < 0:
        raise ValueError(f"span_us and start_us must not be negative ({span_us}, {start_us})")
    picker = _TenantPicker(tenants, params.priority_shares)
    caps = _caps(params, world)
    span_s = span_us / US_PER_S
    rate = params.workloads_per_day * params.load / DAY_S
    recurring_rate = rate * params.recurring_share
    period_us = round(params.recurring_period_s * US_PER_S)

    # Submission times (µs from start) of each template; recurring ones first. A
    # template whose phase falls after the span never submits, so phases are drawn
    # over the shorter of one period and the span.
    submits: list[range] = []
    limit = params.workloads_max
    phase_span_s = min(params.recurring_period_s, span_s)
    for phase in _poisson_times(rng, recurring_rate, phase_span_s, limit, params.busy):
        first = min(round(phase * US_PER_S), span_us - 1)
        submits.append(range(first, span_us, period_us))
    recurring_templates = len(submits)
    for t in _poisson_times(rng, rate - recurring_rate, span_s, limit, params.busy):
        at = min(round(t * US_PER_S), span_us - 1)
        submits.append(range(at, at + 1))
    if sum(len(s) for s in submits) > limit:
        raise ValueError(f"more than {limit:,} workloads in the span; raise workloads_max")

    checkpoint_us = round(params.checkpoint_every_s * US_PER_S)
    input_counts = range(1, len(params.tables_per_workload_shares) + 1)
    templates: list[_Template] = []
    for j in range(len(submits)):
        tenant = picker.pick(rng)
        # A world without GPUs (or without CPU machines) gets only CPU (GPU) workloads.
        if caps.gpu_types and (not caps.cpu or rng.random() < params.gpu_share):
            jobs, reader = _gpu_template(params, rng, caps, checkpoint_us)
        else:
            jobs, reader = _cpu_template(params, rng, caps, checkpoint_us)
        inputs = rng.choices(input_counts, weights=params.tables_per_workload_shares)[0]
        templates.append(
            _Template(
                tenant=tenant,
                recurring=j < recurring_templates,
                jobs=jobs,
                reader=reader,
                inputs=inputs,
            )
        )
    tables = _deal_tables(params, rng, templates, world)
    for t in templates:
        reader = t.jobs[t.reader]
        t.jobs[t.reader] = msgspec.structs.replace(reader, input_tables=tuple(t.tables))

    order = sorted((at, j) for j, times in enumerate(submits) for at in times)
    width = max(6, len(str(len(order) - 1)))
    workloads = [
        WorkloadSpec(
            id=f"w{i:0{width}d}",
            tenant=templates[j].tenant,
            submit_at_us=start_us + at,
            recurring=templates[j].recurring,
            jobs=tuple(templates[j].jobs),
        )
        for i, (at, j) in enumerate(order)
    ]
    return workloads, tables


# ---- CSV traces ------------------------------------------------------------------------
CSV_COLUMNS = (
    "workload_id",
    "tenant",
    "submit_s",
    "recurring",
    "job",
    "role",
    "gpu_type",
    "gpus",
    "cpu_machines",
    "work_s",
    "checkpoint_s",
    "input_tables",
)
CSV_FORMAT = """\
One header row naming the columns (any order), then one row per job:
  workload_id   workload id; a workload's rows must be consecutive
  tenant        tenant name (same on every row of a workload)
  submit_s      submission time, seconds (decimal, µs precision; same per workload)
  recurring     true/false (same per workload)
  job           job name, unique within the workload
  role          trainer | preprocess | parameter-server | evaluator
  gpu_type      GPU type of a GPU job; empty for a CPU job
  gpus          GPUs of a GPU job (≥ 1), 0 for a CPU job
  cpu_machines  CPU machines of a CPU job (≥ 1), 0 for a GPU job
  work_s        uninterrupted run time, seconds (≥ 0)
  checkpoint_s  checkpoint interval, seconds (> 0)
  input_tables  table names separated by ';' (may be empty)
"""
_ROLES = frozenset(get_args(JobRole))


def _seconds_text(us: int) -> str:
    whole, frac = divmod(us, US_PER_S)
    return str(whole) if frac == 0 else f"{whole}.{frac:06d}".rstrip("0")


def write_csv_trace(path: str | Path, workloads: Sequence[WorkloadSpec]) -> None:
    """Write `workloads` in the CSV trace format (`CSV_FORMAT`)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(CSV_COLUMNS)
        for w in workloads:
            for j in w.jobs:
                out.writerow(
                    (
                        w.id,
                        w.tenant,
                        _seconds_text(w.submit_at_us),
                        "true" if w.recurring else "false",
                        j.name,
                        j.role,
                        j.gpu_type or "",
                        j.gpus,
                        j.cpu_machines,
                        _seconds_text(j.work_us),
                        _seconds_text(j.checkpoint_every_us),
                        ";".join(j.input_tables),
                    )
                )


class _Row:
    """One CSV row with its position, for error messages."""

    def __init__(self, path: str, line: int, cells: dict[str, str]) -> None:
        self.path, self.line, self.cells = path, line, cells

    def fail(self, column: str, message: str) -> ValueError:
        return ValueError(f"{self.path}: line {self.line}: column {column!r}: {message}")

    def text(self, column: str, *, required: bool = True) -> str:
        value = self.cells[column].strip()
        if required and not value:
            raise self.fail(column, "must not be empty")
        return value

    def count(self, column: str) -> int:
        value = self.text(column)
        if not value.isdigit():
            raise self.fail(column, f"expected a whole number ≥ 0, got {value!r}")
        return int(value)

    def micros(self, column: str, *, positive: bool = False) -> int:
        value = self.text(column)
        try:
            seconds = Decimal(value)
        except InvalidOperation:
            raise self.fail(column, f"expected seconds, got {value!r}") from None
        if not seconds.is_finite() or seconds < 0 or (positive and seconds == 0):
            raise self.fail(
                column, f"expected seconds {'> 0' if positive else '≥ 0'}, got {value!r}"
            )
        us = seconds * US_PER_S
        if us != us.to_integral_value() or us > 2**62:
            raise self.fail(column, f"{value!r} is not a whole number of microseconds")
        return int(us)

    def flag(self, column: str) -> bool:
        value = self.text(column).lower()
        if value not in ("true", "false"):
            raise self.fail(column, f"expected true or false, got {value!r}")
        return value == "true"


def _job(row: _Row) -> JobSpec:
    role = row.text("role")
    if role not in _ROLES:
        raise row.fail("role", f"expected one of {', '.join(sorted(_ROLES))}, got {role!r}")
    gpu_type = row.text("gpu_type", required=False) or None
    gpus, cpu_machines = row.count("gpus"), row.count("cpu_machines")
    if gpu_type is not None:
        if gpus < 1:
            raise row.fail("gpus", "a GPU job (gpu_type set) needs at least one GPU")
        if cpu_machines:
            raise row.fail("cpu_machines", "must be 0 for a GPU job (gpu_type set)")
    else:
        if gpus:
            raise row.fail("gpu_type", "a job with GPUs needs a GPU type")
        if cpu_machines < 1:
            raise row.fail("cpu_machines", "a CPU job (no gpu_type) needs at least one machine")
    tables = row.text("input_tables", required=False)
    names = tuple(t.strip() for t in tables.split(";")) if tables else ()
    if any(not t for t in names):
        raise row.fail("input_tables", f"empty table name in {tables!r}")
    return JobSpec(
        name=row.text("job"),
        role=role,  # type: ignore[arg-type]  # checked against JobRole above
        gpu_type=gpu_type,
        gpus=gpus,
        cpu_machines=cpu_machines,
        work_us=row.micros("work_s"),
        checkpoint_every_us=row.micros("checkpoint_s", positive=True),
        input_tables=names,
    )


def _csv_rows(source: str, text: str) -> Iterator[_Row]:
    """The non-blank rows after a header that names every column once."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in CSV_COLUMNS if c not in header]
        unknown = [c for c in header if c not in CSV_COLUMNS]
        if missing or unknown or len(set(header)) != len(header):
            raise ValueError(
                f"{source}: line 1: header must name each of {', '.join(CSV_COLUMNS)} once"
                f" (missing {missing}, unknown {unknown})"
            )
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise ValueError(
                    f"{source}: line {line}: expected {len(header)} columns, got {len(cells)}"
                )
            yield _Row(source, line, dict(zip(header, cells, strict=True)))
    except csv.Error as error:
        raise ValueError(f"{source}: line {reader.line_num}: {error}") from None


def read_csv_trace(path: str | Path) -> list[WorkloadSpec]:
    """Read a CSV trace (`CSV_FORMAT`); `ValueError` names the file, line and column."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{source}: cannot read: {error}") from None
    # (workload_id, tenant, submit_at_us, recurring) of each workload, and its jobs.
    groups: list[tuple[tuple[str, str, int, bool], list[JobSpec]]] = []
    seen: set[str] = set()
    for row in _csv_rows(source, text):
        head = (
            row.text("workload_id"),
            row.text("tenant"),
            row.micros("submit_s"),
            row.flag("recurring"),
        )
        if not groups or head[0] != groups[-1][0][0]:
            if head[0] in seen:
                raise row.fail("workload_id", f"rows of {head[0]!r} are not consecutive")
            seen.add(head[0])
            groups.append((head, []))
        first, jobs = groups[-1]
        for i, column in enumerate(("tenant", "submit_s", "recurring"), start=1):
            if head[i] != first[i]:
                raise row.fail(column, f"differs from the first row of {head[0]!r}")
        job = _job(row)
        if any(j.name == job.name for j in jobs):
            raise row.fail("job", f"duplicate job {job.name!r} in {head[0]!r}")
        jobs.append(job)
    return [
        WorkloadSpec(id=wid, tenant=tenant, submit_at_us=at, recurring=recurring, jobs=tuple(jobs))
        for (wid, tenant, at, recurring), jobs in groups
    ]
