"""Tetris's cost model (MAST §3.3, Fig. 4), computed from scratch.

Tetris picks a home region for every table once a day. Its only decision
variable is the home; a job's region R(job) follows from the homes of the
tables it reads, and the demand of each region follows from R(job). The cost
of a placement is three weighted soft terms:

- cross-region reads (expression 1): bytes a job reads from a region other
  than R(job), summed over jobs and their tables;
- GPU balance (expressions 2, 7, 8): per region, GPU type and priority, the
  squared gap between the region's share of the demand and its share of the
  supply, multiplied by an overload factor;
- storage balance (expressions 3, 9): the same gap for stored bytes;

and three hard constraints: storage below capacity (4), each application's
CPU-hours below its cap in each region (5), and enough high-priority
GPU-hours in a region that has their GPU type (6).

This module is the reference: plain loops over the whole instance, no state.
`actors.policies.mast.tetris.plan` keeps the same quantities up to date move by move;
its tests check the two agree. Units: bytes for sizes; GPU-hours and
CPU-hours per day for demand, supply and caps.

Versions (§5.6): v2 is the model above. v1 penalised GPU underload and
overload alike (the overload factor is the constant sigmoid(0) = 0.5, so v1
and v2 agree wherever no region is overloaded), had no storage balance, and
counted collocation (constraint 6) as the number of ML jobs of any priority.
v0 placed nothing automatically; its placements are scored with the v2 model
so the three versions are measured on one scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import msgspec

from store.mast.records import PRIORITY_LOWEST

Version = Literal["tetris-v0", "tetris-v1", "tetris-v2"]
VERSIONS: tuple[str, ...] = ("tetris-v0", "tetris-v1", "tetris-v2")
PRIORITIES = PRIORITY_LOWEST + 1

__all__ = [
    "TetrisCost",
    "TetrisJob",
    "TetrisParams",
    "TetrisRegion",
    "TetrisSnapshot",
    "TetrisStruct",
    "TetrisTable",
    "cpu_used",
    "cross_region_bytes",
    "gpu_balance",
    "gpu_demand",
    "home_collocation",
    "job_region",
    "job_regions",
    "move_allowed",
    "sigmoid",
    "storage_balance",
    "storage_used",
    "tetris_cost",
]


class TetrisStruct(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the Tetris Structs.

    Subclasses repeat `kw_only=True`: msgspec does not inherit it (it applies
    to the fields a class itself defines).
    """


def _check_amount(where: str, value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} must be finite and >= 0, got {value}")


class TetrisTable(TetrisStruct, kw_only=True):
    """A table: its size, its home region and the other regions holding a copy.

    `replicas` lists every other region holding a ready or copying replica,
    the DR replica included; `dr_region` names the DR one (it must be among
    `replicas`), or is None if the table has no DR replica yet.
    """

    name: str
    size_bytes: int
    home: str
    replicas: tuple[str, ...] = ()
    dr_region: str | None = None

    def __post_init__(self) -> None:
        where = f"tetris.tables[{self.name}]"
        if self.size_bytes < 0:
            raise ValueError(f"{where}.size_bytes must be >= 0, got {self.size_bytes}")
        if self.home in self.replicas or len(set(self.replicas)) != len(self.replicas):
            raise ValueError(f"{where}.replicas must be distinct and exclude the home")
        if self.dr_region is not None and self.dr_region not in self.replicas:
            raise ValueError(f"{where}.dr_region {self.dr_region!r} is not among its replicas")


class TetrisJob(TetrisStruct, kw_only=True):
    """A recurring job whose daily usage Tetris knows from its history.

    An ML job needs `gpu_hours` of `gpu_type` a day and must read all its
    tables in the region it trains in; an analytics job (Spark, Presto) uses
    `cpu_hours` of its application `app` and may read across regions. Any
    job with an `app` counts against that application's CPU cap (5).
    """

    id: str
    kind: Literal["ml", "analytics"]
    tables: tuple[str, ...]
    gpu_type: str | None = None
    gpu_hours: float = 0.0
    cpu_hours: float = 0.0
    priority: int = PRIORITY_LOWEST
    app: str | None = None

    def __post_init__(self) -> None:
        where = f"tetris.jobs[{self.id}]"
        if self.kind not in ("ml", "analytics"):
            raise ValueError(f"{where}.kind must be 'ml' or 'analytics', got {self.kind!r}")
        if not self.tables or len(set(self.tables)) != len(self.tables):
            raise ValueError(f"{where}.tables must be non-empty and distinct")
        if (self.kind == "ml") != (self.gpu_type is not None):
            raise ValueError(f"{where}.gpu_type must be set for ML jobs and only for them")
        _check_amount(f"{where}.gpu_hours", self.gpu_hours)
        _check_amount(f"{where}.cpu_hours", self.cpu_hours)
        if not 0 <= self.priority <= PRIORITY_LOWEST:
            raise ValueError(f"{where}.priority must be in 0..{PRIORITY_LOWEST}")


