"""The hardware of the emulated world: regions, racks of GPU and CPU machines, clusters.

A `WorldModel` says how many machines of each kind every region holds and how
its datacenters are cut into fault domains and racks (MAST §2: hardware was
bought piecemeal, so regions differ a lot — Fig. 2). From it we derive the
emulator's topology (`region_specs`), one `Machine` record per populated
host (`machines`) and a fixed split into ML dynamic clusters
(`static_clusters`) that stands in for RAS until RAS proper exists.

Layout rules, all deterministic:
- a rack holds one kind of hardware: one GPU type, or CPU machines;
- a region's racks are filled GPU types first (by name), then CPU machines,
  in *striped* order — rack r0 of every fault domain, then r1 of every fault
  domain, … — so every fault domain gets its share of every kind;
- the rack grid is sized for whole racks per kind, so the only unpopulated
  hosts are the tail of a kind's last rack and the spare racks that round the
  grid up to whole fault domains. Those hosts exist in the topology but have
  no `Machine` record (think: empty rack positions). The presets are sized so
  that there are none.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Annotated

import msgspec
from msgspec import Meta

from emulator.net.specs import RegionSpec
from store.mast.records import GPUS_PER_MACHINE, DynamicCluster, Machine

Name = Annotated[str, Meta(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
MachineCount = Annotated[int, Meta(ge=0, le=1_000_000)]


class RegionHardware(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One region's hardware.

    `gpu_machines` maps a GPU type to its number of 8-GPU machines;
    `fault_domains` is per datacenter (as in `RegionSpec`); `storage_pb` is the
    warehouse capacity in petabytes (tables' home regions are drawn by it).
    """

    name: Name
    gpu_machines: dict[Name, MachineCount] = {}
    cpu_machines: MachineCount = 0
    datacenters: Annotated[int, Meta(ge=1, le=64)] = 1
    fault_domains: Annotated[int, Meta(ge=1, le=64)] = 2
    machines_per_rack: Annotated[int, Meta(ge=1, le=10_000)] = 16
    storage_pb: Annotated[float, Meta(ge=0.0, le=1e6)] = 10.0

    @property
    def gpu_machine_count(self) -> int:
        return sum(self.gpu_machines.values())

    @property
    def gpus(self) -> int:
        return GPUS_PER_MACHINE * self.gpu_machine_count

    @property
    def machine_count(self) -> int:
        return self.gpu_machine_count + self.cpu_machines

    def racks_needed(self) -> int:
        """Whole racks for each kind of hardware (one kind per rack)."""
        per = self.machines_per_rack
        kinds = [*self.gpu_machines.values(), self.cpu_machines]
        return sum(math.ceil(n / per) for n in kinds)

    def racks_per_fault_domain(self) -> int:
        return max(1, math.ceil(self.racks_needed() / (self.datacenters * self.fault_domains)))


