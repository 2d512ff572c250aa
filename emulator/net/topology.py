"""The world's shape: region → datacenter → fault domain → rack → machine.

Control hosts (`REGION/ctl0`…) sit in the region's first datacenter; the
control plane's actors live there. Node names are paths, so a fault target
like `us-east/dc0/fd1` names the whole subtree.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx

    from emulator.net.specs import RegionSpec


@dataclass(frozen=True, slots=True)
class Place:
    """Where a host sits: the tiers that decide latency."""

    region: str
    dc: str
    fault_domain: str
    rack: str


def iter_nodes(regions: list[RegionSpec]) -> Iterator[tuple[str, str | None, str, Place | None]]:
    """Yield `(node, parent, tier, place)`, parents first; `place` is set for hosts."""
    for spec in regions:
        region = spec.name
        yield region, None, "region", None
        for d in range(spec.datacenters):
            dc = f"{region}/dc{d}"
            yield dc, region, "dc", None
            for f in range(spec.fault_domains):
                fd = f"{dc}/fd{f}"
                yield fd, dc, "fault_domain", None
                for r in range(spec.racks):
                    rack = f"{fd}/r{r}"
                    yield rack, fd, "rack", None
                    for m in range(spec.machines):
                        yield f"{rack}/m{m}", rack, "machine", Place(region, dc, fd, rack)
        dc0 = f"{region}/dc0"
        for c in range(spec.control_hosts):
            host = f"{region}/ctl{c}"
            # A control host is its own "rack": two control hosts talk at DC latency.
            yield host, dc0, "control", Place(region, dc0, host, host)


class Topology:
    """The tree as a networkx DiGraph, with each host's place cached.

    The DiGraph is built on first use (a subtree's hosts, for a fault on a rack
    or a region): a fleet of 200k machines took seconds to build it, and most
    runs never ask. Each node's tier and parent are kept as they come.
    """

    def __init__(self, regions: list[RegionSpec]) -> None:
        self._tier: dict[str, str] = {}
        self._parent: dict[str, str] = {}
        self.places: dict[str, Place] = {}
        self.machines: list[str] = []
        self.control_hosts: dict[str, list[str]] = {r.name: [] for r in regions}
        self.regions = [r.name for r in regions]
        self.specs = {r.name: r for r in regions}
        # Each node's ancestors and itself, shared by the hosts of one rack: built
        # top down as the nodes come (networkx's `ancestors` per host took seconds
        # on a fleet of 200k machines).
        chain: dict[str, frozenset[str]] = {}
        self._above: dict[str, frozenset[str]] = {}
        for node, parent, tier, place in iter_nodes(regions):
            self._tier[node] = tier
            above = chain[parent] if parent is not None else frozenset()
            if parent is not None:
                self._parent[node] = parent
            if place is None:
                chain[node] = above | {node}
            else:
                self._above[node] = above
                self.places[node] = place
                if tier == "machine":
                    self.machines.append(node)
                else:
                    self.control_hosts[place.region].append(node)

    @cached_property
    def graph(self) -> nx.DiGraph:
        import networkx as nx  # on first use only: a CLI that builds no graph starts sooner

        g = nx.DiGraph()
        g.add_nodes_from((node, {"tier": tier}) for node, tier in self._tier.items())
        g.add_edges_from((parent, node) for node, parent in self._parent.items())
        return g

    def has_node(self, node: str) -> bool:
        return node in self._tier

    def is_host(self, node: str) -> bool:
        return node in self.places

    def ancestors(self, host: str) -> frozenset[str]:
        """The host and every node above it."""
        return self._above[host] | {host}

    def under_any(self, host: str, nodes: set[str] | frozenset[str]) -> bool:
        """Whether the host is one of `nodes` or sits under one of them."""
        return host in nodes or not self._above[host].isdisjoint(nodes)

    def hosts_under(self, node: str) -> list[str]:
        if node in self.places:
            return [node]
        import networkx as nx

        return sorted(h for h in nx.descendants(self.graph, node) if h in self.places)

    def tier(self, node: str) -> str:
        return self._tier[node]