class TetrisRegion(TetrisStruct, kw_only=True):
    """A region's daily GPU-hours per GPU type, storage capacity and CPU caps per app.

    An application missing from `cpu_capacity_hours` is not capped here.
    """

    name: str
    storage_bytes: int
    gpu_supply_hours: dict[str, float] = {}
    cpu_capacity_hours: dict[str, float] = {}

    def __post_init__(self) -> None:
        where = f"tetris.regions[{self.name}]"
        if self.storage_bytes < 0:
            raise ValueError(f"{where}.storage_bytes must be >= 0, got {self.storage_bytes}")
        for field in ("gpu_supply_hours", "cpu_capacity_hours"):
            for key, value in getattr(self, field).items():
                _check_amount(f"{where}.{field}[{key}]", value)


class TetrisSnapshot(TetrisStruct, kw_only=True):
    """One day's input: every table, every recurring job and every region."""

    tables: tuple[TetrisTable, ...]
    jobs: tuple[TetrisJob, ...]
    regions: tuple[TetrisRegion, ...]

    def __post_init__(self) -> None:
        regions = {r.name for r in self.regions}
        if len(regions) != len(self.regions):
            raise ValueError("tetris.regions: duplicate region names")
        tables = {t.name for t in self.tables}
        if len(tables) != len(self.tables):
            raise ValueError("tetris.tables: duplicate table names")
        if len({j.id for j in self.jobs}) != len(self.jobs):
            raise ValueError("tetris.jobs: duplicate job ids")
        for t in self.tables:
            for r in (t.home, *t.replicas):
                if r not in regions:
                    raise ValueError(f"tetris.tables[{t.name}]: unknown region {r!r}")
        for j in self.jobs:
            for name in j.tables:
                if name not in tables:
                    raise ValueError(f"tetris.jobs[{j.id}].tables: unknown table {name!r}")


