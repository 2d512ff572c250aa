"""Records of MAST's shared replicated database: tenants, workloads, hardware, data.

These frozen Structs are what the store's repository functions take and
return (a workload's row in the queue, `QueueEntry`, included), what the
workload generator produces, and what actors turn into policy snapshots.
They live in `store` because the store owns the schema and must not import
the emulated system.

Conventions: time in integer microseconds of emulated time (`_us`), sizes in
bytes, priorities as integers where 0 is the highest and `PRIORITY_LOWEST`
the lowest (MAST's seven levels plus "unspecified").
"""

from __future__ import annotations

from typing import Literal

import msgspec

PRIORITY_LEVELS = 7
PRIORITY_LOWEST = PRIORITY_LEVELS  # "unspecified", and every over-quota workload
GPUS_PER_MACHINE = 8


class Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the database records."""


class Tenant(Record, kw_only=True):
    """A team: a priority level and quotas of GPUs and CPU machines in use at once."""

    name: str
    priority: int
    gpu_quota: int
    cpu_quota: int


JobRole = Literal["trainer", "preprocess", "parameter-server", "evaluator"]


class JobSpec(Record, kw_only=True):
    """One job of a workload: homogeneous tasks on GPUs of one type or on CPU machines.

    A GPU job asks for `gpus` GPUs of `gpu_type` (whole GPUs, packed onto
    8-GPU machines); a CPU job asks for `cpu_machines` whole machines. `work_us`
    is how long it runs without interruption; progress is saved every
    `checkpoint_every_us`.
    """

    name: str
    role: JobRole = "trainer"
    gpu_type: str | None = None
    gpus: int = 0
    cpu_machines: int = 0
    work_us: int
    checkpoint_every_us: int = 1_800_000_000
    input_tables: tuple[str, ...] = ()


class WorkloadSpec(Record, kw_only=True):
    """A training workload as submitted: gang-scheduled jobs of one tenant."""

    id: str
    tenant: str
    submit_at_us: int
    recurring: bool = False
    jobs: tuple[JobSpec, ...]

    @property
    def gpus(self) -> int:
        return sum(j.gpus for j in self.jobs)

    @property
    def cpu_machines(self) -> int:
        return sum(j.cpu_machines for j in self.jobs)

    @property
    def input_tables(self) -> tuple[str, ...]:
        return tuple(sorted({t for j in self.jobs for t in j.input_tables}))


class Machine(Record, kw_only=True):
    """A machine of the fleet: a topology host with hardware, in at most one dynamic cluster."""

    host: str
    region: str
    rack: str
    fault_domain: str
    gpu_type: str | None = None
    gpus: int = 0
    cpu_cores: int = 64
    memory_gb: int = 512
    cluster: str | None = None


class DynamicCluster(Record, kw_only=True):
    """A RAS reservation: an ML or non-ML dynamic cluster of one region, run by one CM."""

    id: str
    region: str
    ml: bool = True
    intended_machines: int = 0


class DataTable(Record, kw_only=True):
    """A warehouse table: where it lives and how big it is."""

    name: str
    size_bytes: int
    home_region: str
    replicas: tuple[str, ...] = ()


class QueueEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A workload's row in the queue."""

    id: str
    tenant: str
    state: str
    priority: int
    credit: float
    within_quota: bool
    region: str | None
    auction_id: int | None
    gms_epoch: int | None
    submitted_us: int
    queued_us: int
    attempts: int
    preemptions: int
    started_us: int | None
    finished_us: int | None
    version: int
