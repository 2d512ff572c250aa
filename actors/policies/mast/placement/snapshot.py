"""What the fast-path policies see and what they decide.

The RMS builds a `ClusterSnapshot` per ML dynamic cluster from its cache
(membership from the CMs, running jobs from the store) and a `JobRequest` per
job of the workload at the head of the queue; `actors.policies.mast.placement.place`
turns them into a `JobPlan`/`WorkloadPlan` or an `Unschedulable`. Every
Struct here is frozen, so a snapshot can be shared between calls and a
decision replays exactly from the snapshot it was made on.

Conventions: priorities are ints, 0 the highest and `PRIORITY_LOWEST` the
lowest; time is integer microseconds of emulated time; a GPU machine has
`GPUS_PER_MACHINE` GPUs of one type, a CPU machine has none and is handed
out whole.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from actors.policies.mast.placement.pscore import PScore
from store.mast.records import PRIORITY_LOWEST

__all__ = [
    "ClusterSnapshot",
    "JobPlan",
    "JobRequest",
    "MachineState",
    "PScore",
    "RunningJob",
    "Unschedulable",
    "WorkloadPlan",
]


class _Snap(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the snapshot and decision Structs.

    Subclasses repeat `kw_only=True`: msgspec does not inherit it (it applies
    to the fields a class itself defines).
    """


def _check_priority(where: str, priority: int) -> None:
    if not 0 <= priority <= PRIORITY_LOWEST:
        raise ValueError(f"{where}.priority must be in 0..{PRIORITY_LOWEST}, got {priority}")


class MachineState(_Snap, kw_only=True):
    """One machine of a dynamic cluster as the RMS last saw it.

    A GPU machine has `gpus_total` GPUs of `gpu_type` (normally
    `GPUS_PER_MACHINE`) of which `gpus_free` are not allocated; a CPU machine
    has `gpus_total == 0` and is free or taken as a whole (`cpu_free`). An
    unhealthy machine is never handed out, neither free nor freed by
    preemption.
    """

    host: str
    rack: str
    gpu_type: str | None
    gpus_total: int
    gpus_free: int
    cpu_free: bool
    healthy: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.gpus_free <= self.gpus_total:
            raise ValueError(
                f"machine {self.host}: gpus_free must be in 0..{self.gpus_total}, "
                f"got {self.gpus_free}"
            )

    @property
    def is_gpu(self) -> bool:
        return self.gpus_total > 0


class RunningJob(_Snap, kw_only=True):
    """A job holding resources in the cluster: (host, GPUs) pairs and whole CPU machines."""

    workload_id: str
    job: str
    priority: int
    started_at_us: int
    gpus: tuple[tuple[str, int], ...] = ()
    cpu_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_priority(f"running[{self.workload_id}/{self.job}]", self.priority)

    @property
    def key(self) -> tuple[str, str]:
        """(workload_id, job): how plans name a victim."""
        return (self.workload_id, self.job)

    @property
    def gpu_count(self) -> int:
        return sum(n for _, n in self.gpus)


class ClusterSnapshot(_Snap, kw_only=True, dict=True):
    """One ML dynamic cluster: its machines and the jobs running on them.

    Its placement index (`actors.policies.mast.placement.capacity.index_of`)
    is built on first use and then kept with the snapshot, outside its fields
    (hence `dict=True`): a snapshot is frozen, so its index never goes stale.
    """

    cluster_id: str
    # A tuple, or the structure-sharing `MachineRow` a ledger keeps (equal to the
    # tuple of its states): read it as a sequence.
    machines: Sequence[MachineState]
    running: tuple[RunningJob, ...] = ()


class JobRequest(_Snap, kw_only=True):
    """One job of a workload to place: GPUs of one type and/or whole CPU machines.

    `priority` is the workload's effective priority from the GMS scan (the
    tenant's level within quota, `PRIORITY_LOWEST` over quota); it bounds
    whom the job may preempt.
    """

    workload_id: str
    job: str
    gpu_type: str | None
    gpus: int
    cpu_machines: int
    priority: int

    def __post_init__(self) -> None:
        where = f"request[{self.workload_id}/{self.job}]"
        if self.gpus < 0 or self.cpu_machines < 0:
            raise ValueError(f"{where}: gpus and cpu_machines must be >= 0")
        if self.gpus > 0 and self.gpu_type is None:
            raise ValueError(f"{where}: a GPU request needs a gpu_type")
        _check_priority(where, self.priority)


class JobPlan(_Snap, kw_only=True):
    """Where one job goes in one cluster, and whom it displaces there."""

    cluster_id: str
    job: str
    gpus: tuple[tuple[str, int], ...] = ()
    cpu_hosts: tuple[str, ...] = ()
    victims: tuple[tuple[str, str], ...] = ()
    score: PScore = PScore()

    @property
    def gpu_count(self) -> int:
        return sum(n for _, n in self.gpus)

    def placed(self, req: JobRequest, now_us: int) -> RunningJob | None:
        """The job as it runs once this plan is carried out (None if it holds nothing)."""
        if not (self.gpus or self.cpu_hosts):
            return None
        return RunningJob(
            workload_id=req.workload_id,
            job=req.job,
            priority=req.priority,
            started_at_us=now_us,
            gpus=self.gpus,
            cpu_hosts=self.cpu_hosts,
        )


class WorkloadPlan(_Snap, kw_only=True):
    """A gang placement: one plan per job, all in one region; `score` is their summed value."""

    workload_id: str
    jobs: tuple[JobPlan, ...]
    score: float

    @property
    def victims(self) -> tuple[tuple[str, str], ...]:
        """Every (workload_id, job) preempted by any of the jobs, deduplicated and sorted."""
        return tuple(sorted({v for plan in self.jobs for v in plan.victims}))

    @property
    def preempts(self) -> bool:
        return any(plan.victims for plan in self.jobs)


class Unschedulable(_Snap, kw_only=True):
    """No plan now; says whether anything short of new hardware could change that.

    `preemption_could_help` is True when the hardware exists but is busy: more
    preemption (a higher effective priority once the tenant is back within
    quota, or preemption being allowed), jobs finishing, or the negative cache
    being reset at the next scan may make room, so the workload should wait.
    It is False when no amount of preemption can help because the clusters
    considered do not have that much healthy hardware of the type at all,
    i.e. what the design calls Unresolvable: only RAS adding machines,
    repairs, or another region can.
    """

    reason: str
    preemption_could_help: bool
