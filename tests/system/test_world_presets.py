"""Every world preset built whole: topology hosts, machine records, the static cluster split.

Building `meta-scale` (200k+ machines) and `meta-day` takes seconds, so these
checks live in the system tier; the unit tier keeps the model's cheap checks
(tests/unit/test_world.py).
"""

from __future__ import annotations

from collections import Counter

import pytest

from actors.mast.world import PRESETS, machines, preset, region_specs, static_clusters
from emulator.net.topology import Topology
from store.mast.records import GPUS_PER_MACHINE


@pytest.fixture(scope="module", params=sorted(PRESETS))
def built(request: pytest.FixtureRequest):
    """(world, topology, machines, clusters, clustered machines) of each preset, built once."""
    world = preset(request.param)
    topo = Topology(region_specs(world))
    ms = machines(world)
    clusters, clustered = static_clusters(world, ms)
    return world, topo, ms, clusters, clustered


def test_machine_records_map_to_distinct_topology_hosts(built):
    world, topo, ms, _, _ = built
    hosts = [m.host for m in ms]
    assert len(set(hosts)) == len(hosts)
    for m in ms:
        place = topo.places[m.host]
        assert topo.tier(m.host) == "machine"
        assert (place.region, place.fault_domain, place.rack) == (m.region, m.fault_domain, m.rack)
    # The presets are sized so that every rack position holds a machine.
    assert sorted(hosts) == sorted(topo.machines)
    for r in world.regions:
        mine = [m for m in ms if m.region == r.name]
        kinds = Counter(m.gpu_type for m in mine)
        assert kinds == {**r.gpu_machines, None: r.cpu_machines}
        assert all(m.gpus == (GPUS_PER_MACHINE if m.gpu_type else 0) for m in mine)


def test_a_rack_holds_one_kind_and_kinds_are_striped_over_fault_domains(built):
    world, _, ms, _, _ = built
    kinds_of_rack: dict[str, set[str | None]] = {}
    fds_of_kind: dict[tuple[str, str | None], set[str]] = {}
    for m in ms:
        kinds_of_rack.setdefault(m.rack, set()).add(m.gpu_type)
        fds_of_kind.setdefault((m.region, m.gpu_type), set()).add(m.fault_domain)
    assert all(len(kinds) == 1 for kinds in kinds_of_rack.values())
    # A kind with at least one rack per fault domain reaches every fault domain.
    for r in world.regions:
        fds = r.datacenters * r.fault_domains
        for kind, n in [*r.gpu_machines.items(), (None, r.cpu_machines)]:
            if n >= fds * r.machines_per_rack:
                assert len(fds_of_kind[(r.name, kind)]) == fds


def test_static_clusters_partition_each_region_by_fault_domain(built):
    world, _, ms, clusters, clustered = built
    assert [m.host for m in clustered] == [m.host for m in ms]
    ids = [c.id for c in clusters]
    assert len(clusters) == len(world.regions) * world.clusters_per_region
    for r in world.regions:
        assert [c for c in ids if c.startswith(r.name + "/")] == [
            f"{r.name}/c{i}" for i in range(world.clusters_per_region)
        ]
    members = Counter(m.cluster for m in clustered)
    for c in clusters:
        assert c.ml and members[c.id] == c.intended_machines > 0
        mine = [m for m in clustered if m.cluster == c.id]
        assert all(m.region == c.region for m in mine)
        assert any(m.gpus for m in mine) and any(not m.gpus for m in mine)
    # The presets have enough fault domains: each lies wholly in one cluster.
    cluster_of_fd: dict[str, set[str | None]] = {}
    for m in clustered:
        cluster_of_fd.setdefault(m.fault_domain, set()).add(m.cluster)
    assert all(len(c) == 1 for c in cluster_of_fd.values())
