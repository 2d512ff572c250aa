"""What a world and its network are built from: the value types of a scenario's
`[world]` and `[network]` sections (and of a system's regions).

They live apart from the scenario format (`emulator/run/scenario.py`), which
imports them, so that the topology and the network depend on these values
only, never on how scenarios are read.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

Name = Annotated[str, Meta(min_length=1, max_length=200)]
Count = Annotated[int, Meta(ge=0, le=100_000)]
Probability = Annotated[float, Meta(ge=0.0, le=1.0)]
PositiveMs = Annotated[float, Meta(gt=0.0, le=60_000.0)]
Gbps = Annotated[float, Meta(gt=0.0, le=1e6)]


class Spec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Base of every scenario section: unknown keys are errors."""


class RegionSpec(Spec, kw_only=True):
    name: Name
    datacenters: Annotated[int, Meta(ge=1, le=64)] = 1
    fault_domains: Annotated[int, Meta(ge=1, le=64)] = 2
    racks: Annotated[int, Meta(ge=1, le=10_000)] = 2
    machines: Annotated[int, Meta(ge=0, le=10_000)] = 2
    control_hosts: Annotated[int, Meta(ge=1, le=16)] = 2
    wan_egress_gbps: Gbps = 400.0
    wan_ingress_gbps: Gbps = 400.0


class WorldSpec(Spec, kw_only=True):
    regions: Annotated[list[RegionSpec], Meta(min_length=1, max_length=256)]


class RegionPairSpec(Spec, kw_only=True):
    a: Name
    b: Name
    latency_ms: PositiveMs | None = None
    bandwidth_gbps: Gbps | None = None


class NetworkSpec(Spec, kw_only=True):
    same_host_ms: PositiveMs = 0.01
    same_rack_ms: PositiveMs = 0.05
    same_dc_ms: PositiveMs = 0.5
    cross_dc_ms: PositiveMs = 2.0
    cross_region_ms_min: PositiveMs = 30.0
    cross_region_ms_max: PositiveMs = 150.0
    # Latency varies by up to this share of its base, either way.
    jitter_fraction: Probability = 0.1
    wan_pair_gbps: Gbps = 100.0
    region_pairs: list[RegionPairSpec] = []