class TetrisParams(TetrisStruct, kw_only=True):
    """Weights and limits of one Tetris pass (`policy.tetris.*`).

    - `w1` weighs cross-region bytes (per byte: 1e-12 makes a terabyte read
      remotely every day cost 1); `w2` the GPU balance; `w3` the storage
      balance. The defaults make a few TB of remote reads a day weigh about
      as much as a region holding 1% more than its share of the demand.
    - `w_priority[p]` weighs priority level p in the GPU balance; 0 is the
      highest priority, so the weights must not increase with p.
    - `high_priority_max`: levels 0..this are high priority (constraint 6).
    - `home_threshold`: constraint 6 as a share, 0..1, of today's high-priority
      GPU-hours that must sit in a region having their GPU type. The paper
      states an absolute threshold; an absolute number would need retuning
      as demand grows every day, a share of today's total tracks it.
    - `move_quota_bytes`: the most bytes the day's moves may copy.
    - `overload_scale_gpu_hours`: expression 8 is sigmoid(overload / scale).
      Raw overloads are thousands of GPU-hours a day and sigmoid(1000) is 1.0
      in floating point: every overload would weigh the same and relieving
      one a little would gain nothing. Dividing by a typical overload keeps
      the factor where it still rises.
    - `min_gain`: a move must lower the cost by more than this; floating-point
      noise and negligible gains move nothing.
    - `group_jobs_max`: how many multi-table ML jobs a pass tries to move as
      a whole (`actors.policies.mast.tetris.groups`); 0 turns group moves off.
    - `hot_replica_storage_share`, `hot_min_jobs`: §3.5 hot tables, see
      `actors.policies.mast.tetris.replicas`; `replica_deadline_*_s`: the soft
      deadlines handed to the migration service for high- and low-priority
      replicas.
    """

    version: Version = "tetris-v2"
    w1: float = 1e-12
    w2: float = 1_000.0
    w3: float = 1_000.0
    w_priority: tuple[float, ...] = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125)
    high_priority_max: int = 1
    home_threshold: float = 0.9
    move_quota_bytes: int = 1_000_000_000_000_000
    overload_scale_gpu_hours: float = 10_000.0
    min_gain: float = 1e-9
    group_jobs_max: int = 10_000
    hot_replica_storage_share: float = 0.2
    hot_min_jobs: int = 3
    replica_deadline_high_s: int = 6 * 3_600
    replica_deadline_low_s: int = 24 * 3_600

    def __post_init__(self) -> None:
        where = "policy.tetris"
        if self.version not in VERSIONS:
            raise ValueError(f"{where}.version must be one of {VERSIONS}, got {self.version!r}")
        for name in ("w1", "w2", "w3", "min_gain"):
            _check_amount(f"{where}.{name}", getattr(self, name))
        if len(self.w_priority) != PRIORITIES:
            raise ValueError(f"{where}.w_priority must have {PRIORITIES} weights")
        for p, w in enumerate(self.w_priority):
            _check_amount(f"{where}.w_priority[{p}]", w)
            if p and w > self.w_priority[p - 1]:
                raise ValueError(f"{where}.w_priority[{p}] must not exceed w_priority[{p - 1}]")
        if not 0 <= self.high_priority_max <= PRIORITY_LOWEST:
            raise ValueError(f"{where}.high_priority_max must be in 0..{PRIORITY_LOWEST}")
        for name in ("home_threshold", "hot_replica_storage_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{where}.{name} must be in [0, 1]")
        if self.move_quota_bytes < 0:
            raise ValueError(f"{where}.move_quota_bytes must be >= 0")
        if not (math.isfinite(self.overload_scale_gpu_hours) and self.overload_scale_gpu_hours > 0):
            raise ValueError(f"{where}.overload_scale_gpu_hours must be finite and > 0")
        if self.group_jobs_max < 0:
            raise ValueError(f"{where}.group_jobs_max must be >= 0")
        if self.hot_min_jobs < 1:
            raise ValueError(f"{where}.hot_min_jobs must be >= 1")
        for name in ("replica_deadline_high_s", "replica_deadline_low_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{where}.{name} must be > 0")

    @property
    def penalises_overload(self) -> bool:
        """Expression 8 as a real factor (v2, and v0 which is scored like v2)."""
        return self.version != "tetris-v1"

    @property
    def storage_weight(self) -> float:
        """w3, or 0 for v1 (no storage soft balance)."""
        return 0.0 if self.version == "tetris-v1" else self.w3

    def home_weight(self, job: TetrisJob) -> float:
        """What a job adds to constraint 6 when it sits in a region with its GPU type.

        Expression 6 sums over high-priority jobs only. v2 (and v0) weigh
        each by its GPU-hours; v1 counts each as 1, the uniform rate the
        paper says v1 used (small and large jobs alike).
        """
        if job.kind != "ml" or job.priority > self.high_priority_max:
            return 0.0
        return 1.0 if self.version == "tetris-v1" else job.gpu_hours


class TetrisCost(TetrisStruct, kw_only=True):
    """The cost of one placement, term by term (each already weighted).

    `home_share` is constraint 6's quantity over its total (1.0 when nothing
    counts); `violations` names every hard constraint not met, sorted:
    `storage:<region>`, `cpu:<app>@<region>`, `home-share`.
    """

    total: float
    cross_region: float
    gpu_balance: float
    storage_balance: float
    cross_region_bytes: int
    home_share: float
    violations: tuple[str, ...] = ()


def sigmoid(x: float) -> float:
    """1 / (1 + e^-x), for x >= 0 (where it cannot overflow)."""
    return 1.0 / (1.0 + math.exp(-x))


def job_region(job: TetrisJob, homes: Mapping[str, str], sizes: Mapping[str, int]) -> str | None:
    """R(job): where the placement puts the job (§3.3).

    ML: the common home of all its tables, else None (fixed later by
    replicas, §3.5). Analytics: the home of most of its tables; a tie goes to
    the region holding more of the job's bytes, then to the first name.
    """
    if job.kind == "ml":
        first = homes[job.tables[0]]
        return first if all(homes[t] == first for t in job.tables) else None
    count: dict[str, int] = {}
    held: dict[str, int] = {}
    for t in job.tables:
        r = homes[t]
        count[r] = count.get(r, 0) + 1
        held[r] = held.get(r, 0) + sizes[t]
    return min(count, key=lambda r: (-count[r], -held[r], r))


def _homes(snapshot: TetrisSnapshot, homes: Mapping[str, str] | None) -> Mapping[str, str]:
    return {t.name: t.home for t in snapshot.tables} if homes is None else homes


