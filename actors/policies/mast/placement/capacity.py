"""Per-snapshot indices for placement: free capacity by rack, preemption candidates in order.

An RMS searches every dynamic cluster of its region for every job of a
workload (MAST §4.3); its largest region has 66,500 machines, ~90% of them
busy. A `ClusterIndex` is built once per `ClusterSnapshot` (kept with it, see
`index_of`) so that a decision touches only the free capacity of the kind it
asks for, rack by rack, and the running jobs it scans:

- per GPU type a `RackPool` (`racks`) of the healthy machines with free GPUs,
  and one of the healthy free CPU machines (1 unit each);
- the running jobs in preemption-scan order (lowest priority, then longest
  running, then id) with what each would free on healthy machines, per GPU
  type and in CPU machines;
- the healthy hardware per GPU type and the healthy CPU machines.

Derived indices touch only what changed: `ClusterIndex.apply` is the index
after a plan (the next job of a workload is placed on it, as on the snapshot
`placement.apply_plan` gives, without building that snapshot), and
`ClusterIndex.updated` the index after machines' free capacity and running
jobs changed (a `ClusterLedger` gives each new snapshot the index updated from
its last one, `attach_index`). Both equal `ClusterIndex.build` of the
changed snapshot. Indices are values: nothing changes one once it is built.

Hosts are unique within a snapshot (a `ClusterLedger` builds it from a dict).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from actors.policies.mast.placement.overlay import HostSet
from actors.policies.mast.placement.racks import EMPTY_POOL, RackPool, Slot
from actors.policies.mast.placement.snapshot import (
    ClusterSnapshot,
    JobPlan,
    JobRequest,
    MachineState,
    RunningJob,
)
from store.mast.records import GPUS_PER_MACHINE

# A running job as the preemption scan sees it: its priority, the job, GPUs it
# holds on healthy machines per GPU type, healthy CPU machines it holds.
Candidate = tuple[int, "RunningJob", dict[str, int], int]
ScanKey = tuple[int, int, str, str]


class ClusterIndex:
    """What placement needs of one cluster snapshot (see the module docstring).

    `gpu_kind` maps each healthy GPU machine to (GPU type, GPUs in total) and
    `gpu_free` to its free GPUs; `cpu_hosts` are the healthy CPU machines and
    `cpu_free` the free ones among them; `gpu_hw` the healthy GPUs per type.
    `pools` and `cpu_pool` hold the free capacity; `scan` the running jobs in
    preemption-scan order and `keys` their sort keys.
    """

    __slots__ = (
        "cluster_id",
        "cpu_free",
        "cpu_hosts",
        "cpu_pool",
        "gpu_free",
        "gpu_hw",
        "gpu_kind",
        "keys",
        "pools",
        "rack_of",
        "scan",
    )

    cluster_id: str
    rack_of: dict[str, str]
    gpu_kind: dict[str, tuple[str, int]]
    gpu_hw: dict[str, int]
    cpu_hosts: frozenset[str]
    gpu_free: dict[str, int]
    cpu_free: HostSet
    pools: dict[str, RackPool]
    cpu_pool: RackPool
    keys: list[ScanKey]
    scan: list[Candidate]

    @classmethod
    def build(cls, snapshot: ClusterSnapshot) -> ClusterIndex:
        ix = cls()
        ix.cluster_id = snapshot.cluster_id
        ix.rack_of = rack_of = {}
        ix.gpu_kind = gpu_kind = {}
        ix.gpu_free = gpu_free = {}
        gpu_hw: dict[str, int] = defaultdict(int)
        free_by_type: dict[str, list[Slot]] = defaultdict(list)
        cpu_hosts: list[str] = []
        cpu_free: list[str] = []
        for m in snapshot.machines:
            host = m.host
            rack_of[host] = m.rack
            if not m.healthy:
                continue
            if m.gpus_total > 0:
                gpu_type = m.gpu_type
                if gpu_type is None:  # matches no request
                    continue
                gpu_kind[host] = (gpu_type, m.gpus_total)
                gpu_hw[gpu_type] += m.gpus_total
                gpu_free[host] = m.gpus_free
                if m.gpus_free:
                    free_by_type[gpu_type].append((host, m.gpus_free))
            else:
                cpu_hosts.append(host)
                if m.cpu_free:
                    cpu_free.append(host)
        ix.gpu_hw = dict(gpu_hw)
        ix.cpu_hosts = frozenset(cpu_hosts)
        ix.cpu_free = HostSet(cpu_free)
        ix.pools = {t: RackPool.build(slots, rack_of) for t, slots in free_by_type.items()}
        ix.cpu_pool = RackPool.build(((h, 1) for h in cpu_free), rack_of)
        entries = sorted(
            ((_scan_key(job), ix.candidate(job)) for job in snapshot.running),
            key=lambda e: e[0],
        )
        ix.keys = [key for key, _ in entries]
        ix.scan = [cand for _, cand in entries]
        return ix

    def candidate(self, job: RunningJob) -> Candidate:
        """`job` as the preemption scan sees it on this index's hardware (see `Candidate`).

        Only healthy machines count: what `job` holds on an unhealthy one
        would not free anything usable if it were preempted.
        """
        by_type: dict[str, int] = {}
        for host, n in job.gpus:
            kind = self.gpu_kind.get(host)
            if kind is not None:
                by_type[kind[0]] = by_type.get(kind[0], 0) + n
        cpus = sum(map(self.cpu_hosts.__contains__, job.cpu_hosts))
        return (job.priority, job, by_type, cpus)

    # ---- queries -----------------------------------------------------------------
    def gpu_pool(self, req: JobRequest) -> RackPool:
        """Free GPUs `req` may use (none for a request without GPUs)."""
        if req.gpus <= 0:
            return EMPTY_POOL
        return self.pools.get(req.gpu_type or "", EMPTY_POOL)

    def victims(self, req: JobRequest) -> tuple[RunningJob, ...] | None:
        """`placement.choose_victims` over the scan order kept here."""
        planned = self.plan_victims(req)
        return None if planned is None else planned[0]

    def plan_victims(
        self, req: JobRequest
    ) -> tuple[tuple[RunningJob, ...], RackPool, RackPool] | None:
        """The jobs to preempt for `req` and the pools it may use once they are gone.

        Running jobs are scanned from the lowest priority (strictly below the
        request's), longest running first, until what they would free covers
        the shortfall; then the ones found are taken largest first until it is
        covered (MAST §4.3). What a job would free is counted exactly as
        `pools_after` frees it: GPUs up to each machine's total, and a CPU
        machine once and only if it is not free already. On a consistent
        snapshot (no unit held twice) that is simply what the job holds; an
        RMS's working view may be briefly over-committed (a dispatched job and
        its victims both hold the victims' machines until their checkpoints
        land), and there the counts stay what the pools will really have, so
        the plan never asks a pool for more than it holds. None if even every
        candidate does not suffice.
        """
        gpu_pool, cpu_pool = self.gpu_pool(req), self.cpu_pool
        short_gpus = req.gpus - gpu_pool.total
        short_cpus = req.cpu_machines - cpu_pool.total
        if short_gpus <= 0 and short_cpus <= 0:
            return (), gpu_pool, cpu_pool
        gpu_type = req.gpu_type if req.gpus > 0 else None
        freed = _Freed(self, gpu_type)
        found: list[tuple[RunningJob, int, int]] = []
        missing_gpus, missing_cpus = short_gpus, short_cpus
        for priority, job, by_type, held_cpus in self.scan:
            # Sorted lowest priority first: the candidates (strictly lower
            # priority than the request) are a prefix.
            if priority <= req.priority or (missing_gpus <= 0 and missing_cpus <= 0):
                break
            holds_gpus = short_gpus > 0 and gpu_type is not None and by_type.get(gpu_type, 0)
            holds_cpus = short_cpus > 0 and held_cpus
            if not (holds_gpus or holds_cpus):
                continue
            gpus, cpus = freed.trial(job, bool(holds_gpus), bool(holds_cpus))
            if (missing_gpus > 0 and gpus) or (missing_cpus > 0 and cpus):
                freed.commit()
                found.append((job, gpus, cpus))
                missing_gpus, missing_cpus = missing_gpus - gpus, missing_cpus - cpus
        if missing_gpus > 0 or missing_cpus > 0:
            return None
        # Largest first; the sort is stable, so equal sizes keep the scan's preference.
        found.sort(key=lambda t: -(t[1] + GPUS_PER_MACHINE * t[2]))
        kept: list[RunningJob] = []
        for job, gpus, cpus in found:
            kept.append(job)
            short_gpus, short_cpus = short_gpus - gpus, short_cpus - cpus
            if short_gpus <= 0 and short_cpus <= 0:
                break
        gpu_after, cpu_after = self.pools_after(req, kept)
        if gpu_after.total < req.gpus or cpu_after.total < req.cpu_machines:
            # Taken out of scan order, jobs that share machines free less than
            # their counts: fall back to every job found, which covers it.
            kept = [job for job, _, _ in found]
            gpu_after, cpu_after = self.pools_after(req, kept)
        return tuple(kept), gpu_after, cpu_after

    def pools_after(
        self, req: JobRequest, victims: Iterable[RunningJob]
    ) -> tuple[RackPool, RackPool]:
        """The GPU and CPU pools `req` may use once `victims` are gone."""
        gpu_pool, cpu_pool = self.gpu_pool(req), self.cpu_pool
        freed = _Freed(self, req.gpu_type if req.gpus > 0 else None)
        for job in victims:
            freed.trial(job, req.gpus > 0, True)
            freed.commit()
        if freed.gpus:
            gpu_pool = gpu_pool.with_units(freed.gpus, self.rack_of)
        if freed.cpus:
            cpu_pool = cpu_pool.with_units(dict.fromkeys(freed.cpus, 1), self.rack_of)
        return gpu_pool, cpu_pool

    # ---- the next state ------------------------------------------------------------
    def apply(self, req: JobRequest, plan: JobPlan, now_us: int) -> ClusterIndex:
        """The index of `placement.apply_plan(snapshot, req, plan, now_us)`."""
        victims = set(plan.victims)
        released: dict[str, int] = defaultdict(int)
        released_cpus: set[str] = set()
        keys, scan = self.keys, self.scan
        if victims:
            keys, scan = [], []
            for key, cand in zip(self.keys, self.scan, strict=True):
                job = cand[1]
                if job.key in victims:
                    for host, n in job.gpus:
                        released[host] += n
                    released_cpus.update(job.cpu_hosts)
                else:
                    keys.append(key)
                    scan.append(cand)
        taken = dict(plan.gpus)
        taken_cpus = set(plan.cpu_hosts)
        gpu_units: dict[str, dict[str, int]] = defaultdict(dict)
        for host in released.keys() | taken.keys():
            kind = self.gpu_kind.get(host)
            if kind is not None:
                free = min(kind[1], self.gpu_free[host] + released.get(host, 0))
                gpu_units[kind[0]][host] = free - taken.get(host, 0)
        cpu_units = {}
        for host in released_cpus | taken_cpus:
            if host in self.cpu_hosts:
                free = (host in self.cpu_free or host in released_cpus) and host not in taken_cpus
                if free != (host in self.cpu_free):
                    cpu_units[host] = int(free)
        placed = plan.placed(req, now_us)
        added = [placed] if placed is not None else []
        return self._evolve(gpu_units, cpu_units, keys, scan, added)

    def updated(
        self,
        machines: Iterable[MachineState],
        gone: Sequence[RunningJob],
        added: Iterable[RunningJob],
    ) -> ClusterIndex | None:
        """The index after some machines' free capacity and some running jobs changed.

        `machines` are the changed machines' new states, `gone` the running
        jobs no longer there (as they were), `added` the new ones. None when
        something else changed (health, hardware, racks): build anew then.
        """
        gpu_units: dict[str, dict[str, int]] = defaultdict(dict)
        cpu_units: dict[str, int] = {}
        for m in machines:
            host = m.host
            if self.rack_of.get(host, None) != m.rack:
                return None
            kind = self.gpu_kind.get(host)
            if not m.healthy or (m.gpus_total > 0 and m.gpu_type is None):
                if kind is not None or host in self.cpu_hosts:
                    return None
            elif m.gpus_total > 0:
                if kind != (m.gpu_type, m.gpus_total):
                    return None
                if m.gpus_free != self.gpu_free[host]:
                    gpu_units[kind[0]][host] = m.gpus_free
            elif host not in self.cpu_hosts:
                return None
            elif m.cpu_free != (host in self.cpu_free):
                cpu_units[host] = int(m.cpu_free)
        return self.with_free(gpu_units, cpu_units, gone, added)

    def with_free(
        self,
        gpu_units: dict[str, dict[str, int]],
        cpu_units: dict[str, int],
        gone: Sequence[RunningJob],
        added: Iterable[RunningJob],
        rack_of: Mapping[str, str] | None = None,
    ) -> ClusterIndex | None:
        """The index after healthy machines' free units and some running jobs changed.

        `gpu_units` maps a GPU type to {host: free GPUs}, `cpu_units` a CPU
        machine to 1 (free) or 0, for healthy machines of this index whose
        free capacity changed (and only those: the caller vouches that
        nothing else about them did, as `updated` checks). None if a job of
        `gone` is not in the scan. `rack_of` may give the racks of the changed
        machines (a caller that has them at hand spares a lookup each among
        all of the cluster's: at MAST's scale, a cache miss each).
        """
        keys, scan = self.keys, self.scan
        if gone:
            keys, scan = list(keys), list(scan)
            for job in gone:
                at = bisect_left(keys, _scan_key(job))
                if at == len(keys) or scan[at][1] != job:
                    return None
                del keys[at], scan[at]
        return self._evolve(gpu_units, cpu_units, keys, scan, added, rack_of)

    def _evolve(
        self,
        gpu_units: dict[str, dict[str, int]],
        cpu_units: dict[str, int],
        keys: list[ScanKey],
        scan: list[Candidate],
        added: Iterable[RunningJob],
        rack_of: Mapping[str, str] | None = None,
    ) -> ClusterIndex:
        """A copy with new free units per host and running jobs added to `keys`/`scan`."""
        racks = self.rack_of if rack_of is None else rack_of
        ix = ClusterIndex()
        for name in ("cluster_id", "rack_of", "gpu_kind", "gpu_hw", "cpu_hosts"):
            setattr(ix, name, getattr(self, name))
        ix.gpu_free, ix.pools = self.gpu_free, self.pools
        if gpu_units:
            ix.gpu_free = dict(self.gpu_free)
            ix.pools = dict(self.pools)
            for gpu_type, units in gpu_units.items():
                ix.gpu_free.update(units)
                pool = self.pools.get(gpu_type, EMPTY_POOL)
                ix.pools[gpu_type] = pool.with_units(units, racks)
        ix.cpu_free, ix.cpu_pool = self.cpu_free, self.cpu_pool
        if cpu_units:
            ix.cpu_free = self.cpu_free.with_changes({h: n > 0 for h, n in cpu_units.items()})
            ix.cpu_pool = self.cpu_pool.with_units(cpu_units, racks)
        new = list(added)
        if new and keys is self.keys:
            keys, scan = list(keys), list(scan)  # this index's lists stay as they are
        for job in new:
            key = _scan_key(job)
            # After every equal key, as a job appended to the running list sorts.
            at = bisect_right(keys, key)
            keys.insert(at, key)
            scan.insert(at, ix.candidate(job))
        ix.keys, ix.scan = keys, scan
        return ix


# Where a snapshot keeps its index: outside its fields (`ClusterSnapshot` is
# `dict=True`), so the index is neither compared nor encoded.
_INDEX_KEY = "index"


def index_of(snapshot: ClusterSnapshot) -> ClusterIndex:
    """The snapshot's placement index: built on first use, then kept with the snapshot.

    A snapshot is frozen, so its index never goes stale.
    """
    index = snapshot.__dict__.get(_INDEX_KEY)
    if index is None:
        index = snapshot.__dict__[_INDEX_KEY] = ClusterIndex.build(snapshot)
    return index


class _Freed:
    """What preempting jobs one after another frees on an index: the one arithmetic of
    `plan_victims` and `pools_after`.

    `gpus` maps each machine of the request's GPU type to its free GPUs once
    the committed jobs are gone (never more than its total); `cpus` are the
    CPU machines they free (busy ones only). `trial` counts what one more job
    would add without keeping it; `commit` keeps the last trial.
    """

    __slots__ = ("_cpus", "_gpus", "cpus", "gpu_type", "gpus", "ix")

    def __init__(self, ix: ClusterIndex, gpu_type: str | None) -> None:
        self.ix = ix
        self.gpu_type = gpu_type
        self.gpus: dict[str, int] = {}
        self.cpus: set[str] = set()
        self._gpus: dict[str, int] = {}
        self._cpus: list[str] = []

    def trial(self, job: RunningJob, gpus: bool, cpus: bool) -> tuple[int, int]:
        ix = self.ix
        self._gpus, self._cpus = {}, []
        gained = 0
        if gpus and self.gpu_type is not None:
            for host, n in job.gpus:
                kind = ix.gpu_kind.get(host)
                if kind is None or kind[0] != self.gpu_type:
                    continue
                before = self._gpus.get(host, self.gpus.get(host, ix.gpu_free[host]))
                after = min(before + n, kind[1])
                self._gpus[host] = after
                gained += after - before
        if cpus:
            self._cpus = [
                h
                for h in dict.fromkeys(job.cpu_hosts)
                if h in ix.cpu_hosts and h not in ix.cpu_free and h not in self.cpus
            ]
        return gained, len(self._cpus)

    def commit(self) -> None:
        self.gpus.update(self._gpus)
        self.cpus.update(self._cpus)
        self._gpus, self._cpus = {}, []


def has_index(snapshot: ClusterSnapshot) -> bool:
    """Whether the snapshot's index has been made (`index_of` makes it on first use)."""
    return _INDEX_KEY in snapshot.__dict__


def attach_index(snapshot: ClusterSnapshot, index: ClusterIndex) -> None:
    """Give `snapshot` an index derived elsewhere; it must equal `ClusterIndex.build(snapshot)`.

    For whoever builds snapshots one change at a time (`ClusterLedger`): the
    index of the next snapshot is then `updated` from the last one's.
    """
    snapshot.__dict__[_INDEX_KEY] = index


def _scan_key(job: RunningJob) -> ScanKey:
    """Preemption-scan order: lowest priority first, then longest running, then id."""
    return (-job.priority, job.started_at_us, job.workload_id, job.job)
