"""The membership protocol: RAS → CM → RMS.

1. Every pass, a region's RAS (`ras/REGION`) assigns the region's machines to
   its dynamic clusters and commits the new membership in one fenced store
   write (`fleet.set_membership`).
2. Only then it sends `MembershipChanged` to the CM of every ML cluster that
   gained or lost machines (non-ML clusters have no CM).
3. The CM re-reads its machines from the store. A job holding a machine that
   left is restarted on a spare from its last checkpoint, as after a machine
   failure (or reported failed if there is no spare). A machine that joined
   while a job of its old cluster still holds it stays unused until freed.
4. The CM sends `ClusterChanged` to its RMS, which reloads that cluster's view.
Both messages travel at least once (`Actor.send_reliably`) and carry no state
the store does not hold: handling one twice, or late, only re-reads.
"""

from __future__ import annotations

from actors.common.messages import Msg


class MembershipChanged(Msg, kw_only=True):
    """RAS → CM of `cluster`: pass `ras_pass` moved machines in or out (already committed).

    The receiver re-reads its cluster's machines from the store (the lists
    are for the trace), deals with jobs on machines that left, and tells its RMS.
    """

    ras_epoch: int
    ras_pass: int
    cluster: str
    joined: tuple[str, ...]
    left: tuple[str, ...]


class ClusterChanged(Msg, kw_only=True):
    """CM → RMS: the cluster's machines (or those of them in transit) changed.

    The RMS reloads the cluster's view from the store before its next bid.
    """

    cm_epoch: int
    cluster: str
    machines: int