def job_regions(snapshot: TetrisSnapshot, homes: Mapping[str, str]) -> dict[str, str | None]:
    """R(job) of every job, by id."""
    sizes = {t.name: t.size_bytes for t in snapshot.tables}
    return {j.id: job_region(j, homes, sizes) for j in snapshot.jobs}


def cross_region_bytes(
    snapshot: TetrisSnapshot, homes: Mapping[str, str], job_r: Mapping[str, str | None]
) -> int:
    """Expression 1, unweighted: bytes read away from R(job), summed over jobs.

    An ML job with R(job) = None reads every table remotely (§3.3).
    """
    sizes = {t.name: t.size_bytes for t in snapshot.tables}
    return sum(sizes[t] for j in snapshot.jobs for t in j.tables if homes[t] != job_r[j.id])


def gpu_demand(
    snapshot: TetrisSnapshot, job_r: Mapping[str, str | None]
) -> dict[tuple[str, int, str], float]:
    """Demand[(gpu_type, priority, region)]: GPU-hours of the ML jobs placed there.

    A job with R(job) = None adds to no region.
    """
    demand: dict[tuple[str, int, str], float] = {}
    for j in snapshot.jobs:
        r = job_r[j.id]
        if j.kind == "ml" and r is not None and j.gpu_type is not None:
            key = (j.gpu_type, j.priority, r)
            demand[key] = demand.get(key, 0.0) + j.gpu_hours
    return demand


def gpu_balance(
    snapshot: TetrisSnapshot, job_r: Mapping[str, str | None], params: TetrisParams
) -> float:
    """Expressions 7 and 8 summed as expression 2 does, weighted by w_priority but not w2.

    For each GPU type g, priority p and region r: (r's share of the demand
    for g at p - r's share of the supply of g)^2 times the overload factor
    sigmoid(max(0, demand for g at r over all priorities - supply)/scale);
    the factor is 0.5 = sigmoid(0) in v1. A (g, p) nobody demands, or a g
    with no supply anywhere, adds nothing: its shares are undefined and no
    placement can change that the demand cannot run.
    """
    demand = gpu_demand(snapshot, job_r)
    types = sorted(
        {r_g for r in snapshot.regions for r_g in r.gpu_supply_hours} | {g for g, _, _ in demand}
    )
    total = 0.0
    for g in types:
        supply = {r.name: r.gpu_supply_hours.get(g, 0.0) for r in snapshot.regions}
        supply_all = sum(supply.values())
        if supply_all <= 0:
            continue
        per_region = {r: sum(demand.get((g, p, r), 0.0) for p in range(PRIORITIES)) for r in supply}
        factor = {
            r: sigmoid(max(0.0, per_region[r] - supply[r]) / params.overload_scale_gpu_hours)
            if params.penalises_overload
            else 0.5
            for r in supply
        }
        for p in range(PRIORITIES):
            demand_all = sum(demand.get((g, p, r), 0.0) for r in supply)
            if demand_all <= 0:
                continue
            gap = sum(
                factor[r] * (demand.get((g, p, r), 0.0) / demand_all - supply[r] / supply_all) ** 2
                for r in supply
            )
            total += params.w_priority[p] * gap
    return total


def storage_used(snapshot: TetrisSnapshot, homes: Mapping[str, str]) -> dict[str, int]:
    """Bytes held per region: homes plus replicas.

    Replicas count: they occupy the space already, and §3.5 adds 75-125% on
    top of the homes, so a homes-only check (the letter of expression 4)
    would let a region fill past its capacity. A region holding a replica
    of a table holds its bytes whatever the home: a table moved there
    promotes the replica (no extra bytes). A home that is not a replica
    counts as freed once the table moves away (the replica stage may keep
    it, and then pays for it again).
    """
    used = {r.name: 0 for r in snapshot.regions}
    for t in snapshot.tables:
        home = homes[t.name]
        used[home] += t.size_bytes
        for r in t.replicas:
            if r != home:
                used[r] += t.size_bytes
    return used


def storage_balance(snapshot: TetrisSnapshot, used: Mapping[str, int]) -> float:
    """Expressions 3 and 9, unweighted: Σ_r (share of bytes held - share of capacity)^2."""
    used_all = sum(used.values())
    capacity_all = sum(r.storage_bytes for r in snapshot.regions)
    if used_all <= 0 or capacity_all <= 0:
        return 0.0
    return sum(
        (used[r.name] / used_all - r.storage_bytes / capacity_all) ** 2 for r in snapshot.regions
    )


