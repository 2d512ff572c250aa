"""An actor's working view of one dynamic cluster, turned into policy snapshots.

The cluster manager keeps one for its own cluster (the truth while it lives);
an RMS keeps one per cluster of its region (a cache brought up to date from
the store at every GMS-scan pass and updated by the plans it dispatches).
Policies never see this mutable view, only the frozen `ClusterSnapshot` it
produces.

Bringing a ledger up to date (`sync`) re-reads only what changed in the
store since it last read: the store logs every change of a machine row, an
allocation or a job row per cluster (`fleet_changes`), and the ledger
replaces the entries of the jobs and hosts concerned by what the store holds
now. Entries the ledger's owner made itself (an RMS's reservation for a plan
being started, the hold of a pipelined bid) are left alone until the store
has a row for that job or the owner releases them. Such an entry may claim
the victims its plan preempts: while it stands, they are in no snapshot, so no
other plan counts on the machines they are about to give up (one victim chosen
by two plans: the CM starts whichever comes first). At MAST's scale a full
reload at every pass read ~160k allocation rows each time; a sync reads
what a few minutes of starts and ends touched. What must stay true: the
store's part of a synced ledger equals a ledger loaded afresh.

Snapshots are cached until the next change, and a change rebuilds only what
it touched: the view keeps one `MachineState` per host and one `RunningJob`
per job and remakes just those of the hosts and jobs changed since the last
snapshot (a plan touches a few machines of thousands), and the new
snapshot's placement index is derived from the last one's
(`ClusterIndex.updated`) instead of built anew. A view reloaded from the
store starts from the view it replaces (`fetch(..., previous=)`), so what
did not change is not rebuilt either. A change that only undoes what the
last snapshot changed (a bid's hold, read by the next bid, then released)
gives back the snapshot before it, index and all (`_reverted`). A usable
CPU machine has two states, made once. What a rebuild needs of a machine
sits in one record (`HostRecord`, `actors/common/cm/records.py`): at MAST's
scale a rebuild is bound by memory, not by arithmetic (a dict lookup of a
host among thousands costs a cache miss), so one lookup replaces the maps it
used to read one by one (states, positions, CPU state pairs, health and
transit, racks, GPUs and CPU holders counted). A change finds each of its
machines' records once and lists the ones to remake; the rebuild walks that
list of records, not a set of host names to look up again.
Snapshots and indices are equal to ones built from scratch.

Machines in transit: RAS may move a machine into this cluster while a job of
its old cluster still holds it (that cluster's CM frees it soon). Such a host
is in `transit`: part of the cluster, but offered to no plan (unhealthy in
snapshots) until a reload finds it free. Its holder is not one of this
cluster's jobs, so it is never a preemption victim here.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import msgspec

from actors.common.cm.records import Held, HostRecord, machine_state, uncount
from actors.policies.mast.placement.capacity import attach_index, has_index, index_of
from actors.policies.mast.placement.machines import MachineRow
from actors.policies.mast.placement.snapshot import ClusterSnapshot, MachineState, RunningJob
from store.mast import changes, fleet
from store.mast.fleet import Allocation, JobRow
from store.mast.records import Machine

T = TypeVar("T")


# A snapshot, its states of the machines and jobs the next snapshot changed, and
# the keys of its running jobs (a revert restores them without a pass over jobs).
_Before = tuple[
    ClusterSnapshot,
    dict[str, MachineState | None],
    dict[tuple[str, str], RunningJob | None],
    list[tuple[str, str]],
]


class StoreCaller(Protocol):
    """Whoever reads the store for a ledger: an actor, whose store calls are traced."""

    async def store(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T: ...


class ClusterLedger:
    """One dynamic cluster as an actor last read it, kept current as that actor acts.

    Its machines and their health, what each job holds, and the machines in
    transit (module docstring); mutable, unlike the cluster policies' frozen
    `ClusterView` (`actors/policies/cluster/api.py`). What must stay true:
    `snapshot()` equals the snapshot built from scratch from the same state.
    """

    def __init__(self, cluster: str, machines: Iterable[tuple[Machine, bool]]) -> None:
        self.cluster = cluster
        self.machines: dict[str, Machine] = {}
        self.healthy: dict[str, bool] = {}
        for machine, healthy in machines:
            self.machines[machine.host] = machine
            self.healthy[machine.host] = healthy
        # The hardware kinds present (healthy or not): GPU types, and CPU machines.
        self.gpu_types = {m.gpu_type for m in self.machines.values() if m.gpu_type}
        self.has_cpu = any(m.gpus == 0 for m in self.machines.values())
        # What jobs hold of machines this cluster does not have (a plan's host from
        # elsewhere): counted so a release balances, never in a snapshot.
        self._stray_used: dict[str, int] = {}
        self._stray_busy: dict[str, int] = {}
        self.jobs: dict[tuple[str, str], Held] = {}
        self._claimed: dict[tuple[str, str], int] = {}  # victim -> entries claiming it
        self.transit: set[str] = set()  # held by another cluster's job (module docstring)
        self._snapshot: ClusterSnapshot | None = None
        # The snapshot's parts, and what changed since they were made.
        self._hosts = sorted(self.machines)
        self._slots = {
            host: HostRecord(self.machines[host], i, self.healthy[host])
            for i, host in enumerate(self._hosts)
        }
        self._run_keys: list[tuple[str, str]] = []  # the keys of `_last.running`, in order
        self._running: dict[tuple[str, str], RunningJob] = {}
        self._dirty: list[HostRecord] = list(self._slots.values())  # records with `dirty` set
        self._dirty_jobs: set[tuple[str, str]] = set()
        self._last: ClusterSnapshot | None = None  # what the slots and `_running` last made
        # The snapshot before `_last`, with the states its hosts and jobs had where
        # `_last` changed them (`_reverted`).
        self._before: _Before | None = None
        # The change of the store this ledger has read up to (`sync`), and the
        # jobs whose entries came from the store rather than from its owner.
        self.synced = 0
        self._from_store: set[tuple[str, str]] = set()
        # The store's allocations here of jobs not live in this cluster (transit).
        self._foreign: dict[tuple[str, str], set[str]] = {}

    @classmethod
    def load(
        cls,
        cluster: str,
        machines: Iterable[tuple[Machine, bool]],
        allocations: Iterable[Allocation],
        jobs: Iterable[JobRow],
    ) -> ClusterLedger:
        view = cls(cluster, machines)
        rows = {(j.workload_id, j.job): j for j in jobs}
        by_job: dict[tuple[str, str], list[Allocation]] = {}
        for a in allocations:
            by_job.setdefault((a.workload_id, a.job), []).append(a)
        for key, allocs in sorted(by_job.items()):
            row = rows.get(key)
            if row is None:  # a live job of this cluster holds every allocation but these
                view.transit.update(a.host for a in allocs)
                view._recheck(a.host for a in allocs)
                view._foreign[key] = {a.host for a in allocs}
                continue
            view._allocate_row(row, allocs)
        return view

    def _allocate_row(self, row: JobRow, allocs: Iterable[Allocation]) -> None:
        """Enter a live job of the store with its allocations on this cluster's machines."""
        allocs = list(allocs)
        key = (row.workload_id, row.job)
        started = row.started_us if row.started_us is not None else 0
        self.allocate(
            key,
            row.priority,
            started,
            [(a.host, a.gpus) for a in allocs if not a.cpu],
            [a.host for a in allocs if a.cpu],
        )
        self._from_store.add(key)

    @classmethod
    async def fetch(
        cls, actor: StoreCaller, cluster: str, previous: ClusterLedger | None = None
    ) -> ClusterLedger:
        """Read a cluster's machines, allocations and live jobs through `actor`'s store calls.

        With `previous` (the view this one replaces), the snapshot parts that
        did not change are taken over from it instead of being rebuilt.
        """
        seq = await actor.store(changes.change_seq)  # first: later changes are read again
        view = cls.load(
            cluster,
            await actor.store(fleet.machines, cluster),
            await actor.store(fleet.allocations, cluster),
            await actor.store(fleet.jobs, cluster, fleet.LIVE_JOB_STATES),
        )
        view.synced = seq
        if previous is not None:
            view._adopt(previous)
        return view

    async def sync(self, actor: StoreCaller) -> ClusterLedger:
        """This ledger brought up to date with the store, re-reading only what changed.

        Returns itself, or a ledger loaded afresh (`fetch`) when machines
        joined or left the cluster or changed hardware (RAS moves are rare).
        """
        changed = await actor.store(changes.changes, self.cluster, self.synced)
        if changed.seq == self.synced:
            return self
        moved = set(changed.hosts)
        affected = set(changed.jobs)
        if moved:
            affected.update(
                key
                for key in self._from_store
                if not moved.isdisjoint(self.jobs[key].gpus)
                or not moved.isdisjoint(self.jobs[key].cpu_hosts)
            )
        # The machines the affected jobs held as last read: whoever holds them now is read.
        hosts = set(moved)
        for key in affected:
            held = self.jobs.get(key) if key in self._from_store else None
            if held is not None:
                hosts.update(held.gpus, held.cpu_hosts)
            hosts.update(self._foreign.get(key, ()))
        rows = await actor.store(changes.rows_for, sorted(moved), sorted(hosts), sorted(affected))
        for machine, healthy in rows.machines:
            ours = machine.cluster == self.cluster
            known = self.machines.get(machine.host)
            if ours != (known is not None) or (ours and known != machine):
                return await ClusterLedger.fetch(actor, self.cluster, previous=self)
            if ours and self.healthy[machine.host] != healthy:
                self.set_health([machine.host], healthy)
        live = {
            (r.workload_id, r.job): r
            for r in rows.jobs
            if r.cluster == self.cluster and r.state in fleet.LIVE_JOB_STATES
        }
        by_job: dict[tuple[str, str], list[Allocation]] = {}
        holders: dict[str, set[tuple[str, str]]] = {h: set() for h in rows.complete_hosts}
        for a in rows.allocations:
            if a.host in self.machines:
                key = (a.workload_id, a.job)
                by_job.setdefault(key, []).append(a)
                if a.host in holders:
                    holders[a.host].add(key)
        for key in sorted(affected | by_job.keys()):
            if key in self._from_store or key in live:
                self.release(key)
            self._foreign.pop(key, None)
            allocs = by_job.get(key)
            if allocs and key in live:
                self._allocate_row(live[key], allocs)
            elif allocs:
                self._foreign[key] = {a.host for a in allocs}
        for host, keys in holders.items():
            if host in self.machines and (host in self.transit) != any(k not in live for k in keys):
                self.transit.symmetric_difference_update((host,))
                self._recheck((host,))
                self._touch(self._slots[host])
                self._snapshot = None
        self.synced = changed.seq
        return self

    def _adopt(self, old: ClusterLedger) -> None:
        """Take over `old`'s snapshot parts; only hosts and jobs that differ stay dirty."""
        if self.machines != old.machines:
            return
        old.snapshot()
        # A machine's state depends on its usability, GPUs used and CPU holders only.
        self._dirty = []
        for host, slot in self._slots.items():
            was = old._slots[host]
            slot.dirty = False
            if slot.ok != was.ok or slot.used != was.used or (slot.busy > 0) != (was.busy > 0):
                self._touch(slot)
        self._dirty_jobs = {
            k for k in self.jobs.keys() | old.jobs.keys() if self.jobs.get(k) != old.jobs.get(k)
        } | (self._claimed.keys() ^ old._claimed.keys())
        for host, slot in self._slots.items():
            was = old._slots[host]
            slot.state, slot.taken, slot.free = was.state, was.taken, was.free
        self._running = dict(old._running)
        self._last = old._last
        self._run_keys = list(old._run_keys)

    # ---- changes ---------------------------------------------------------------
    def allocate(
        self,
        key: tuple[str, str],
        priority: int,
        started_us: int,
        gpus: Iterable[tuple[str, int]],
        cpu_hosts: Iterable[str],
        claims: Iterable[tuple[str, str]] = (),
    ) -> None:
        held = self.jobs.setdefault(key, Held(priority, started_us))
        for victim in claims:
            held.claims += (victim,)
            self._claimed[victim] = self._claimed.get(victim, 0) + 1
            self._dirty_jobs.add(victim)
        slots, dirty = self._slots, self._dirty
        for host, n in gpus:
            held.gpus[host] = held.gpus.get(host, 0) + n
            slot = slots.get(host)
            if slot is None:
                self._stray_used[host] = self._stray_used.get(host, 0) + n
                continue
            slot.used += n
            # `_touch`, inlined: this loop runs for every machine of every change.
            if not slot.dirty:
                slot.dirty = True
                dirty.append(slot)
        for host in cpu_hosts:
            held.cpu_hosts.append(host)
            slot = slots.get(host)
            if slot is None:
                self._stray_busy[host] = self._stray_busy.get(host, 0) + 1
                continue
            slot.busy += 1
            if not slot.dirty:
                slot.dirty = True
                dirty.append(slot)
        self._dirty_jobs.add(key)
        self._snapshot = None

    def release(self, key: tuple[str, str]) -> Held | None:
        held = self.jobs.pop(key, None)
        self._from_store.discard(key)
        if held is not None:
            for victim in held.claims:
                uncount(self._claimed, victim, 1)
                self._dirty_jobs.add(victim)
            slots, dirty = self._slots, self._dirty
            for host, n in held.gpus.items():
                slot = slots.get(host)
                if slot is None:
                    uncount(self._stray_used, host, n)
                    continue
                slot.used = max(0, slot.used - n)
                if not slot.dirty:
                    slot.dirty = True
                    dirty.append(slot)
            for host in held.cpu_hosts:
                slot = slots.get(host)
                if slot is None:
                    uncount(self._stray_busy, host, 1)
                    continue
                slot.busy = max(0, slot.busy - 1)
                if not slot.dirty:
                    slot.dirty = True
                    dirty.append(slot)
            if key in self._running:
                self._dirty_jobs.add(key)
            else:  # never in a snapshot: nothing to undo (and the set stays bounded)
                self._dirty_jobs.discard(key)
            self._snapshot = None
        return held

    def set_health(self, hosts: Iterable[str], healthy: bool) -> None:
        for host in hosts:
            if host in self.healthy:
                self.healthy[host] = healthy
                self._recheck((host,))
                self._touch(self._slots[host])
        self._snapshot = None

    def _touch(self, slot: HostRecord) -> None:
        """Remake the machine's state at the next snapshot."""
        if not slot.dirty:
            slot.dirty = True
            self._dirty.append(slot)

    def _recheck(self, hosts: Iterable[str]) -> None:
        """After their health or transit changed: the hosts' records say whether they are usable."""
        for host in hosts:
            slot = self._slots.get(host)
            if slot is not None:
                slot.ok = self.healthy[host] and host not in self.transit

    # ---- queries ------------------------------------------------------------------
    def gpus_used_on(self, host: str) -> int:
        """GPUs the ledger's jobs hold on `host`."""
        slot = self._slots.get(host)
        return slot.used if slot is not None else self._stray_used.get(host, 0)

    def cpu_holders(self, host: str) -> int:
        """How many of the ledger's jobs hold `host` as a CPU machine (free only at zero)."""
        slot = self._slots.get(host)
        return slot.busy if slot is not None else self._stray_busy.get(host, 0)

    @property
    def gpus_used(self) -> dict[str, int]:
        """Host -> GPUs held, every machine of the cluster included (a copy: for checks)."""
        return {host: slot.used for host, slot in self._slots.items()} | self._stray_used

    @property
    def cpu_busy(self) -> dict[str, int]:
        """CPU machine -> how many jobs hold it, busy ones only (a copy: for checks)."""
        busy = {host: slot.busy for host, slot in self._slots.items() if slot.busy}
        return busy | {host: n for host, n in self._stray_busy.items() if n}

    def usable(self, host: str) -> bool:
        """In the cluster, healthy and not in transit."""
        slot = self._slots.get(host)
        return slot is not None and slot.ok

    def hosts_under(self, node: str) -> list[str]:
        prefix = node + "/"
        return sorted(h for h in self.machines if h == node or h.startswith(prefix))

    def _patched(
        self,
        last: ClusterSnapshot,
        changed: list[MachineState],
        at: list[int],
        gone: list[RunningJob],
        added: list[RunningJob],
    ) -> tuple[Sequence[MachineState], tuple[RunningJob, ...]]:
        """`last`'s machines and running jobs with the changes applied (same order as built).

        `at[i]` is the position of `changed[i]` among the machines.
        """
        machines = last.machines
        if changed:
            assert isinstance(machines, MachineRow)  # every snapshot a ledger makes has one
            machines = machines.patched(at, changed)
        jobs = last.running
        if gone or added:
            # A new list: the one it replaces stays with the snapshot before (`_before`).
            keys = self._run_keys = list(self._run_keys)
            run = list(jobs)
            for job in gone:
                at = bisect_left(keys, job.key)
                del keys[at], run[at]
            for job in added:
                at = bisect_left(keys, job.key)
                keys.insert(at, job.key)
                run.insert(at, job)
            jobs = tuple(run)
        return machines, jobs

    def jobs_on(self, hosts: Iterable[str]) -> list[tuple[str, str]]:
        wanted = set(hosts)
        return sorted(k for k, held in self.jobs.items() if wanted & set(held.hosts))

    def snapshot(self) -> ClusterSnapshot:
        """A frozen snapshot for the policies (cached until the next change)."""
        if self._snapshot is None:
            slots = self._slots
            changed: list[MachineState] = []
            at: list[int] = []  # their positions among the machines
            # The same changes as the placement index takes them (`with_free`),
            # unless some machine's health or presence changed (`structural`).
            gpu_units: dict[str, dict[str, int]] = {}
            cpu_units: dict[str, int] = {}
            racks: dict[str, str] = {}  # the racks of the hosts in those (`with_free`)
            structural = self._last is None
            replaced: dict[str, MachineState | None] = {}  # changed hosts' last states
            dirty, self._dirty = self._dirty, []
            for slot in dirty:
                slot.dirty = False
                host = slot.host
                ok = slot.ok
                old = slot.state
                gpus = slot.gpus
                if not gpus:
                    # CPU machines are most of a cluster and of every plan: a host
                    # has two states while usable, made once and shared after.
                    cpu_free = not slot.busy
                    if ok:
                        state = slot.free if cpu_free else slot.taken
                        if state is None:
                            state = machine_state(slot.machine, 0, cpu_free, True)
                            flipped = msgspec.structs.replace(state, cpu_free=not cpu_free)
                            if cpu_free:
                                slot.free, slot.taken = state, flipped
                            else:
                                slot.free, slot.taken = flipped, state
                        elif state is old:
                            continue  # a hold and its release put a host back as it was
                    if old is None or old.healthy != ok:
                        structural = True
                    elif old.cpu_free == cpu_free:
                        continue  # as it was (a state equal to the shared one, not it)
                    elif ok:
                        cpu_units[host] = int(cpu_free)
                        racks[host] = slot.rack
                    if not ok:
                        state = machine_state(slot.machine, 0, cpu_free, False)
                    replaced[host] = old
                    slot.state = state
                    changed.append(state)
                    at.append(slot.position)
                    continue
                gpus_free = gpus - slot.used
                if gpus_free < 0:
                    gpus_free = 0
                if old is None or old.healthy != ok:
                    structural = True
                elif old.gpus_free == gpus_free:
                    continue
                elif ok and slot.machine.gpu_type is not None:
                    units = gpu_units.get(slot.machine.gpu_type)
                    if units is None:
                        units = gpu_units[slot.machine.gpu_type] = {}
                    units[host] = gpus_free
                    racks[host] = slot.rack
                replaced[host] = old
                slot.state = state = machine_state(slot.machine, gpus_free, False, ok)
                changed.append(state)
                at.append(slot.position)
            running = self._running
            gone: list[RunningJob] = []
            added: list[RunningJob] = []
            jobs_replaced: dict[tuple[str, str], RunningJob | None] = {}
            for key in self._dirty_jobs:
                held = self.jobs.get(key)
                old = running.get(key)
                new = None
                if held is not None and key not in self._claimed:
                    new = RunningJob(
                        workload_id=key[0],
                        job=key[1],
                        priority=held.priority,
                        started_at_us=held.started_us,
                        gpus=tuple(sorted(held.gpus.items())),
                        cpu_hosts=tuple(sorted(held.cpu_hosts)),
                    )
                if new == old:
                    continue
                jobs_replaced[key] = old
                if old is not None:
                    gone.append(old)
                    del running[key]
                if new is not None:
                    added.append(new)
                    running[key] = new
            self._dirty_jobs.clear()
            last = self._last
            if last is not None and not changed and not gone and not added:
                self._snapshot = last
                return last
            before = self._before
            last_keys = self._run_keys
            if before is not None and self._reverted(before, replaced, jobs_replaced):
                self._before = (last, replaced, jobs_replaced, last_keys)
                self._snapshot = self._last = before[0]
                return before[0]
            if last is None:
                machines = MachineRow.of(slots[host].state for host in self._hosts)  # type: ignore[misc]
                self._run_keys = sorted(running)
                jobs = tuple(map(running.__getitem__, self._run_keys))
            else:
                # Patch the last snapshot's machines and jobs in place of rebuilding
                # them: a cluster has thousands of machines, a change touches a few,
                # and a `MachineRow` copies only the chunks holding those (a tuple
                # copy of every machine was 2.5% of a day).
                machines, jobs = self._patched(last, changed, at, gone, added)
            snapshot = ClusterSnapshot(cluster_id=self.cluster, machines=machines, running=jobs)
            if last is not None and has_index(last):
                index = (
                    index_of(last).updated(changed, gone, added)
                    if structural
                    else index_of(last).with_free(gpu_units, cpu_units, gone, added, racks)
                )
                if index is not None:
                    attach_index(snapshot, index)
            self._before = None if last is None else (last, replaced, jobs_replaced, last_keys)
            self._snapshot = self._last = snapshot
        return self._snapshot

    def _reverted(
        self,
        before: _Before,
        replaced: dict[str, MachineState | None],
        jobs_replaced: dict[tuple[str, str], RunningJob | None],
    ) -> bool:
        """Whether the state is back at the snapshot before the last; if so, go back to it.

        A bid's hold lasts until the next bid has read it, then its release
        puts its machines back: the snapshot before is then the one wanted,
        index and all, and rebuilding it would cost as much as the hold did.
        """
        _, hosts, jobs, keys = before
        slots, running = self._slots, self._running
        # The slots and `running` hold the new state: the changes since the last
        # snapshot must be exactly the ones it made, undone.
        if hosts.keys() != replaced.keys() or jobs.keys() != jobs_replaced.keys():
            return False
        if any(slots[h].state != state for h, state in hosts.items()):
            return False
        if any(running.get(k) != job for k, job in jobs.items()):
            return False
        for host, state in hosts.items():
            assert state is not None
            self._restore(host, state)
        for key, job in jobs.items():
            assert job is not None or key not in running
            if job is not None:
                running[key] = job
        self._run_keys = keys
        return True

    def _restore(self, host: str, state: MachineState) -> None:
        """Put `host` back at `state`, as the snapshot before the last had it."""
        slot = self._slots[host]
        slot.state = state
