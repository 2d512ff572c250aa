"""The kernel's table of bulk flows: who owns each, and when the next one completes.

`emulator.net.flows.FluidNetwork` computes rates and completion times; this
table connects it to the run. It numbers flows, remembers which actor started
each (a crash of the owner cancels its flows), traces every start, cap,
cancel and completion as a `flow` event, and keeps exactly one live kernel
event scheduled at the next completion time.

What must stay true:
- After any change of flows or WAN links (`changed`), a new completion check
  is scheduled and every earlier one goes stale (a token), so the fluid
  model is advanced only at completion instants it reported itself.
- A completed flow is announced once, by `FlowDone` to its owner, and only if
  it was neither cancelled nor orphaned by its owner's crash.
- Until the owner has read its `FlowDone` (a paused owner reads it late), the
  flow is complete to it: its progress is its size, and stopping or pacing it
  changes nothing. An owner acts on what it knows; its flows may have ended
  meanwhile (explore found the migration service, paused past a flow's end,
  dying on the progress of a flow the table had forgotten).
- Flow ids follow start order and completions are handled in the order
  `FluidNetwork.advance` returns them, so the trace is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from emulator.net.flows import FluidNetwork, flow_path
from emulator.sysmsg import FlowDone


class KernelEvents(Protocol):
    """What the flow table (and `emulator.net.hardware`) need of the kernel."""

    now_us: int

    def at(self, t_us: int, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` as a kernel event at emulated time `t_us`."""
        ...

    def post(self, address: str, msg: Any, delay_us: int = 0) -> None:
        """Send a kernel-originated message to an actor."""
        ...

    def trace_event(self, kind: str, src: str, dst: str, type_: str, payload: Any) -> int:
        """Record a trace event at the current emulated time."""
        ...


class FlowTable:
    """Bulk flows of a run, over the network's fluid WAN model (see the module docstring)."""

    def __init__(self, fluid: FluidNetwork, kernel: KernelEvents) -> None:
        self.fluid = fluid
        self._kernel = kernel
        # Live flow id → the address that started it, and the flow's bytes.
        self._owner: dict[int, tuple[str, int]] = {}
        self._owned: dict[str, set[int]] = {}  # address → its live flows (cancelled on its crash)
        # Finished flows (id → bytes) whose owner may not have read `FlowDone` yet.
        self._ended: dict[int, int] = {}
        self._seq = 0
        self._token = 0

    def start(
        self, owner: str, src_region: str, dst_region: str, nbytes: int, qos: str = "default"
    ) -> int:
        """Start a flow for actor `owner`; returns its id. `FlowDone` reaches `owner` at the end."""
        kernel = self._kernel
        self._seq += 1
        flow_id = self._seq
        self.fluid.start(flow_id, src_region, dst_region, nbytes, kernel.now_us, qos=qos)
        self._owner[flow_id] = (owner, nbytes)
        self._owned.setdefault(owner, set()).add(flow_id)
        kernel.trace_event(
            "flow", owner, "", "start", (flow_id, src_region, dst_region, nbytes, qos)
        )
        self.changed()
        return flow_id

    def progress(self, flow_id: int) -> tuple[int, int]:
        """(bytes arrived, total bytes) of a flow now: all of them once it finished."""
        ended = self._ended.get(flow_id)
        if ended is not None:
            return ended, ended
        return self.fluid.progress(flow_id, self._kernel.now_us)

    def set_rate_cap(self, flow_id: int, cap_bps: float | None) -> None:
        """Pace a live flow (None: no cap; 0 holds it still); a finished one is left alone."""
        if flow_id not in self._owner:
            return
        kernel = self._kernel
        self.fluid.set_rate_cap(flow_id, cap_bps, kernel.now_us)
        kernel.trace_event("flow", "", "", "cap", (flow_id, cap_bps))
        self.changed()

    def wan_capacity_bps(self, src_region: str, dst_region: str) -> float:
        """What one flow could get from `src` to `dst` alone now: its path's narrowest link."""
        fluid = self.fluid
        path = flow_path(src_region, dst_region)
        if any(fluid.link_down(link) for link in path):
            return 0.0
        return min(fluid.capacity_bps(link) for link in path)

    def cancel(self, owner: str, flow_id: int) -> int:
        """`owner` stops a flow; returns the bytes that had arrived.

        A flow that finished before is left as it was: all its bytes arrived
        (its `FlowDone` still reaches the owner). One never started, or
        cancelled before, moved nothing (0).
        """
        owned = self._owned.get(owner)
        if owned is not None:
            owned.discard(flow_id)
        ended = self._ended.get(flow_id)
        if ended is not None:
            return ended
        return self._cancel(flow_id)

    def cancel_all(self, owner: str) -> None:
        """Cancel every live flow of `owner` (it crashed), in id order."""
        for flow_id in sorted(self._owned.pop(owner, ())):
            self._cancel(flow_id)

    def _cancel(self, flow_id: int) -> int:
        if self._owner.pop(flow_id, None) is None:
            return 0
        kernel = self._kernel
        done = self.fluid.cancel(flow_id, kernel.now_us)
        kernel.trace_event("flow", "", "", "cancel", (flow_id, done))
        self.changed()
        return done

    def changed(self) -> None:
        """Reschedule the next completion check after any change of flows or links."""
        kernel = self._kernel
        self._token += 1
        nxt = self.fluid.next_completion_us()
        if nxt is not None:
            kernel.at(max(nxt, kernel.now_us), self._check, self._token)

    def _check(self, token: int) -> None:
        if token != self._token:
            return
        kernel = self._kernel
        for flow_id in self.fluid.advance(kernel.now_us):
            live = self._owner.pop(flow_id, None)
            if live is None:
                continue
            owner, self._ended[flow_id] = live
            owned = self._owned.get(owner)
            if owned is not None:
                owned.discard(flow_id)
            kernel.trace_event("flow", "", owner, "done", flow_id)
            kernel.post(owner, FlowDone(flow_id))
        self.changed()
