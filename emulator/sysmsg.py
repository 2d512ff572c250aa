"""Messages the kernel itself sends to actors."""

from __future__ import annotations

import msgspec


class FlowDone(msgspec.Struct, frozen=True, tag=True):
    """Kernel → flow owner: every byte of bulk flow `flow_id` has arrived."""

    flow_id: int


class HostDown(msgspec.Struct, frozen=True, tag=True):
    """Kernel → hardware watchers: `node` (a machine, rack, fault domain or region) failed."""

    node: str


class HostUp(msgspec.Struct, frozen=True, tag=True):
    """Kernel → hardware watchers: `node` is back."""

    node: str
