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

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

PRIORITY_LEVELS = 7
PRIORITY_LOWEST = PRIORITY_LEVELS  # "unspecified", and every over-quota workload
GPUS_PER_MACHINE = 8
# Bounds on what a scenario may say of a record (`mastemu schema` shows them). Checked
# when a scenario is decoded; records the emulator builds itself are not re-checked.
QUOTA_MAX = 10**9
JOBS_PER_WORKLOAD_MAX = 1_000
GPUS_PER_JOB_MAX = 1_000_000
# A job that saves its progress more often than this floods the run with events.
CHECKPOINT_EVERY_US_MIN = 1_000_000


class Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the database records."""


class Tenant(Record, kw_only=True):
    """A team: a priority level and quotas of GPUs and CPU machines in use at once."""

    name: str
    priority: Annotated[int, Meta(ge=0, le=PRIORITY_LOWEST)]
    gpu_quota: Annotated[int, Meta(ge=0, le=QUOTA_MAX)]
    cpu_quota: Annotated[int, Meta(ge=0, le=QUOTA_MAX)]


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
    gpus: Annotated[int, Meta(ge=0, le=GPUS_PER_JOB_MAX)] = 0
    cpu_machines: Annotated[int, Meta(ge=0, le=GPUS_PER_JOB_MAX)] = 0
    # A scenario's jobs are held to more (work_us >= 0, checkpoint_every_us >=
    # CHECKPOINT_EVERY_US_MIN) when the run is planned: stored rows of other
    # systems (a trace job of no duration) must still decode.
    work_us: Annotated[int, Meta(description="µs of work; >= 0 in a scenario")]
    checkpoint_every_us: Annotated[
        int, Meta(description="µs between checkpoints; at least 1 s (1000000) in a scenario")
    ] = 1_800_000_000
    input_tables: tuple[str, ...] = ()


class WorkloadSpec(Record, kw_only=True):
    """A training workload as submitted: gang-scheduled jobs of one tenant."""

    id: str
    tenant: str
    submit_at_us: Annotated[int, Meta(ge=0)]
    recurring: bool = False
    jobs: Annotated[tuple[JobSpec, ...], Meta(min_length=1, max_length=JOBS_PER_WORKLOAD_MAX)]

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
    size_bytes: Annotated[int, Meta(ge=0)]
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
