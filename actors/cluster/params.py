"""The cluster scheduler's parameters, and how it names what it dispatches.

A trace job becomes a workload of one job (`JOB`), whose agent answers the
scheduler's offers at `agent_address`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors.cluster.engine import Semantics
from actors.common.leadership import LeaseTiming
from actors.policies.cluster.api import TraceJob
from emulator.units import Duration
from store.mast.records import JobSpec

JOB = "train"  # the one job of each workload a trace job becomes


class SchedulerParams(msgspec.Struct, frozen=True, kw_only=True):
    """One cluster's scheduler: its policy (validated params), conventions and trace jobs."""

    region: str
    cluster: str
    policy: str
    policy_params: Any
    semantics: Semantics
    jobs: tuple[TraceJob, ...]
    gpu_type: str
    checkpoint_every: Duration = Duration(0)
    offer_timeout: Duration = Duration(5_000_000)
    dispatch_timeout: Duration = Duration(900_000_000)
    # A refused plan means the scheduler's accounts and its CM disagree until some
    # report arrives; deciding again at once would re-send the same plan in a
    # loop of network round trips (explore: dally-cm-failover, 900k a minute).
    refused_retry: Duration = Duration(5_000_000)
    lease: LeaseTiming = LeaseTiming()


def agent_address(job_id: str) -> str:
    return f"job/{job_id}"


def job_spec(t: TraceJob, gpu_type: str, checkpoint_every_us: int) -> JobSpec:
    """The one job of the workload a trace job becomes; its work is the trace duration."""
    return JobSpec(
        name=JOB,
        gpu_type=gpu_type,
        gpus=t.gpus,
        work_us=t.duration_us,
        checkpoint_every_us=checkpoint_every_us,
    )
