"""An actor's working view of one dynamic cluster, turned into policy snapshots.

The cluster manager keeps one for its own cluster (the truth while it lives);
an RMS keeps one per cluster of its region (a cache refreshed from the store
at every GMS-scan pass and updated by the plans it dispatches). Policies never
see this mutable view, only the frozen `ClusterSnapshot` it produces.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from actors.policies.snapshot import ClusterSnapshot, MachineState, RunningJob
from emulator.actor import Actor
from store import fleet
from store.fleet import Allocation, JobRow
from store.records import Machine

LIVE_STATES = ("STARTING", "RUNNING", "CHECKPOINTING")


@dataclass
class Held:
    """What one job holds in the cluster."""

    priority: int
    started_us: int
    gpus: dict[str, int] = field(default_factory=dict)
    cpu_hosts: list[str] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return sorted(set(self.gpus) | set(self.cpu_hosts))


class ClusterView:
    def __init__(self, cluster: str, machines: Iterable[tuple[Machine, bool]]) -> None:
        self.cluster = cluster
        self.machines: dict[str, Machine] = {}
        self.healthy: dict[str, bool] = {}
        for machine, healthy in machines:
            self.machines[machine.host] = machine
            self.healthy[machine.host] = healthy
        self.gpus_used: dict[str, int] = dict.fromkeys(self.machines, 0)
        self.cpu_busy: set[str] = set()
        self.jobs: dict[tuple[str, str], Held] = {}
        self._snapshot: ClusterSnapshot | None = None

    @classmethod
    def load(
        cls,
        cluster: str,
        machines: Iterable[tuple[Machine, bool]],
        allocations: Iterable[Allocation],
        jobs: Iterable[JobRow],
    ) -> ClusterView:
        view = cls(cluster, machines)
        rows = {(j.workload_id, j.job): j for j in jobs}
        by_job: dict[tuple[str, str], list[Allocation]] = {}
        for a in allocations:
            by_job.setdefault((a.workload_id, a.job), []).append(a)
        for key, allocs in sorted(by_job.items()):
            row = rows.get(key)
            priority = row.priority if row else 0
            started = row.started_us if row and row.started_us is not None else 0
            view.allocate(
                key,
                priority,
                started,
                [(a.host, a.gpus) for a in allocs if not a.cpu],
                [a.host for a in allocs if a.cpu],
            )
        return view

    @classmethod
    async def fetch(cls, actor: Actor, cluster: str) -> ClusterView:
        """Read a cluster's machines, allocations and live jobs through `actor`'s store calls."""
        return cls.load(
            cluster,
            await actor.store(fleet.machines, cluster),
            await actor.store(fleet.allocations, cluster),
            await actor.store(fleet.jobs, cluster, LIVE_STATES),
        )

    # ---- changes ---------------------------------------------------------------
    def allocate(
        self,
        key: tuple[str, str],
        priority: int,
        started_us: int,
        gpus: Iterable[tuple[str, int]],
        cpu_hosts: Iterable[str],
    ) -> None:
        held = self.jobs.setdefault(key, Held(priority, started_us))
        for host, n in gpus:
            held.gpus[host] = held.gpus.get(host, 0) + n
            self.gpus_used[host] = self.gpus_used.get(host, 0) + n
        for host in cpu_hosts:
            held.cpu_hosts.append(host)
            self.cpu_busy.add(host)
        self._snapshot = None

    def release(self, key: tuple[str, str]) -> Held | None:
        held = self.jobs.pop(key, None)
        if held is not None:
            for host, n in held.gpus.items():
                self.gpus_used[host] = max(0, self.gpus_used.get(host, 0) - n)
            for host in held.cpu_hosts:
                self.cpu_busy.discard(host)
            self._snapshot = None
        return held

    def set_health(self, hosts: Iterable[str], healthy: bool) -> None:
        for host in hosts:
            if host in self.healthy:
                self.healthy[host] = healthy
        self._snapshot = None

    # ---- queries ------------------------------------------------------------------
    def hosts_under(self, node: str) -> list[str]:
        prefix = node + "/"
        return sorted(h for h in self.machines if h == node or h.startswith(prefix))

    def jobs_on(self, hosts: Iterable[str]) -> list[tuple[str, str]]:
        wanted = set(hosts)
        return sorted(k for k, held in self.jobs.items() if wanted & set(held.hosts))

    def snapshot(self) -> ClusterSnapshot:
        """A frozen snapshot for the policies (cached until the next change)."""
        if self._snapshot is None:
            machines = tuple(
                MachineState(
                    host=host,
                    rack=m.rack,
                    gpu_type=m.gpu_type,
                    gpus_total=m.gpus,
                    gpus_free=max(0, m.gpus - self.gpus_used.get(host, 0)),
                    cpu_free=m.gpus == 0 and host not in self.cpu_busy,
                    healthy=self.healthy[host],
                )
                for host, m in sorted(self.machines.items())
            )
            running = tuple(
                RunningJob(
                    workload_id=w,
                    job=j,
                    priority=held.priority,
                    started_at_us=held.started_us,
                    gpus=tuple(sorted(held.gpus.items())),
                    cpu_hosts=tuple(sorted(held.cpu_hosts)),
                )
                for (w, j), held in sorted(self.jobs.items())
            )
            self._snapshot = ClusterSnapshot(
                cluster_id=self.cluster, machines=machines, running=running
            )
        return self._snapshot
