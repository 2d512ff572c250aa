"""The emulated network: a topology tree, per-tier latency, and link faults.

The topology (`topology.py`) is a networkx tree (built on first use). A
message's latency is fixed by the lowest tier the two hosts share (same
host, rack, datacenter, region, or the region pair), plus seeded jitter
drawn from the link's own random stream.

Faults are a handful of verbs kept in plain sets and lists: partitions of
region pairs and of host pairs (messages dropped both ways), loss,
duplication and extra delay rules scoped to everything or to a region pair,
and nodes (any subtree) taken down. Bulk transfers go through the fluid model
in `flows.py`, which shares WAN links max-min fairly.
"""

from __future__ import annotations

from dataclasses import dataclass

from emulator.net.flows import FluidNetwork
from emulator.net.links import CountedStream, LinkStreams
from emulator.net.specs import NetworkSpec, RegionSpec
from emulator.net.topology import Topology
from emulator.rng import RngStreams
from emulator.units import MS

GBPS_TO_BYTES = 1e9 / 8


@dataclass(slots=True)
class LinkRule:
    """An active loss / duplication / delay rule on all links or one region pair."""

    rule_id: int
    pair: tuple[str, str] | None
    loss: float = 0.0
    duplicate: float = 0.0
    delay_us: int = 0


def pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


