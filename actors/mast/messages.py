"""The slow-path protocol: Tetris and the GMS order copies; the migration service reports.

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

from actors.common.messages import Msg


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
