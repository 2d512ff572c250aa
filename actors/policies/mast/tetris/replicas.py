"""Extra table replicas once the day's homes are settled (MAST §3.5).

Tetris learns who reads each table from history: `readers` gives, per
table and GPU type, how many distinct ML jobs of the history read it (§3.3:
usage is "estimated from the past history of the tables and jobs"; the
warehouse's history has past first-time workloads too). Without it, the
snapshot's recurring ML jobs are the history (`readers_of_jobs`). Three
kinds of replicas, decided in this order over the placement after hill
climbing:

- DR (`dr`): every table keeps one replica outside its home. An existing DR
  replica stays. A table without one (or whose DR replica became its home)
  reuses, in this order: its old home if it moved (the data is there, no
  copy), another replica it already has, or a new copy. Among replicas, and
  among regions for a new copy, the DR policy prefers hardware for the
  table's readers (`dr_preference`): first its readers on GPU types the
  region has and the home lacks, then its readers on every type the region
  has (the load it could take if the home were lost); a new copy then goes
  where storage is freest (ties by name). The paper's policy also weighs correlated regional
  failures, which this model does not know.
- collocation (`colocation`): an ML job whose R(job) is None, or lacks its
  GPU type, needs a region that holds all its tables and has its GPU type.
  If a home or replica already gives one, nothing is done; otherwise its
  missing tables are copied to the region with the largest supply of its
  GPU type that can store all of them. Jobs are served by priority (then
  id), so high-priority jobs get the space first.
- hot (`hot`): per region and GPU type, a storage budget of
  `hot_replica_storage_share` of the region's capacity, split among its GPU
  types in proportion to their supply. Tables read by at least
  `hot_min_jobs` jobs of that type are taken hottest first (most readers of
  that type, then by name) and copied while they fit the budget; a table
  too big for what is left is passed over and smaller ones still go. A
  table already in the region costs nothing.

Nothing is copied into a region unless it stays below its capacity
(constraint 4, strict as in Fig. 4). A moved table is copied to its new
home first and its old home deleted after (`ReplicaDeletion`), unless the
old home is kept as one of the replicas above. Replicas no job needs any
more are not collected here.

v0 (no automatic placement) gets DR replicas only.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

from actors.policies.mast.tetris.cost import (
    TetrisJob,
    TetrisParams,
    TetrisSnapshot,
    TetrisStruct,
    TetrisTable,
    job_region,
    storage_used,
)
from actors.policies.mast.tetris.plan import TetrisPlan, homes_after
from store.mast.records import PRIORITY_LOWEST

__all__ = [
    "Readers",
    "ReplicaDeletion",
    "ReplicaOrder",
    "ReplicaPlan",
    "dr_preference",
    "plan_replicas",
    "readers_of_jobs",
]

Reason = Literal["dr", "colocation", "hot"]
# The access history: table -> GPU type -> distinct ML jobs that read the table on it.
Readers = Mapping[str, Mapping[str, int]]


def readers_of_jobs(jobs: Collection[TetrisJob]) -> dict[str, dict[str, int]]:
    """`Readers` when all Tetris knows is its jobs: the ML ones per table and GPU type."""
    out: dict[str, dict[str, int]] = {}
    for job in jobs:
        if job.kind == "ml" and job.gpu_type is not None:
            for t in job.tables:
                per_type = out.setdefault(t, {})
                per_type[job.gpu_type] = per_type.get(job.gpu_type, 0) + 1
    return out


def dr_preference(
    readers: Mapping[str, int], home_gpus: Collection[str], gpus: Collection[str]
) -> tuple[int, int]:
    """How well a region with GPU types `gpus` suits a table's DR copy; larger is better.

    `readers` counts the table's past readers per GPU type. First come those
    on types the region has and the home lacks: they cannot train at the
    home, and the DR copy lets them train here (§3.5: "the DR copy may fix
    some of these jobs"). Then those on every type the region has: the load
    it could take if the home were lost ("availability of hardware to handle
    increased load after a disaster").
    """
    adds = sum(n for g, n in readers.items() if g in gpus and g not in home_gpus)
    serves = sum(n for g, n in readers.items() if g in gpus)
    return adds, serves


class ReplicaOrder(TetrisStruct, kw_only=True):
    """Copy `table` to `region`, for the migration service.

    `priority` is the best priority of the jobs the replica serves (the
    table's readers for DR); `deadline_hint_s` is the soft deadline from now.
    With `keep_old_home` the region is the table's old home: nothing to copy,
    the pending deletion is simply not made.
    """

    table: str
    region: str
    reason: Reason
    priority: int
    deadline_hint_s: int
    size_bytes: int
    keep_old_home: bool = False


class ReplicaDeletion(TetrisStruct, kw_only=True):
    """Delete a moved table's old home once its new home `after_copy_to` holds the data."""

    table: str
    region: str
    after_copy_to: str
    size_bytes: int


class ReplicaPlan(TetrisStruct, kw_only=True):
    """The replicas to create and the old homes to delete.

    `orders` come highest priority first. `dr_regions` lists the tables whose
    DR region is new or changed, as (table, region). `unplaced` names what no
    region could take: `dr:<table>`, `colocation:<job>`. `storage_used` is
    the bytes each region holds once the orders and deletions are done.
    """

    orders: tuple[ReplicaOrder, ...]
    deletions: tuple[ReplicaDeletion, ...]
    dr_regions: tuple[tuple[str, str], ...]
    unplaced: tuple[str, ...]
    storage_used: dict[str, int]


class _Holdings:
    """Where every table is held while the replicas are decided (lives inside one call)."""

    def __init__(
        self, snapshot: TetrisSnapshot, plan: TetrisPlan, params: TetrisParams, readers: Readers
    ) -> None:
        self.params = params
        self.readers = readers
        self.gpus = {
            r.name: frozenset(g for g, h in r.gpu_supply_hours.items() if h > 0)
            for r in snapshot.regions
        }
        self.homes = homes_after(snapshot, plan)
        self.sizes = {t.name: t.size_bytes for t in snapshot.tables}
        self.cap = {r.name: r.storage_bytes for r in snapshot.regions}
        self.held = storage_used(snapshot, self.homes)
        self.holds = {t.name: {self.homes[t.name], *t.replicas} for t in snapshot.tables}
        # A table moved off a region that is not one of its replicas leaves that
        # region as an old home: deleted unless a rule keeps it.
        self.old_home = {
            t.name: t.home
            for t in snapshot.tables
            if self.homes[t.name] != t.home and t.home not in t.replicas
        }
        self.orders: list[ReplicaOrder] = []

    def add(self, table: str, region: str, reason: Reason, priority: int) -> bool:
        """Hold `table` in `region`, ordering a copy if needed; False if it does not fit."""
        if region in self.holds[table]:
            return True
        size = self.sizes[table]
        if size and self.held[region] + size >= self.cap[region]:
            return False
        self.held[region] += size
        self.holds[table].add(region)
        high = priority <= self.params.high_priority_max
        self.orders.append(
            ReplicaOrder(
                table=table,
                region=region,
                reason=reason,
                priority=priority,
                deadline_hint_s=(
                    self.params.replica_deadline_high_s
                    if high
                    else self.params.replica_deadline_low_s
                ),
                size_bytes=size,
                keep_old_home=self.old_home.get(table) == region,
            )
        )
        return True

    def dr(self, t: TetrisTable, priority: int) -> str | None:
        """The table's DR region after the pass (ordering a copy if it needs one), or None."""
        home = self.homes[t.name]
        if t.dr_region is not None and t.dr_region != home:
            return t.dr_region
        old = self.old_home.get(t.name)
        if old is not None and self.add(t.name, old, "dr", priority):
            return old
        readers = self.readers.get(t.name, {})

        def worse(r: str) -> tuple[int, int]:
            adds, serves = dr_preference(readers, self.gpus[home], self.gpus[r])
            return -adds, -serves

        others = sorted((r for r in t.replicas if r != home), key=lambda r: (worse(r), r))
        if others:
            return others[0]
        free = sorted(
            (r for r in self.cap if r != home),
            key=lambda r: (worse(r), self.held[r] - self.cap[r], r),
        )
        return next((r for r in free if self.add(t.name, r, "dr", priority)), None)

    def colocate(self, job: TetrisJob, supply: dict[str, dict[str, float]]) -> bool:
        """Give an ML job a region with its tables and its GPU type; False if none can."""
        g = job.gpu_type or ""
        r_job = job_region(job, self.homes, self.sizes)
        if r_job is not None and supply[r_job].get(g, 0.0) > 0:
            return True
        fits = sorted(
            (r for r in supply if supply[r].get(g, 0.0) > 0), key=lambda r: (-supply[r][g], r)
        )
        common = set.intersection(*(self.holds[t] for t in job.tables))
        if any(r in common for r in fits):
            return True  # a replica (the DR one, say) already gives the job a region
        for r in fits:
            missing = [t for t in job.tables if r not in self.holds[t]]
            need = sum(self.sizes[t] for t in missing)
            if not need or self.held[r] + need < self.cap[r]:
                for t in missing:
                    self.add(t, r, "colocation", job.priority)
                return True
        return False

    def hot(self, snapshot: TetrisSnapshot, g: str) -> None:
        """Copy the hottest tables of GPU type g into each region's budget for g."""
        hotness = {t: per_type.get(g, 0) for t, per_type in self.readers.items()}
        # A replica serves the recurring readers' priority; past first-time readers
        # carry none Tetris could plan for, so they get the lowest.
        best: dict[str, int] = {}
        for job in snapshot.jobs:
            if job.gpu_type == g:
                for t in job.tables:
                    best[t] = min(best.get(t, PRIORITY_LOWEST), job.priority)
        hot = sorted(
            (t for t, n in hotness.items() if n >= self.params.hot_min_jobs),
            key=lambda t: (-hotness[t], t),
        )
        for r in sorted(snapshot.regions, key=lambda r: r.name):
            gpu_all = sum(r.gpu_supply_hours.values())
            if r.gpu_supply_hours.get(g, 0.0) <= 0:
                continue
            share = r.gpu_supply_hours[g] / gpu_all
            left = int(self.params.hot_replica_storage_share * r.storage_bytes * share)
            for t in hot:
                size = self.sizes[t]
                if (
                    size <= left
                    and r.name not in self.holds[t]
                    and self.add(t, r.name, "hot", best.get(t, PRIORITY_LOWEST))
                ):
                    left -= size


def plan_replicas(
    snapshot: TetrisSnapshot,
    plan: TetrisPlan,
    params: TetrisParams,
    readers: Readers | None = None,
) -> ReplicaPlan:
    """The replica orders and deletions for the placement after `plan` (module docstring).

    `readers` is the tables' access history (`Readers`); None takes the
    snapshot's ML jobs as the history (`readers_of_jobs`).

    Raises:
        ValueError: `readers` names a table the snapshot does not have.
    """
    if readers is None:
        readers = readers_of_jobs(snapshot.jobs)
    names = {t.name for t in snapshot.tables}
    unknown = sorted(t for t in readers if t not in names)
    if unknown:
        raise ValueError(f"tetris readers: unknown table {unknown[0]!r}")
    state = _Holdings(snapshot, plan, params, readers)
    best: dict[str, int] = {}  # table -> the best priority of the jobs reading it
    for job in snapshot.jobs:
        for t in job.tables:
            best[t] = min(best.get(t, PRIORITY_LOWEST), job.priority)
    unplaced: list[str] = []
    dr_regions: list[tuple[str, str]] = []
    for t in sorted(snapshot.tables, key=lambda t: t.name):
        region = state.dr(t, best.get(t.name, PRIORITY_LOWEST))
        if region is None:
            unplaced.append(f"dr:{t.name}")
        elif region != t.dr_region:
            dr_regions.append((t.name, region))
    if params.version != "tetris-v0":
        supply = {
            r.name: r.gpu_supply_hours for r in sorted(snapshot.regions, key=lambda r: r.name)
        }
        for job in sorted(snapshot.jobs, key=lambda j: (j.priority, j.id)):
            if job.kind == "ml" and not state.colocate(job, supply):
                unplaced.append(f"colocation:{job.id}")
        for g in sorted({g for per_type in readers.values() for g in per_type}):
            state.hot(snapshot, g)
    deletions = [
        ReplicaDeletion(
            table=t, region=old, after_copy_to=state.homes[t], size_bytes=state.sizes[t]
        )
        for t, old in sorted(state.old_home.items())
        if old not in state.holds[t]
    ]
    return ReplicaPlan(
        orders=tuple(sorted(state.orders, key=lambda o: (o.priority, o.table, o.region))),
        deletions=tuple(deletions),
        dr_regions=tuple(dr_regions),
        unplaced=tuple(unplaced),
        storage_used=state.held,
    )
