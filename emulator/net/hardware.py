"""Hardware state of a run: nodes going down and up, and who is told of it.

A node is a host or a whole subtree of the topology (rack, fault domain,
region). Taking one down crashes the actors on its hosts, pauses the WAN
flows of a region, and tells every hardware watcher (the cluster managers,
RAS) with `HostDown`; bringing it back restarts the actors waiting for their
host and sends `HostUp`.

What must stay true:
- A change that changes nothing (a node already down taken down) leaves no
  trace and tells nobody.
- For one change the order is fixed: the `fault` trace event, then the
  actors host by host in sorted order, then the flow reschedule, then the
  watchers in their configured order.
- A watcher that missed news (it was down, or followed and ignored it) can
  always be told the current state again (`replay`).
"""

from __future__ import annotations

from typing import Protocol

from emulator.net.flow_table import FlowTable, KernelEvents
from emulator.net.network import Network
from emulator.sysmsg import HostDown, HostUp


class HostActors(KernelEvents, Protocol):
    """What hardware state needs of the kernel beyond events: its actors' fate per host."""

    def crash_actors_on(self, host: str) -> None:
        """Crash every live actor on `host`, which just went down."""
        ...

    def restart_actors_on(self, host: str) -> None:
        """Restart the actors that wait for `host`, if it is up now."""
        ...


class Hardware:
    """Up/down state of the topology's nodes during a run (see the module docstring)."""

    def __init__(self, network: Network, kernel: HostActors, flows: FlowTable) -> None:
        self.network = network
        self._kernel = kernel
        self._flows = flows
        # The actors told of every change (`HostDown`/`HostUp`), in this order.
        self.watchers: tuple[str, ...] = ()
        # Every node whose up/down state changed during the run (see `replay`).
        self._changed_nodes: set[str] = set()

    def set_state(self, node: str, up: bool, until_us: int | None = None) -> None:
        """Take a host or a whole subtree (rack, fault domain, region) down or up.

        `until_us`: when a node taken down is scheduled to come back; the
        trace carries it, so the final heal is known where that comes after
        the run's end (`emulator.liveness.HealClock`).
        """
        kernel = self._kernel
        network = self.network
        changed = network.set_node_down(node, not up, kernel.now_us)
        if not changed:
            return
        self._changed_nodes.add(node)
        detail = {"until_us": until_us} if until_us is not None and not up else None
        kernel.trace_event("fault", "", node, "up" if up else "down", detail)
        for host in sorted(network.hosts_under(node)):
            if up:
                kernel.restart_actors_on(host)
            else:
                kernel.crash_actors_on(host)
        self._flows.changed()
        for watcher in self.watchers:
            kernel.post(watcher, HostUp(node) if up else HostDown(node))

    def replay(self, address: str) -> int:
        """Tell a hardware watcher the current state of every node that ever changed.

        `set_state` tells watchers only of changes, and a watcher that was
        down (or paused and then crashed, its mailbox lost) at that moment never
        learns of them. So whenever a watcher starts, and when an instance
        takes over its role (it ignored the news as a follower), it gets the
        state again. The rule is the simplest one that is correct whatever the
        watcher missed: for every node whose state changed at least once in
        the run, `HostUp` if it is up now, then `HostDown` for every node down
        now. Downs come after ups, so a host under both a node that came back
        (a rack) and one still down (its machine) ends down. Watchers handle
        both idempotently; the cost is bounded by the number of nodes faults
        ever touched. Returns the number of messages posted.
        """
        if address not in self.watchers or not self._changed_nodes:
            return 0
        kernel = self._kernel
        down = self.network.down
        ups = sorted(self._changed_nodes - down)
        for node in ups:
            kernel.post(address, HostUp(node))
        for node in sorted(down):
            kernel.post(address, HostDown(node))
        kernel.trace_event("hardware-replay", "", address, "", {"up": ups, "down": sorted(down)})
        return len(ups) + len(down)
