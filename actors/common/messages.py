"""The protocol both systems share: a client's submissions, and a scheduler's plans
to a cluster manager, which runs each job through its agent.

Every message a leader sends carries its epoch, so a receiver can ignore a
deposed leader. The part of one dispatch that crosses this protocol (MAST's
auctions before it are in `actors/mast/messages.py`):

1. The client enters a workload in the job-queue database and nudges the
   scheduler's role (`Submitted`).
2. The scheduler (MAST's winning RMS, or the cluster scheduler) sends one
   `ExecutePlan` per job to the job's cluster manager; each CM preempts
   victims (`StopJob`, checkpoint first), allocates, starts the job's agent
   (`AgentStart`) and answers `PlanResult`. All jobs start or none does (gang).
3. The CM reports `JobEnded` when a job finishes, fails or is preempted.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from actors.policies.cluster.api import Schedule
from store.mast.records import JobSpec

EndReason = Literal["done", "preempted", "failed", "aborted"]


class Msg(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """Base of protocol messages (tagged by class name)."""


# ---- client → GMS ------------------------------------------------------------
class Submitted(Msg):
    """Client → GMS: a workload was entered in the queue; consider it at the next pass."""

    workload_id: str


# ---- RMS ↔ CM -------------------------------------------------------------------
class Pace(msgspec.Struct, frozen=True, kw_only=True):
    """How a cluster-policy job runs where it is placed (the performance model).

    `slowdown` is the placement tier's communication cost for the model and
    `mode` its batch-size schedule (`actors/policies/cluster/job_pace.py`): a
    mode's name, or the job's own regimes (`TraceJob.schedule`);
    `restore_us` is spent before a resumed job makes progress (none on a
    first start) and `checkpoint_us` on the checkpoint a preemption saves.
    `overhead_us` is spent before any run makes progress, a first one too
    (`Semantics.restart_overhead_s`, Gavel's flat restart cost).
    MAST jobs have no pace: they run at full speed and set up containers.
    """

    slowdown: float = 1.0
    mode: Schedule = "static"
    restore_us: int = 0
    checkpoint_us: int = 0
    overhead_us: int = 0


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
    a later dispatch), and its successor stops what still has to stop. It also
    ignores an order for another dispatch (`auction_id`) than the one its job
    runs or waits under: an order resent across failovers may arrive once the
    job was dispatched again.
    """

    workload_id: str
    job: str
    reason: EndReason
    checkpoint: bool
    rms_epoch: int
    auction_id: int = 0  # the dispatch whose attempt to stop (0: whichever runs)


class JobEnded(Msg):
    """CM → RMS: a job is no longer running here, and why.

    `auction_id` names the dispatch the ended attempt served (0 when its CM
    no longer knows: a job it rebuilt after that dispatch was given up). A
    report resent across failovers can arrive after the workload was
    dispatched again; its auction tells the RMS it is not the new attempt's.
    """

    workload_id: str
    job: str
    cluster: str
    reason: EndReason
    auction_id: int


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


class AgentLost(Msg):
    """Agent → CM: the attempt's agent crashed and came back without its state.

    The attempt is over: what its last checkpoint saved is what remains (the
    CM restarts the job from there, or ends the stop it had ordered).
    """

    workload_id: str
    job: str
    attempt: int


class AgentFinished(Msg):
    """Agent → CM: the job did all its work."""

    workload_id: str
    job: str
    attempt: int


def agent_address(workload_id: str, job: str, attempt: int) -> str:
    """The address of the agent of one attempt of a job (started by its CM)."""
    return f"agent/{workload_id}/{job}/{attempt}"
