"""Seeded MAST-like workloads and the tables they read.

What is modelled (MAST §2, §5.1; numbers in `actors.mast.distributions`;
tenants and their levels in `actors.mast.workload.tenants`):
- Arrivals: first-time workloads arrive as a Poisson process; recurring ones
  are templates that re-submit the same jobs and tables every
  `recurring_period_s` at a random phase. The templates' phases form a Poisson
  process over one period, so the recurring share of submissions is
  `recurring_share` in expectation. Busy periods (`busy`) multiply the rate
  inside their windows (`actors.mast.workload.arrivals`).
- A GPU workload (`gpu_share` of them) is a trainer on one GPU type (chosen
  in proportion to the world's supply) with a total GPU count from the
  16/64/128 distribution, plus a CPU preprocess job that brings the
  workload's machine count to a draw from the 72/180/205 distribution (the
  two draws are tied by a Gaussian copula, `size_correlation`), plus
  sometimes an 8-GPU evaluator. A CPU workload is a CPU trainer plus a
  preprocess job. Each request is capped at `region_share_max` of the region
  best supplied with it, since a workload runs in one region, and a GPU count
  at what one dynamic cluster of that region holds, since a job runs in one.
- Durations: GPU 20 min/6.7 h/66 h, CPU 38 min/7.9 h/38 h; all jobs of a
  workload share one `work_us`.
- A warm start (`warm_start_s`, `warm_start_fill`): MAST never starts empty,
  and with these durations a fleet that does takes days to fill (the 1% of
  GPU workloads that run past 66 h keep adding up). So the run starts with
  the fleet at midnight: workloads drawn from the steady state — each one a
  fresh template with an age uniform in the `warm_start_s` before t=0, kept
  if it would still be running then (had it started on arrival), with the
  work it has left — until they hold `warm_start_fill` of the world's GPUs.
  A fill rather than a Poisson count of them: with sizes up to a cluster and
  runs up to two weeks, the count's GPUs vary by ±15% between seeds, which
  would make a preset's allocation a matter of luck. They are submitted at
  t=0, come first in the workload ids and are first-time workloads otherwise.
- Tables: each distinct workload (template) reads 1–4 tables. Every table gets
  a target number of readers from the 3/17/45 distribution (the first
  `hot_tables` from its top 0.1 %), capped at `table_share_max` of the
  templates; reads are dealt to templates so the targets hold exactly. Home
  regions follow region storage, sizes follow 565 MB/103 GB/7.5 TB.

Everything is a pure function of the `random.Random` passed in.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from statistics import NormalDist
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from actors.mast import distributions as dist
from actors.mast.workload.arrivals import BusyWindow, poisson_times
from actors.mast.workload.tenants import (
    PRIORITY_SHARES,
    LevelShares,
    Probability,
    Share,
    TenantPicker,
    check_shares,
)
from actors.mast.world import WorldModel
from emulator.units import US_PER_S
from store.mast.records import GPUS_PER_MACHINE, DataTable, JobSpec, Tenant, WorkloadSpec

DAY_S = 86_400.0
# The paper's 10,000s of workloads a day run on O(100,000) GPUs; our default
# 10,000 a day suits the ~50,000 GPUs of the `meta-day` preset.
REFERENCE_GPUS = 50_000
# A warm start stops drawing after this many workloads in a row that did not fit.
WARM_REFUSALS_MAX = 1_000

TableShares = Annotated[tuple[Share, ...], Meta(min_length=1, max_length=64)]


class GeneratorParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
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
    # A fleet already at work when the run starts (see the module docstring):
    # workloads of the steady state, which arrived up to `warm_start_s` before
    # t=0 and still have work left, submitted at t=0 until they hold
    # `warm_start_fill` of the world's GPUs. 0 (either): start empty.
    warm_start_s: Annotated[float, Meta(ge=0.0, le=60 * DAY_S)] = 0.0
    warm_start_fill: Probability = 0.0

    def __post_init__(self) -> None:
        check_shares("priority_shares", self.priority_shares)
        check_shares("tables_per_workload_shares", self.tables_per_workload_shares)


def load_for_world(world: WorldModel) -> float:
    """The `load` that gives `world` the paper-scale arrivals per GPU."""
    return world.gpus / REFERENCE_GPUS


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
        in_region = GPUS_PER_MACHINE * best.gpu_machines[gpu_type]
        # A job runs in one dynamic cluster: never more than the largest holds
        # (the static split gives each of a region's clusters an equal part).
        limit = min(share * in_region, in_region / world.clusters_per_region)
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


def _warm_start(
    params: GeneratorParams,
    rng: random.Random,
    picker: TenantPicker,
    caps: _Caps,
    checkpoint_us: int,
    templates: list[_Template],
    world: WorldModel,
) -> list[tuple[int, int]]:
    """The fleet at t=0 (module docstring): their templates appended, (0, index) each.

    Each GPU type is filled to `warm_start_fill` of its own supply: a workload
    that would take its type past that is passed over, and drawing stops once
    every type is within one workload's reach of its target (or after
    `WARM_REFUSALS_MAX` refusals in a row).
    """
    room = {t: params.warm_start_fill * n for t, n in world.gpus_by_type().items()}
    window_us = round(params.warm_start_s * US_PER_S)
    input_counts = range(1, len(params.tables_per_workload_shares) + 1)
    out: list[tuple[int, int]] = []
    refused = 0
    for _ in range(params.workloads_max):
        if refused >= WARM_REFUSALS_MAX or all(r < GPUS_PER_MACHINE for r in room.values()):
            break
        age_us = round(rng.random() * window_us)
        tenant = picker.pick(rng)
        if caps.gpu_types and (not caps.cpu or rng.random() < params.gpu_share):
            jobs, reader = _gpu_template(params, rng, caps, checkpoint_us)
        else:
            jobs, reader = _cpu_template(params, rng, caps, checkpoint_us)
        inputs = rng.choices(input_counts, weights=params.tables_per_workload_shares)[0]
        left_us = jobs[0].work_us - age_us
        if left_us <= 0:
            continue  # it would have finished before the run started
        asks: dict[str, int] = {}
        for job in jobs:
            if job.gpus and job.gpu_type:
                asks[job.gpu_type] = asks.get(job.gpu_type, 0) + job.gpus
        if any(n > room.get(t, 0.0) for t, n in asks.items()):
            refused += 1
            continue
        refused = 0
        for t, n in asks.items():
            room[t] -= n
        jobs = [msgspec.structs.replace(job, work_us=left_us) for job in jobs]
        out.append((0, len(templates)))
        templates.append(
            _Template(tenant=tenant, recurring=False, jobs=jobs, reader=reader, inputs=inputs)
        )
    return out


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
    picker = TenantPicker(tenants, params.priority_shares)
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
    for phase in poisson_times(rng, recurring_rate, phase_span_s, limit, params.busy):
        first = min(round(phase * US_PER_S), span_us - 1)
        submits.append(range(first, span_us, period_us))
    recurring_templates = len(submits)
    for t in poisson_times(rng, rate - recurring_rate, span_s, limit, params.busy):
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
    warm: list[tuple[int, int]] = []
    if params.warm_start_s > 0 and params.warm_start_fill > 0:
        warm = _warm_start(params, rng, picker, caps, checkpoint_us, templates, world)
    tables = _deal_tables(params, rng, templates, world)
    for t in templates:
        reader = t.jobs[t.reader]
        t.jobs[t.reader] = msgspec.structs.replace(reader, input_tables=tuple(t.tables))

    order = warm + sorted((at, j) for j, times in enumerate(submits) for at in times)
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
