"""The `cluster` system: one GPU cluster scheduled by a cluster policy, in the full actor machinery.

A scenario selects it with `[system] kind = "cluster"`. The world is one
region with one cluster of `machines` × `gpus_per_machine` GPUs, racks of
`machines_per_rack` machines. Its jobs come from a generator (Philly-,
Gavel- or Dally-like, `actors/cluster/workloads.py`) or from a trace file
in the Tiresias or Shockwave format (`actors/cluster/traces.py`); each job
becomes a one-job workload in the job queue. The actors:

- the client, submitting jobs on time (and nudging the scheduler);
- the cluster scheduler (`actors/cluster/scheduler.py`) in the RMS role,
  running the named policy with the scenario's semantic switches;
- the cluster manager(s) of MAST (`actors/common/cm/manager.py`), which preempt with a
  checkpoint, start jobs whose agents train at the performance model's pace,
  and report a job on a failed machine to the scheduler;
- one agent per job (`actors/cluster/job_agent.py`) that answers offers.

Everything is a pure function of the params and the run seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from actors.cluster.batch_sizes import apply_batch_sizes
from actors.cluster.engine import Semantics, simulate
from actors.cluster.job_agent import JobAgentParams, OfferAgent
from actors.cluster.params import SchedulerParams, agent_address, job_spec
from actors.cluster.report import reference_outcome
from actors.cluster.scheduler import ClusterScheduler
from actors.cluster.throughputs import load_throughputs
from actors.cluster.traces import CsvColumns, TraceReport, load_trace
from actors.cluster.workloads import (
    DallyParams,
    GavelParams,
    PhillyParams,
    dally_jobs,
    gavel_jobs,
    philly_jobs,
)
from actors.common.client import Client, ClientParams
from actors.common.cm.manager import ClusterManager, CMParams
from actors.common.leadership import LeaseTiming
from actors.policies.cluster.api import Slot, TraceJob
from actors.policies.cluster.registry import cluster_policy
from actors.policies.mast.registry import every_policy
from actors.policies.registry import convert_params
from emulator.actor import Actor
from emulator.errors import InputError
from emulator.net.specs import RegionSpec
from emulator.registry import ReferenceRun, SystemBuild, actor_entry
from emulator.rng import RngStreams
from emulator.units import Duration
from store.mast import fleet, queue
from store.mast.records import DynamicCluster, Machine, Tenant, WorkloadSpec

TENANT = "users"


class TraceFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A trace file, relative to the scenario file: a peer simulator's, or a jobs CSV.

    `format = "jobs-csv"` needs `columns`, which header column holds what
    (`actors/cluster/traces/jobs_csv.py`); `keep_states` keeps only the jobs
    whose state column says one of these (empty: every state), and
    `delimiter` is the CSV's field separator.
    """

    file: str
    format: Literal["tiresias", "shockwave", "jobs-csv"]
    # A bad row stops the run (exit 2, naming file, line and column) unless
    # skipped; skipped rows are listed in the report's `trace` section.
    skip_bad_rows: bool = False
    columns: CsvColumns | None = None
    keep_states: tuple[str, ...] = ()
    delimiter: str = ","

    def __post_init__(self) -> None:
        if (self.format == "jobs-csv") != (self.columns is not None):
            raise ValueError("trace: `columns` is required for format jobs-csv, and only for it")
        if len(self.delimiter) != 1:
            raise ValueError(f"trace.delimiter must be one character, got {self.delimiter!r}")


class ClusterWorkload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where the jobs come from: a `trace` file, else the named `generator`."""

    generator: Literal["philly", "gavel", "dally"] = "philly"
    philly: PhillyParams = PhillyParams()
    gavel: GavelParams = GavelParams()
    dally: DallyParams = DallyParams()
    trace: TraceFile | None = None
    # Iterations per second per model and batch size (actors/cluster/throughputs.py),
    # relative to the scenario file; used with semantics.batch_size = "trace".
    throughputs: str | None = None
    throughputs_worker: str = "v100"  # the worker type read from a Gavel-layout table


class ClusterParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[system]` of a cluster-policy scenario (besides `kind = "cluster"`)."""

    policy: str = "fifo"
    # Per policy name, that policy's parameters (the papers' defaults otherwise),
    # so that `mastemu compare` can run every policy of one file with its own.
    policy_params: dict[str, dict[str, Any]] = {}
    semantics: Semantics = Semantics()
    region: str = "dc"
    machines: Annotated[int, Meta(ge=1, le=100_000)] = 15
    gpus_per_machine: Annotated[int, Meta(ge=1, le=64)] = 4
    machines_per_rack: Annotated[int, Meta(ge=1, le=10_000)] = 4
    gpu_type: str = "gpu"
    workload: ClusterWorkload = ClusterWorkload()
    # Periodic checkpoints (0: only when preempted, as the papers' simulators do);
    # they bound what a machine failure loses.
    checkpoint_every: Duration = 0
    cm_replicas: Annotated[int, Meta(ge=1, le=3)] = 1
    offer_timeout: Duration = 5_000_000
    lease: LeaseTiming = LeaseTiming()

    @property
    def gpus(self) -> int:
        return self.machines * self.gpus_per_machine


