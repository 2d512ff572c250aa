"""What a cluster manager keeps in memory, and what its parts see of it.

`ClusterManager` (actors/common/cm/manager.py) is the actor: its handlers,
timers and running jobs. Two of its concerns are collaborators it holds,
plan execution (`Plans`, actors/common/cm/plans.py) and what a new leader
settles (`CMRecovery`, actors/common/cm/recovery.py). They see the manager
through `CMCore`, plus the few steps each protocol of theirs names, and
never import the manager's module: the dependencies run one way, from the
actor to its parts to this module.

Everything here is memory, lost with a crash; what must survive is in the
store, and a new leader rebuilds from it (`ClusterManager.on_lead`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, TypeVar

import msgspec

from actors.common.cm.ledger import ClusterLedger
from actors.common.leadership import LeaseTiming
from actors.common.messages import EndReason, Pace
from emulator.units import Duration
from store.mast.queue import Fence
from store.mast.records import JobSpec

T = TypeVar("T")


class CMParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One cluster manager's knobs: its cluster, costs and timeouts, probes, lease."""

    cluster: str
    region: str
    checkpoint_cost: Duration = Duration(30_000_000)
    stop_timeout: Duration = Duration(300_000_000)
    # Probes of the agents by a CM that begins to lead (actors/common/cm/recovery.py):
    # how often, and how many unanswered ones make an agent dead.
    probe_every: Duration = Duration(5_000_000)
    probes_max: Annotated[int, msgspec.Meta(ge=1, le=100)] = 3
    # Machines in transit (see actors/common/cm/manager.py): how often, and how many
    # times after a membership change, to re-read the cluster until they are free.
    transit_recheck: Duration = Duration(10_000_000)
    transit_rechecks_max: int = 90
    lease: LeaseTiming = LeaseTiming()
    # A job on a machine that fails: "restart" it on spare machines here (MAST),
    # or "report" it failed to the scheduler, whose policy places it again (the
    # cluster policies own placement).
    on_host_failure: Literal["restart", "report"] = "restart"


@dataclass
class Running:
    """A job this CM runs: its spec, attempt and agent, and a pending stop."""

    spec: JobSpec
    priority: int
    attempt: int
    agent: str
    auction_id: int  # 0 for a job rebuilt while its dispatch no longer stands
    stopping: EndReason | None = None
    pace: Pace | None = None


class CMCore(Protocol):
    """What a cluster manager's collaborators use of it: its state and an actor's effects.

    `ledger` is the cluster as this CM knows it (a collaborator may replace
    it with one re-read from the store); `running` the jobs it runs, by
    (workload id, job name). The effects are the actor's own, so every store
    call, message, timer and decision lands in the trace in the order made.
    """

    params: CMParams
    rms: str
    ledger: ClusterLedger
    running: dict[tuple[str, str], Running]

    @property
    def fence(self) -> Fence | None: ...

    @property
    def now_us(self) -> int: ...

    async def current_fence(self) -> Fence | None: ...

    async def store(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T: ...

    def decision(self, type_: str, payload: Any) -> None: ...

    def send(self, dst: str, msg: Any) -> None: ...

    def send_reliably(self, dst: str, msg: Any) -> None: ...

    def report_end(self, key: tuple[str, str], reason: EndReason, auction_id: int) -> None: ...
