"""Messages the kernel itself sends to actors."""

from __future__ import annotations

from typing import Any

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


class Reliable(msgspec.Struct, frozen=True, tag=True):
    """A message sent with `Actor.send_reliably`: resent until `Delivered(key)` returns.

    The receiver's actor base acknowledges it and hands `msg` to the handler
    of its type, once: a resent copy it has seen is acknowledged and dropped.
    """

    key: str
    msg: Any


class Delivered(msgspec.Struct, frozen=True, tag=True):
    """Receiver → sender: the reliable message `key` arrived (stop resending it)."""

    key: str


class Resend(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: resend what is not yet acknowledged."""
