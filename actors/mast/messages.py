"""MAST's own protocols: the GMS's auctions over the RMSs, and the slow path's copies.

The auctions (after the client's `Submitted`, `actors/common/messages.py`):

1. Each GMS-scan pass ranks the queue (⟨priority, credit⟩), announces
   `ScanStart`, then opens one auction per workload in rank order.
2. Every RMS answers `Bid` (a P_score) or `Abstain` (with a reason).
3. The GMS commits the award (compare-and-set on the workload row) and then
   sends `Award` to the winner and `Release` to the others.
4. The winner dispatches through the shared protocol (`ExecutePlan` to the
   CMs), then reports `Dispatched` to the GMS; later `WorkloadEnded` (done,
   preempted, failed) sends the workload out of the queue or back into it.

The slow path: Tetris and the GMS order copies; the migration service reports.

1. Tetris's daily pass sends `ReplicateOrders` (moves, DR, colocation and hot
   replicas) to the migration service; the GMS sends `DataRequest` for a
   workload that every RMS declined for lack of data (on-demand replication).
2. The service records each order as a copy in the store, runs it as a WAN
   bulk flow in the background QoS class, persists its progress, and on the
   last byte marks the replica ready.
3. It tells Tetris and the GMS `ReplicaReady`; the GMS re-queues the
   workloads that waited for it, Tetris completes a move (the new replica
   becomes the home, the old home is deleted).
Orders and reports travel at least once (`Actor.send_reliably`): a lost order
would leave a workload waiting for data forever.
"""

from __future__ import annotations

from typing import Literal

from actors.common.messages import EndReason, Msg
from store.mast.records import JobSpec

AbstainReason = Literal["no_data", "no_hardware", "negative_cache", "unschedulable", "busy"]


# ---- GMS → RMS ----------------------------------------------------------------
class ScanStart(Msg):
    """GMS → every RMS: a GMS-scan pass begins; reset the negative cache.

    Sent just before the pass's first auctions, it may arrive after them (the
    network keeps no order): the first of the pass's messages begins it.
    """

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
    scan: int  # the GMS-scan pass (of `gms_epoch`) that opened it
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


# ---- the slow path -------------------------------------------------------------


class CopyOrder(Msg, kw_only=True):
    """One table to copy into `dst`; `reason` is move, dr, colocation, hot or on-demand."""

    table: str
    dst: str
    priority: int
    deadline_us: int | None = None
    reason: str


class ReplicateOrders(Msg, kw_only=True):
    """Tetris → migration service: the copies a pass planned, in the order to run them."""

    tetris_pass: int
    orders: tuple[CopyOrder, ...]


class DataRequest(Msg, kw_only=True):
    """GMS → migration service: no region holds all of this workload's data.

    The service chooses a region with the workload's hardware that needs the
    fewest bytes and copies the missing tables there, at the workload's
    priority, with a soft deadline of `deadline_us`.
    """

    workload_id: str
    tables: tuple[str, ...]
    hardware: tuple[str, ...]  # GPU types, and "cpu" for CPU machines
    priority: int
    deadline_us: int | None = None
    gms_epoch: int


class ReplicaReady(Msg, kw_only=True):
    """Migration service → Tetris and the GMS: `table` is ready in `region`."""

    table: str
    region: str
    reason: str
    workload_id: str | None = None
