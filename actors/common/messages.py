"""The MAST fast-path protocol: client → GMS → RMS auctions → CM → job agent.

Every message a leader sends carries its epoch, so a receiver can ignore a
deposed leader. The flow of one dispatch:

1. The client enters a workload in the job-queue database and nudges the GMS.
2. Each GMS-scan pass ranks the queue (⟨priority, credit⟩), announces
   `ScanStart`, then opens one auction per workload in rank order.
3. Every RMS answers `Bid` (a P_score) or `Abstain` (with a reason).
4. The GMS commits the award (compare-and-set on the workload row) and then
   sends `Award` to the winner and `Release` to the others.
5. The winner sends one `ExecutePlan` per job to the job's cluster manager;
   each CM preempts victims (checkpoint first), allocates, starts the job's
   agent and answers `PlanResult`. All jobs start or none does (gang).
6. The RMS reports `Dispatched` to the GMS; later `WorkloadEnded` (done,
   preempted, failed) sends the workload out of the queue or back into it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from actors.policies.cluster.api import BatchMode
from store.mast.records import JobSpec

AbstainReason = Literal["no_data", "no_hardware", "negative_cache", "unschedulable", "busy"]
EndReason = Literal["done", "preempted", "failed", "aborted"]


class Msg(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """Base of protocol messages (tagged by class name)."""


# ---- client → GMS ------------------------------------------------------------
class Submitted(Msg):
    """Client → GMS: a workload was entered in the queue; consider it at the next pass."""

    workload_id: str


# ---- GMS → RMS ----------------------------------------------------------------
class ScanStart(Msg):
    """GMS → every RMS: a GMS-scan pass begins; reset the negative cache."""

    scan: int
    gms_epoch: int


class ScanEnd(Msg):
    """GMS → every RMS: the pass's dispatching is over."""

    scan: int
    gms_epoch: int


class AuctionOpen(Msg):
    """GMS → every RMS: bid for this workload before `deadline_us` or abstain."""

    auction_id: int
    gms_epoch: int
    workload_id: str
    priority: int
    jobs: tuple[JobSpec, ...]
    deadline_us: int


class Award(Msg):
    """GMS → winning RMS: the workload is yours (already committed in the queue)."""

    auction_id: int
    gms_epoch: int
    workload_id: str


class Release(Msg):
    """GMS → losing RMSs: forget any tentative plan for this auction."""

    auction_id: int
    gms_epoch: int


# ---- RMS → GMS ----------------------------------------------------------------
class Bid(Msg):
    """RMS → GMS: a placement plan exists here with this P_score."""

    auction_id: int
    region: str
    score: float
    preempts: bool
    victims: int


class Abstain(Msg):
    """RMS → GMS: this region will not bid, and why."""

    auction_id: int
    region: str
    reason: AbstainReason


class Dispatched(Msg):
    """RMS → GMS: every job of the workload started (ok) or none did."""

    auction_id: int
    workload_id: str
    region: str
    ok: bool
    reason: str = ""


class WorkloadEnded(Msg):
    """RMS → GMS: a running workload finished, was preempted, or failed."""

    workload_id: str
    auction_id: int
    region: str
    reason: EndReason


# ---- RMS ↔ CM -------------------------------------------------------------------
class Pace(msgspec.Struct, frozen=True, kw_only=True):
    """How a cluster-policy job runs where it is placed (the performance model).

    `slowdown` is the placement tier's communication cost for the model and
    `mode` its batch-size schedule (`actors/policies/cluster/job_pace.py`);
    `restore_us` is spent before a resumed job makes progress (none on a
    first start) and `checkpoint_us` on the checkpoint a preemption saves.
    MAST jobs have no pace: they run at full speed and set up containers.
    """

    slowdown: float = 1.0
    mode: BatchMode = "static"
    restore_us: int = 0
    checkpoint_us: int = 0


class ExecutePlan(Msg):
    """RMS → CM: preempt `victims` (workload, job), then start this job on these machines."""

    auction_id: int
    rms_epoch: int
    workload_id: str
    job: JobSpec
    priority: int
    gpus: tuple[tuple[str, int], ...]
    cpu_hosts: tuple[str, ...]
    victims: tuple[tuple[str, str], ...]
    pace: Pace | None = None


class PlanResult(Msg):
    """CM → RMS: the job's containers are being set up (ok) or the plan was refused."""

    auction_id: int
    workload_id: str
    job: str
    cluster: str
    ok: bool
    reason: str = ""


class StopJob(Msg):
    """RMS → CM: stop a job (gang rollback, or its workload was preempted elsewhere).

    The CM ignores an order whose `rms_epoch` is older than the RMS role's
    current lease: a deposed RMS's memory is stale (the job may run again for
    a later dispatch), and its successor stops what still has to stop.
    """

    workload_id: str
    job: str
    reason: EndReason
    checkpoint: bool
    rms_epoch: int


class JobEnded(Msg):
    """CM → RMS: a job is no longer running here, and why."""

    workload_id: str
    job: str
    cluster: str
    reason: EndReason


# ---- CM ↔ job agent ----------------------------------------------------------------
class AgentStart(Msg):
    """CM → agent (its first message): run `job` from `progress_us` after `setup_us`."""

    workload_id: str
    job: str
    attempt: int
    work_us: int
    progress_us: int
    setup_us: int
    checkpoint_every_us: int
    checkpoint_cost_us: int
    cm: str
    pace: Pace | None = None


class AgentStop(Msg):
    """CM → agent: stop now; save a checkpoint first when `checkpoint` is set."""

    checkpoint: bool


class AgentProbe(Msg):
    """CM → agent: does this attempt still run? Sent by a CM that begins to lead.

    Agents die with their first machine, and all at once with the emulator
    process (`mastemu resume`); a CM that was down or following then heard
    nothing of it. A live agent answers `AgentAlive` at once, whatever it is
    doing; one that does not answer any of the CM's probes is taken for dead.
    """

    workload_id: str
    job: str
    attempt: int


class AgentAlive(Msg):
    """Agent → the probing CM instance: the answer to `AgentProbe`."""

    workload_id: str
    job: str
    attempt: int


class AgentRunning(Msg):
    """Agent → CM: containers are up and the job is training."""

    workload_id: str
    job: str
    attempt: int


class AgentStopped(Msg):
    """Agent → CM: the job stopped; `progress_us` is what its last checkpoint saved."""

    workload_id: str
    job: str
    attempt: int
    progress_us: int


class AgentFinished(Msg):
    """Agent → CM: the job did all its work."""

    workload_id: str
    job: str
    attempt: int
