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

from actors.cluster.engine import Semantics
from actors.cluster.job_agent import JobAgentParams, OfferAgent
from actors.cluster.scheduler import ClusterScheduler, SchedulerParams, agent_address, job_spec
from actors.cluster.traces import TraceReport, load_trace
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
from actors.policies.cluster.api import TraceJob
from actors.policies.cluster.registry import cluster_policy
from actors.policies.mast.registry import every_policy
from actors.policies.registry import convert_params
from emulator.actor import Actor
from emulator.errors import InputError
from emulator.net.specs import RegionSpec
from emulator.registry import SystemBuild, actor_entry
from emulator.rng import RngStreams
from emulator.units import Duration
from store.mast import fleet, queue
from store.mast.records import DynamicCluster, Machine, Tenant, WorkloadSpec

TENANT = "users"


class TraceFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A peer simulator's trace, relative to the scenario file."""

    file: str
    format: Literal["tiresias", "shockwave"]
    # A bad row stops the run (exit 2, naming file, line and column) unless
    # skipped; skipped rows are listed in the report's `trace` section.
    skip_bad_rows: bool = False


class ClusterWorkload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where the jobs come from: a `trace` file, else the named `generator`."""

    generator: Literal["philly", "gavel", "dally"] = "philly"
    philly: PhillyParams = PhillyParams()
    gavel: GavelParams = GavelParams()
    dally: DallyParams = DallyParams()
    trace: TraceFile | None = None


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
    checkpoint_every: Duration = Duration(0)
    cm_replicas: Annotated[int, Meta(ge=1, le=3)] = 1
    offer_timeout: Duration = Duration(5_000_000)
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
    if w.trace is not None:
        try:
            return load_trace(
                base_dir / w.trace.file,
                w.trace.format,
                total_gpus=params.gpus,
                gpu_types=(params.gpu_type,),
                strict=not w.trace.skip_bad_rows,
            )
        except InputError as error:
            raise InputError("", "workload.trace", str(error)) from None
    rng: random.Random = RngStreams(seed).stream("workload")
    if w.generator == "philly":
        return philly_jobs(w.philly, rng), None
    if w.generator == "gavel":
        return gavel_jobs(w.gavel, rng), None
    return dally_jobs(w.dally, rng), None


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
        return [
            RegionSpec(
                name=params.region,
                datacenters=1,
                fault_domains=1,
                racks=math.ceil(params.machines / params.machines_per_rack),
                machines=params.machines_per_rack,
                control_hosts=3,
            )
        ]

    def addresses(self, params: ClusterParams) -> list[str]:
        cluster = _cluster_id(params)
        return ["client", f"rms/{params.region}/0"] + [
            f"cm/{cluster}/{i}" for i in range(params.cm_replicas)
        ]

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
            DynamicCluster(id=cluster, region=region, ml=True, intended_machines=params.machines)
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
                    "machines": params.machines,
                    "gpus_per_machine": params.gpus_per_machine,
                    "machines_per_rack": params.machines_per_rack,
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
        )


def _cluster_id(params: ClusterParams) -> str:
    return f"{params.region}/c0"


def _machines(params: ClusterParams) -> list[Machine]:
    """Hosts in topology order: rack k holds machines k·per … k·per + per − 1."""
    out = []
    per = params.machines_per_rack
    region = params.region
    for i in range(params.machines):
        rack = f"{region}/dc0/fd0/r{i // per}"
        out.append(
            Machine(
                host=f"{rack}/m{i % per}",
                region=region,
                rack=rack,
                fault_domain=f"{region}/dc0/fd0",
                gpu_type=params.gpu_type,
                gpus=params.gpus_per_machine,
                cluster=_cluster_id(params),
            )
        )
    return out


def _workload(t: TraceJob, params: ClusterParams) -> WorkloadSpec:
    return WorkloadSpec(
        id=t.job_id,
        tenant=TENANT,
        submit_at_us=t.submit_us,
        jobs=(job_spec(t, params.gpu_type, int(params.checkpoint_every)),),
    )