class WorldModel(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole world: regions, ML dynamic clusters per region, control hosts per region."""

    regions: Annotated[tuple[RegionHardware, ...], Meta(min_length=1, max_length=256)]
    clusters_per_region: Annotated[int, Meta(ge=1, le=1_000)] = 2
    # Three, so that a three-replica role (the CMs of a cluster) can sit on three hosts.
    control_hosts: Annotated[int, Meta(ge=2, le=16)] = 3

    def __post_init__(self) -> None:
        names = [r.name for r in self.regions]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate region names in {names}")

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.regions)

    @property
    def cpu_machines(self) -> int:
        return sum(r.cpu_machines for r in self.regions)

    def gpus_by_type(self) -> dict[str, int]:
        """GPU type → GPUs in the whole world, types sorted by name."""
        out: dict[str, int] = {}
        for region in self.regions:
            for gpu_type, n in region.gpu_machines.items():
                out[gpu_type] = out.get(gpu_type, 0) + GPUS_PER_MACHINE * n
        return {t: out[t] for t in sorted(out) if out[t] > 0}


def region_specs(world: WorldModel) -> list[RegionSpec]:
    """The emulator topology for the world: a rack grid big enough for every machine."""
    return [
        RegionSpec(
            name=r.name,
            datacenters=r.datacenters,
            fault_domains=r.fault_domains,
            racks=r.racks_per_fault_domain(),
            machines=r.machines_per_rack,
            control_hosts=world.control_hosts,
        )
        for r in world.regions
    ]


def _striped_racks(r: RegionHardware) -> list[tuple[int, int, int]]:
    """`(dc, fd, rack)` in fill order: rack 0 of every fault domain, then rack 1, …"""
    return [
        (d, f, k)
        for k in range(r.racks_per_fault_domain())
        for d in range(r.datacenters)
        for f in range(r.fault_domains)
    ]


def _region_machines(r: RegionHardware) -> Iterator[Machine]:
    racks = iter(_striped_racks(r))
    kinds: list[tuple[str | None, int]] = [(t, r.gpu_machines[t]) for t in sorted(r.gpu_machines)]
    kinds.append((None, r.cpu_machines))
    for gpu_type, count in kinds:
        left = count
        while left > 0:
            d, f, k = next(racks)
            fd = f"{r.name}/dc{d}/fd{f}"
            rack = f"{fd}/r{k}"
            for m in range(min(left, r.machines_per_rack)):
                yield Machine(
                    host=f"{rack}/m{m}",
                    region=r.name,
                    rack=rack,
                    fault_domain=fd,
                    gpu_type=gpu_type,
                    gpus=GPUS_PER_MACHINE if gpu_type is not None else 0,
                )
            left -= r.machines_per_rack


def _topology_key(m: Machine) -> tuple[int, ...]:
    # Host names end in dcD/fdF/rR/mM; sort numerically as the topology enumerates them.
    return tuple(int(part.lstrip("dcfrm")) for part in m.host.split("/")[1:])


def machines(world: WorldModel) -> list[Machine]:
    """One record per populated host, in topology order (region, dc, fd, rack, machine)."""
    out: list[Machine] = []
    for r in world.regions:
        out.extend(sorted(_region_machines(r), key=_topology_key))
    return out


def _chunks(items: list[str], k: int) -> list[list[str]]:
    """`items` cut into `k` contiguous chunks whose sizes differ by at most one."""
    q, extra = divmod(len(items), k)
    out, start = [], 0
    for i in range(k):
        end = start + q + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _kind(m: Machine) -> str:
    return m.gpu_type if m.gpu_type is not None else ""


def _split_region(region_machines: list[Machine], k: int) -> dict[str, int]:
    """Rack → cluster index for one region's machines (see `static_clusters`)."""
    fds = list(dict.fromkeys(m.fault_domain for m in region_machines))
    racks_of_fd: dict[str, list[str]] = {}
    kind_of_rack: dict[str, str] = {}
    for m in region_machines:
        racks_of_fd.setdefault(m.fault_domain, [])
        if m.rack not in kind_of_rack:
            racks_of_fd[m.fault_domain].append(m.rack)
            kind_of_rack[m.rack] = _kind(m)
    has_gpu = any(kind != "" for kind in kind_of_rack.values())
    has_cpu = "" in kind_of_rack.values()

    if len(fds) >= k:
        by_fd = {
            rack: i
            for i, group in enumerate(_chunks(fds, k))
            for fd in group
            for rack in racks_of_fd[fd]
        }
        mixes = [set() for _ in range(k)]  # type: list[set[bool]]
        for rack, i in by_fd.items():
            mixes[i].add(kind_of_rack[rack] != "")
        if all((not has_gpu or True in mix) and (not has_cpu or False in mix) for mix in mixes):
            return by_fd
    # Too few fault domains, or a group of them lacks GPU or CPU racks: deal each
    # kind's racks (in topology order) to the clusters in contiguous blocks.
    by_kind: dict[str, list[str]] = {}
    for rack, kind in kind_of_rack.items():
        by_kind.setdefault(kind, []).append(rack)
    return {
        rack: i
        for kind in sorted(by_kind)
        for i, block in enumerate(_chunks(by_kind[kind], k))
        for rack in block
    }


def static_clusters(
    world: WorldModel, machine_list: list[Machine]
) -> tuple[list[DynamicCluster], list[Machine]]:
    """A fixed split of every region into `clusters_per_region` ML dynamic clusters.

    A stand-in for RAS (which comes later and, unlike this, spreads each
    cluster over fault domains). Cluster ids are `REGION/c0`, `REGION/c1`, ….
    Each region's fault domains, in topology order, are cut into contiguous
    groups of whole fault domains, one group per cluster. If the region has
    fewer fault domains than clusters, or a group would lack GPU or CPU
    machines while the region has both, each kind's racks are instead cut into
    contiguous blocks, one per cluster — so each cluster gets a mix whenever
    the region has at least `clusters_per_region` racks of each kind. Every
    machine ends up in exactly one cluster; returns the clusters and the
    machines (same order) with `cluster` set.
    """
    k = world.clusters_per_region
    by_region: dict[str, list[Machine]] = {}
    for m in machine_list:
        by_region.setdefault(m.region, []).append(m)
    cluster_of_rack: dict[str, str] = {}
    clusters: list[DynamicCluster] = []
    for r in world.regions:
        assignment = _split_region(by_region.get(r.name, []), k)
        sizes = [0] * k
        for m in by_region.get(r.name, []):
            sizes[assignment[m.rack]] += 1
        for rack, i in assignment.items():
            cluster_of_rack[rack] = f"{r.name}/c{i}"
        clusters.extend(
            DynamicCluster(id=f"{r.name}/c{i}", region=r.name, ml=True, intended_machines=sizes[i])
            for i in range(k)
        )
    unknown = sorted({m.region for m in machine_list} - {r.name for r in world.regions})
    if unknown:
        raise ValueError(f"machines of regions not in the world: {unknown}")
    out = [msgspec.structs.replace(m, cluster=cluster_of_rack[m.rack]) for m in machine_list]
    return clusters, out


# ---- presets -----------------------------------------------------------------
def _small() -> WorldModel:
    """Three regions, 512 GPUs and 264 CPU machines, as uneven as MAST Fig. 2.

    us-east is rich in H100 (224 GPUs) with a few A100 (32); eu-west holds A100
    only (192); ap-south is mostly CPU and storage, with two racks of V100 (64).
    One datacenter of two fault domains per region, racks of four machines, two
    ML clusters per region (one fault domain each, each with GPU and CPU
    machines). Every rack position is populated.
    """
    return WorldModel(
        regions=(
            RegionHardware(
                name="us-east",
                gpu_machines={"H100": 28, "A100": 4},
                cpu_machines=48,
                machines_per_rack=4,
                storage_pb=4.0,
            ),
            RegionHardware(
                name="eu-west",
                gpu_machines={"A100": 24},
                cpu_machines=64,
                machines_per_rack=4,
                storage_pb=6.0,
            ),
            RegionHardware(
                name="ap-south",
                gpu_machines={"V100": 8},
                cpu_machines=152,
                machines_per_rack=4,
                storage_pb=20.0,
            ),
        ),
        clusters_per_region=2,
    )


# MAST §5.4: the largest region's RMS manages ~64,000 CPU machines and ~20,000
# GPUs, 3.2 CPU machines per GPU; §5.1/§2's workloads (machines per workload
# 72/180/205 at 16/64/128 GPUs, durations 20 min/6.7 h/66 h GPU, 38 min/7.9 h/
# 38 h CPU) ask 3.18 CPU machine-hours per GPU-hour at steady state, 2.4 of
# them for GPU workloads' own preprocessing, which must run in their region.
# So every region gets 3.4 CPU machines per GPU for that, plus CPU machines of
# its own for CPU workloads (twice the bases below): ~210k CPU machines for
# ~50k GPUs, which leaves CPU machines ~85% allocated when GPUs are ~94%
# (§5.2: 87% for dedicated CPU machines, "slight overprovisioning to
# guarantee that costly GPU machines are never left idle").
PREPROCESS_CPU_MACHINES_PER_GPU = 3.4


# The regions of `meta-day` and `meta-scale`: GPU machines per type, CPU
# machines of their own (for CPU workloads, doubled in the preset), storage.
_FLEET = (
    ("us-east", 896, 128, 0, 1_664, 60.0),
    ("us-west", 768, 384, 0, 1_536, 50.0),
    ("us-central", 0, 896, 256, 1_536, 70.0),
    ("us-south", 384, 384, 96, 1_056, 40.0),
    ("eu-west", 512, 0, 0, 1_408, 40.0),
    ("eu-north", 0, 64, 64, 4_736, 250.0),
    ("eu-central", 0, 640, 128, 1_664, 60.0),
    ("ap-south", 0, 0, 128, 3_584, 180.0),
    ("ap-east", 256, 128, 0, 1_536, 45.0),
    ("sa-east", 0, 0, 128, 1_280, 30.0),
)


def _fleet_region(
    name: str, h100: int, a100: int, v100: int, cpu: int, pb: float, per_gpu: float
) -> RegionHardware:
    """One region of the fleet presets: `per_gpu` CPU machines per GPU plus twice `cpu`,
    rounded up to fill its rack grid (two datacenters of four fault domains, racks of 16)."""
    per_rack, domains = 16, 2 * 4
    gpu = {t: n for t, n in (("H100", h100), ("A100", a100), ("V100", v100)) if n}
    gpus = GPUS_PER_MACHINE * (h100 + a100 + v100)
    gpu_racks = sum(math.ceil(n / per_rack) for n in gpu.values())
    cpu_racks = math.ceil((2 * cpu + per_gpu * gpus) / per_rack)
    cpu_racks += -(gpu_racks + cpu_racks) % domains  # whole fault domains
    return RegionHardware(
        name=name,
        gpu_machines=gpu,
        cpu_machines=cpu_racks * per_rack,
        datacenters=2,
        fault_domains=4,
        machines_per_rack=per_rack,
        storage_pb=pb,
    )


def _meta_day() -> WorldModel:
    """Ten regions, 49,920 GPUs (6,240 GPU machines) and ~210,000 CPU machines.

    H100 (22,528 GPUs), A100 (20,992) and V100 (6,400), spread unevenly as in
    MAST Fig. 2: H100-rich us-east/us-west, A100-rich us-central/eu-central,
    H100-only eu-west, mixed us-south, and three GPU-poor, storage-heavy
    regions (eu-north is §2's "Region6": almost all CPU and storage, a little
    A100/V100; ap-south and sa-east hold V100 only). CPU machines per region:
    see `PREPROCESS_CPU_MACHINES_PER_GPU`. Two datacenters of four fault
    domains per region, racks of 16 machines, four ML clusters per region (two
    fault domains each). Every rack position is populated: each region's CPU
    machines are rounded up to fill its rack grid of whole fault domains.
    (Exactly 50,000 GPUs would leave a partly empty rack grid.)
    """
    return WorldModel(
        regions=tuple(_fleet_region(*region, PREPROCESS_CPU_MACHINES_PER_GPU) for region in _FLEET),
        clusters_per_region=4,
    )


def _meta_scale() -> WorldModel:
    """MAST at its published scale (§5.1, §5.4): 20 regions, 99,840 GPUs, ~250k CPU machines.

    `meta-day`'s ten regions twice over (the second ten named `-2`), with 2
    CPU machines per GPU besides the CPU regions' own: the "at least 200k CPU
    machines in dynamic clusters" of a fleet on which "tens of thousands" of
    workloads a day run. For measuring the control plane at that scale, not
    for allocation figures (`meta-day` is the fleet that behaves like MAST's).
    """
    regions = [
        _fleet_region(name + suffix, *rest, 2.0) for suffix in ("", "-2") for name, *rest in _FLEET
    ]
    return WorldModel(regions=tuple(regions), clusters_per_region=4)


PRESETS = {"small": _small(), "meta-day": _meta_day(), "meta-scale": _meta_scale()}


def preset(name: str) -> WorldModel:
    """A named world; `KeyError` names the known presets."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(
            f"unknown world preset {name!r}; known: {', '.join(sorted(PRESETS))}"
        ) from None