def policy_params(params: ClusterParams) -> Any:
    """The policy's validated parameters; InputError names the key path below `system`."""
    try:
        policy = cluster_policy(params.policy)
    except KeyError:
        families = every_policy()
        raise InputError(
            "",
            "policy",
            f"unknown cluster policy {params.policy!r}; cluster policies: "
            f'{", ".join(families["cluster"])} (MAST policies, for [system] kind = "mast": '
            f"{', '.join(families['mast'])})",
        ) from None
    where = f"policy_params.{params.policy}"
    try:
        return convert_params(policy.Params, params.policy_params.get(params.policy, {}))
    except InputError as error:
        raise error.within(prefix=where) from None


def trace_jobs(params: ClusterParams, seed: int, base_dir: Path) -> tuple[TraceJob, ...]:
    """The run's jobs: the trace file's, or the generator's from the `workload` stream."""
    return load_jobs(params, seed, base_dir)[0]


def load_jobs(
    params: ClusterParams, seed: int, base_dir: Path
) -> tuple[tuple[TraceJob, ...], TraceReport | None]:
    """The run's jobs, and the consistency report when they come from a trace file."""
    w = params.workload
    table = None
    if w.throughputs is not None:
        try:
            table = load_throughputs(base_dir / w.throughputs, w.throughputs_worker)
        except InputError as error:
            raise InputError("", "workload.throughputs", str(error)) from None
    report: TraceReport | None = None
    if w.trace is not None:
        try:
            jobs, report = load_trace(
                base_dir / w.trace.file,
                w.trace.format,
                total_gpus=params.gpus,
                gpu_types=(params.gpu_type,),
                strict=not w.trace.skip_bad_rows,
                columns=w.trace.columns,
                keep_states=w.trace.keep_states,
                delimiter=w.trace.delimiter,
            )
        except InputError as error:
            raise InputError("", "workload.trace", str(error)) from None
    else:
        rng: random.Random = RngStreams(seed).stream("workload")
        if w.generator == "philly":
            jobs = philly_jobs(w.philly, rng)
        elif w.generator == "gavel":
            jobs = gavel_jobs(w.gavel, rng)
        else:
            jobs = dally_jobs(w.dally, rng)
    jobs, notes = apply_batch_sizes(jobs, str(params.semantics.batch_size), table)
    if report is not None:
        report = msgspec.structs.replace(report, not_honoured=report.not_honoured + notes)
    return jobs, report


def cluster_shape(params: ClusterParams) -> tuple[int, int, int]:
    """(machines, GPUs per machine, machines per rack) of the cluster as the run builds it.

    With `semantics.one_gpu_servers` (Gavel's cluster spec) every GPU is a
    server of its own and a rack keeps as many GPUs as it had. The engine
    is built with the same shape (`engine.cluster_of(*cluster_shape(p))`).
    """
    if params.semantics.one_gpu_servers:
        g = params.gpus_per_machine
        return params.machines * g, 1, params.machines_per_rack * g
    return params.machines, params.gpus_per_machine, params.machines_per_rack