class Network:
    """Latency, jitter and link faults between hosts; owns the fluid WAN model."""

    def __init__(self, topology: Topology, spec: NetworkSpec, rng: RngStreams) -> None:
        self.topology = topology
        self.spec = spec
        self._rng = rng
        # (base µs, jitter µs) per directed host pair; their draws come from `links`.
        self._latency: dict[tuple[str, str], tuple[int, int]] = {}
        self.links = LinkStreams(rng)
        self._pair_latency_us: dict[tuple[str, str], int] = {}
        pair_bw: dict[tuple[str, str], float] = {}
        overrides = {pair_key(p.a, p.b): p for p in spec.region_pairs}
        regions = topology.regions
        for i, a in enumerate(regions):
            for b in regions[i + 1 :]:
                key = pair_key(a, b)
                o = overrides.get(key)
                if o is not None and o.latency_ms is not None:
                    lat = round(o.latency_ms * MS)
                else:
                    draw = rng.stream("wan-latency", *key)
                    lat = round(
                        draw.uniform(spec.cross_region_ms_min, spec.cross_region_ms_max) * MS
                    )
                self._pair_latency_us[key] = lat
                gbps = (
                    o.bandwidth_gbps if o is not None and o.bandwidth_gbps else spec.wan_pair_gbps
                )
                pair_bw[key] = gbps * GBPS_TO_BYTES
        region_specs = topology.specs
        self.fluid = FluidNetwork(
            region_egress_bps={r: region_specs[r].wan_egress_gbps * GBPS_TO_BYTES for r in regions},
            region_ingress_bps={
                r: region_specs[r].wan_ingress_gbps * GBPS_TO_BYTES for r in regions
            },
            pair_bps=pair_bw,
        )
        self.partitions: set[tuple[str, str]] = set()
        self.host_partitions: set[tuple[str, str]] = set()
        self.down: set[str] = set()
        self.rules: list[LinkRule] = []
        self._rule_seq = 0
        self._faulty = False
        self._fixed_latency_us: int | None = None  # `fix_latency`

    # ---- topology queries --------------------------------------------
    def has_host(self, host: str) -> bool:
        return self.topology.is_host(host)

    def host_up(self, host: str) -> bool:
        if not self.down:
            return True
        return not self.topology.under_any(host, self.down)

    def hosts_under(self, node: str) -> list[str]:
        return self.topology.hosts_under(node)

    def region_of(self, host: str) -> str:
        return self.topology.places[host].region

    def pair_latency_us(self, a: str, b: str) -> int:
        return self._pair_latency_us[pair_key(a, b)]

    # ---- latency -----------------------------------------------------
    def _link(self, src: str, dst: str) -> tuple[int, int]:
        link = self._latency.get((src, dst))
        if link is None:
            link = self._make_link(src, dst)
            self._latency[(src, dst)] = link
        return link

    def _make_link(self, src: str, dst: str) -> tuple[int, int]:
        if self._fixed_latency_us is not None:
            return self._fixed_latency_us, 0
        spec = self.spec
        p, q = self.topology.places[src], self.topology.places[dst]
        if src == dst:
            base_ms = spec.same_host_ms
        elif p.region != q.region:
            base_ms = self._pair_latency_us[pair_key(p.region, q.region)] / MS
        elif p.dc != q.dc:
            base_ms = spec.cross_dc_ms
        elif p.rack != q.rack:
            base_ms = spec.same_dc_ms
        else:
            base_ms = spec.same_rack_ms
        base = max(1, round(base_ms * MS))
        jitter = round(base * spec.jitter_fraction)
        return base, jitter

    def fix_latency(self, latency_us: int) -> None:
        """Every message between any two hosts takes exactly `latency_us`, no jitter.

        0 delivers a message at the instant it is sent: a system that wants its
        control plane out of the picture (a cluster run compared event by event
        with its reference engine) asks for it through `SystemBuild`. Link
        faults (delay, loss, partitions) still apply on top.
        """
        if latency_us < 0:
            raise ValueError(f"latency must be >= 0 µs, got {latency_us}")
        self._fixed_latency_us = latency_us
        self._latency.clear()

    def set_link_latency(self, src: str, dst: str, low_us: int, high_us: int) -> None:
        """Pin a host pair's latency to a uniform range (benchmarks, tests)."""
        for a, b in ((src, dst), (dst, src)):
            self._latency[(a, b)] = (low_us, high_us - low_us)

    def transmit(self, src: str, dst: str) -> int | str | tuple[int, ...]:
        """Decide one message's fate: a delay (µs), a drop reason, or duplicate delays."""
        base, jitter = self._link(src, dst)
        delay = base + int(self.links(src, dst).random() * (jitter + 1)) if jitter else base
        if not self._faulty:
            return delay
        return self._faulty_transmit(src, dst, delay)

    def _faulty_transmit(self, src: str, dst: str, delay: int) -> int | str | tuple[int, ...]:
        if self.down and not (self.host_up(src) and self.host_up(dst)):
            return "host-down"
        if self.host_partitions and pair_key(src, dst) in self.host_partitions:
            return "partition"
        places = self.topology.places
        ra, rb = places[src].region, places[dst].region
        key = pair_key(ra, rb)
        if ra != rb and key in self.partitions:
            return "partition"
        copies = 1
        rng: CountedStream | None = None  # fetched at the first draw: a rule elsewhere draws none
        for rule in self.rules:
            if rule.pair is not None and rule.pair != key:
                continue
            if rule.loss or rule.duplicate:
                rng = rng or self.links(src, dst)
                if rule.loss and rng.random() < rule.loss:
                    return "loss"
                if rule.duplicate and rng.random() < rule.duplicate:
                    copies += 1
            delay += rule.delay_us
        if copies == 1 or rng is None:
            return delay
        # A duplicate travels separately and may overtake the original.
        return tuple([delay] + [delay + int(rng.random() * (delay + 1)) for _ in range(copies - 1)])

    # ---- faults ------------------------------------------------------
    def _refresh(self) -> None:
        self._faulty = bool(self.partitions or self.host_partitions or self.down or self.rules)

    def partition(self, a: str, b: str, cut: bool, now_us: int) -> bool:
        key = pair_key(a, b)
        changed = (key in self.partitions) != cut
        if cut:
            self.partitions.add(key)
        else:
            self.partitions.discard(key)
        self.fluid.set_pair_down(key[0], key[1], cut, now_us)
        self._refresh()
        return changed

    def partition_hosts(self, a: str, b: str, cut: bool) -> None:
        key = pair_key(a, b)
        if cut:
            self.host_partitions.add(key)
        else:
            self.host_partitions.discard(key)
        self._refresh()

    def heal_all(self, now_us: int) -> None:
        for a, b in sorted(self.partitions):
            self.fluid.set_pair_down(a, b, False, now_us)
        self.partitions.clear()
        self.host_partitions.clear()
        self.rules.clear()
        self._refresh()

    def add_rule(
        self,
        pair: tuple[str, str] | None,
        *,
        loss: float = 0.0,
        duplicate: float = 0.0,
        delay_us: int = 0,
    ) -> int:
        self._rule_seq += 1
        key = pair_key(*pair) if pair is not None else None
        self.rules.append(LinkRule(self._rule_seq, key, loss, duplicate, delay_us))
        self._refresh()
        return self._rule_seq

    def remove_rule(self, rule_id: int) -> None:
        self.rules = [r for r in self.rules if r.rule_id != rule_id]
        self._refresh()

    def set_node_down(self, node: str, down: bool, now_us: int | None = None) -> bool:
        if not self.topology.has_node(node):
            raise KeyError(node)
        changed = (node in self.down) != down
        if down:
            self.down.add(node)
        else:
            self.down.discard(node)
        if self.topology.tier(node) == "region" and now_us is not None:
            self.fluid.set_region_down(node, down, now_us)
        self._refresh()
        return changed


def build_network(regions: list[RegionSpec], spec: NetworkSpec, rng: RngStreams) -> Network:
    return Network(Topology(regions), spec, rng)