def cpu_used(
    snapshot: TetrisSnapshot, job_r: Mapping[str, str | None]
) -> dict[tuple[str, str], float]:
    """CPU-hours[(app, region)] of the jobs of each application placed in each region."""
    used: dict[tuple[str, str], float] = {}
    for j in snapshot.jobs:
        r = job_r[j.id]
        if j.app is not None and r is not None:
            used[j.app, r] = used.get((j.app, r), 0.0) + j.cpu_hours
    return used


def home_collocation(
    snapshot: TetrisSnapshot, job_r: Mapping[str, str | None], params: TetrisParams
) -> tuple[float, float]:
    """Constraint 6's (satisfied, total): jobs whose R(job) has their GPU type, by `home_weight`."""
    supply = {r.name: r.gpu_supply_hours for r in snapshot.regions}
    ok = total = 0.0
    for j in snapshot.jobs:
        weight = params.home_weight(j)
        total += weight
        r = job_r[j.id]
        if r is not None and supply[r].get(j.gpu_type or "", 0.0) > 0:
            ok += weight
    return ok, total


def _constraint_state(
    snapshot: TetrisSnapshot, params: TetrisParams, homes: Mapping[str, str]
) -> tuple[dict[str, int], dict[tuple[str, str], float], tuple[float, float]]:
    job_r = job_regions(snapshot, homes)
    return (
        storage_used(snapshot, homes),
        cpu_used(snapshot, job_r),
        home_collocation(snapshot, job_r, params),
    )


def _violations(
    snapshot: TetrisSnapshot,
    params: TetrisParams,
    used: Mapping[str, int],
    cpu: Mapping[tuple[str, str], float],
    home: tuple[float, float],
) -> tuple[str, ...]:
    out = [f"storage:{r.name}" for r in snapshot.regions if used[r.name] >= r.storage_bytes]
    for r in snapshot.regions:
        for app, cap in r.cpu_capacity_hours.items():
            if cpu.get((app, r.name), 0.0) >= cap:
                out.append(f"cpu:{app}@{r.name}")
    if home[0] < params.home_threshold * home[1]:
        out.append("home-share")
    return tuple(sorted(out))


def tetris_cost(
    snapshot: TetrisSnapshot, params: TetrisParams, homes: Mapping[str, str] | None = None
) -> TetrisCost:
    """The cost of a placement (the snapshot's own homes by default).

    Constraints 4 and 5 are strict (used < capacity), as in Fig. 4; a cap of
    0 therefore forbids any use, and a region whose capacity is exactly
    filled is in violation.
    """
    homes = _homes(snapshot, homes)
    job_r = job_regions(snapshot, homes)
    remote = cross_region_bytes(snapshot, homes, job_r)
    gpu = params.w2 * gpu_balance(snapshot, job_r, params)
    used = storage_used(snapshot, homes)
    storage = params.storage_weight * storage_balance(snapshot, used)
    home = home_collocation(snapshot, job_r, params)
    cross = params.w1 * remote
    return TetrisCost(
        total=cross + gpu + storage,
        cross_region=cross,
        gpu_balance=gpu,
        storage_balance=storage,
        cross_region_bytes=remote,
        home_share=home[0] / home[1] if home[1] > 0 else 1.0,
        violations=_violations(snapshot, params, used, cpu_used(snapshot, job_r), home),
    )


def move_allowed(
    snapshot: TetrisSnapshot,
    params: TetrisParams,
    before: Mapping[str, str],
    after: Mapping[str, str],
) -> bool:
    """Whether going from placement `before` to `after` keeps the hard constraints.

    Each constrained quantity a move changes must end within its limit or no
    worse than it was: a move never pushes a region over, but one that
    relieves a region already over its capacity is allowed. This lets the
    hill climbing start from a placement that breaks a constraint (users'
    static choices, or a capacity cut) and only ever improve it.
    """
    used0, cpu0, (ok0, _) = _constraint_state(snapshot, params, before)
    used1, cpu1, (ok1, total) = _constraint_state(snapshot, params, after)
    for r in snapshot.regions:
        if used1[r.name] > used0[r.name] and used1[r.name] >= r.storage_bytes:
            return False
        for app, cap in r.cpu_capacity_hours.items():
            new, old = cpu1.get((app, r.name), 0.0), cpu0.get((app, r.name), 0.0)
            if new > old and new >= cap:
                return False
    return not (ok1 < ok0 and ok1 < params.home_threshold * total)