class ClusterSystem:
    """A single-cluster run of a cluster policy; tests register variants with broken actors."""

    Params: ClassVar[type[msgspec.Struct]] = ClusterParams

    def __init__(
        self,
        kind: str = "cluster",
        *,
        scheduler: type[Actor] = ClusterScheduler,
        cm: type[Actor] = ClusterManager,
    ) -> None:
        self.kind = kind
        self.classes = {"scheduler": scheduler, "cm": cm}

    @staticmethod
    def policies() -> list[str]:
        """The policies a scenario of this system may name (`mastemu policies`)."""
        return every_policy()["cluster"]

    def regions(self, params: ClusterParams) -> list[RegionSpec]:
        machines, _, per_rack = cluster_shape(params)
        return [
            RegionSpec(
                name=params.region,
                datacenters=1,
                fault_domains=1,
                racks=math.ceil(machines / per_rack),
                machines=per_rack,
                control_hosts=3,
            )
        ]

    def addresses(self, params: ClusterParams) -> list[str]:
        cluster = _cluster_id(params)
        return ["client", f"rms/{params.region}/0"] + [
            f"cm/{cluster}/{i}" for i in range(params.cm_replicas)
        ]

    def reference(
        self, params: ClusterParams, seed: int, end_us: int, base_dir: Path
    ) -> ReferenceRun:
        """The reference engine on the run's jobs and machines (`run --engine reference`)."""
        jobs, _ = load_jobs(params, seed, base_dir)
        policy = cluster_policy(params.policy)
        result = simulate(
            policy,
            policy_params(params),
            jobs,
            engine_slots(params),
            params.semantics,
            until_us=end_us,
        )
        return reference_outcome(result)

    def check(self, params: ClusterParams, base_dir: Path) -> None:
        policy_params(params)
        if params.workload.trace is not None:
            trace_jobs(params, 0, base_dir)

    def build(
        self, params: ClusterParams, seed: int, duration_us: int, base_dir: Path = Path()
    ) -> SystemBuild:
        del duration_us
        jobs, trace_report = load_jobs(params, seed, base_dir)
        validated = policy_params(params)
        region, cluster = params.region, _cluster_id(params)
        machine_list = _machines(params)
        shape = cluster_shape(params)
        scheduler_role = f"rms/{region}"
        workloads = tuple(_workload(t, params) for t in jobs)
        actors = [
            actor_entry(
                "client",
                f"{region}/ctl1",
                Client,
                ClientParams(workloads=workloads, notify=scheduler_role),
            ),
            actor_entry(
                f"rms/{region}/0",
                f"{region}/ctl0",
                self.classes["scheduler"],
                SchedulerParams(
                    region=region,
                    cluster=cluster,
                    policy=params.policy,
                    policy_params=validated,
                    semantics=params.semantics,
                    jobs=jobs,
                    gpu_type=params.gpu_type,
                    checkpoint_every=params.checkpoint_every,
                    offer_timeout=params.offer_timeout,
                    lease=params.lease,
                ),
            ),
        ]
        cms = [f"cm/{cluster}/{i}" for i in range(params.cm_replicas)]
        for i, address in enumerate(cms):
            actors.append(
                actor_entry(
                    address,
                    f"{region}/ctl{i % 3}",
                    self.classes["cm"],
                    CMParams(
                        cluster=cluster, region=region, lease=params.lease, on_host_failure="report"
                    ),
                )
            )
        for t in jobs:
            actors.append(
                actor_entry(
                    agent_address(t.job_id),
                    f"{region}/ctl2",
                    OfferAgent,
                    JobAgentParams(
                        job_id=t.job_id,
                        policy=params.policy,
                        policy_params=validated,
                        scheduler=scheduler_role,
                    ),
                )
            )
        tenants = [Tenant(name=TENANT, priority=0, gpu_quota=params.gpus, cpu_quota=0)]
        clusters = [
            DynamicCluster(id=cluster, region=region, ml=True, intended_machines=len(machine_list))
        ]

        async def setup(store: Any, record: Callable[[str, Any], None]) -> None:
            await queue.put_tenants(store, tenants)
            await fleet.put_clusters(store, clusters)
            await fleet.put_machines(store, machine_list)
            record("tenants", {t.name: [t.priority, t.gpu_quota, t.cpu_quota] for t in tenants})
            record("machines", {m.host: [m.region, m.gpu_type, m.gpus] for m in machine_list})
            record("catalog", {})
            record(
                "cluster",
                {
                    "policy": params.policy,
                    "semantics": msgspec.to_builtins(params.semantics),
                    "gpus": params.gpus,
                    # As built (semantics.one_gpu_servers splits machines): `cluster_shape`.
                    "machines": shape[0],
                    "gpus_per_machine": shape[1],
                    "machines_per_rack": shape[2],
                    "jobs": msgspec.to_builtins(jobs),
                    "trace": msgspec.to_builtins(trace_report),
                },
            )

        return SystemBuild(
            actors=actors,
            roles=[scheduler_role, f"cm/{cluster}"],
            setup=setup,
            hardware_watchers=tuple(cms),
            summary={"jobs": len(jobs), "gpus": params.gpus, "policy": params.policy},
            message_latency_us=0 if params.semantics.control_latency == "zero" else None,
            ends_when_done=True,
            workers=(OfferAgent.kind,),
        )


def _cluster_id(params: ClusterParams) -> str:
    return f"{params.region}/c0"


def _machines(params: ClusterParams) -> list[Machine]:
    """Hosts in topology order: rack k holds machines k·per … k·per + per − 1."""
    out = []
    machines, gpus_per_machine, per = cluster_shape(params)
    region = params.region
    for i in range(machines):
        rack = f"{region}/dc0/fd0/r{i // per}"
        out.append(
            Machine(
                host=f"{rack}/m{i % per}",
                region=region,
                rack=rack,
                fault_domain=f"{region}/dc0/fd0",
                gpu_type=params.gpu_type,
                gpus=gpus_per_machine,
                cluster=_cluster_id(params),
            )
        )
    return out


def engine_slots(params: ClusterParams) -> tuple[Slot, ...]:
    """The run's machines, idle, as the reference engine takes them: same hosts, same racks."""
    return tuple(
        Slot(host=m.host, rack=m.rack, gpus_total=m.gpus, gpus_free=m.gpus, gpu_type=m.gpu_type)
        for m in _machines(params)
    )


def _workload(t: TraceJob, params: ClusterParams) -> WorkloadSpec:
    return WorkloadSpec(
        id=t.job_id,
        tenant=TENANT,
        submit_at_us=t.submit_us,
        jobs=(job_spec(t, params.gpu_type, int(params.checkpoint_every)),),
    )
