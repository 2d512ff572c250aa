"""World presets, their topology, machine records and the static cluster split."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from actors.mast.world import (
    PRESETS,
    RegionHardware,
    WorldModel,
    machines,
    preset,
    region_specs,
    static_clusters,
)
from emulator.net.specs import RegionSpec
from emulator.net.topology import Topology


def test_small_preset_sizes():
    world = preset("small")
    assert len(world.regions) == 3
    assert world.gpus == 512  # "about 500"
    assert 100 <= world.cpu_machines <= 400  # "some hundred"


def test_meta_day_preset_sizes():
    world = preset("meta-day")
    assert len(world.regions) == 10
    assert abs(world.gpus - 50_000) <= 500  # 49,920: whole racks of 16 in whole fault domains
    # MAST §5.4's largest region: ~64,000 CPU machines for ~20,000 GPUs (3.2 per GPU);
    # the preset gives 3.4 per GPU for GPU workloads' preprocessing plus CPU regions.
    assert world.cpu_machines == 210_336
    assert 3.0 <= world.cpu_machines / world.gpus <= 4.5
    assert set(world.gpus_by_type()) == {"A100", "H100", "V100"}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_uneven(name):
    """MAST Fig. 2: regions differ in GPU count, dominant GPU type, and storage per machine."""
    regions = preset(name).regions
    gpus = [r.gpus for r in regions]
    gpu_share = [r.gpu_machine_count / r.machine_count for r in regions]
    # The richest region has at least 3x the GPUs of the poorest; one region is GPU-poor,
    # holding at most half the share of GPU machines of the GPU-richest.
    assert max(gpus) >= 3 * min(gpus)
    assert min(gpu_share) < 0.1 and max(gpu_share) >= 2 * min(gpu_share)
    dominant = {max(r.gpu_machines, key=r.gpu_machines.__getitem__) for r in regions}
    assert len(dominant) >= 3
    storage_per_machine = [r.storage_pb / r.machine_count for r in regions]
    assert max(storage_per_machine) >= 2 * min(storage_per_machine)


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(KeyError, match=r"known: meta-day, meta-scale, small"):
        preset("huge")


def test_region_specs_pass_scenario_validation():
    for world in PRESETS.values():
        for spec in region_specs(world):
            # RegionSpec() does not check its bounds; a round trip through msgspec does.
            msgspec.convert(msgspec.to_builtins(spec), RegionSpec)
            assert spec.control_hosts >= 2


def test_leftover_rack_positions_have_no_machine_record():
    # 10 H100 + 5 CPU machines in racks of 4: H100 fills 3 racks (the last half empty),
    # CPU 2 racks; 5 racks over 1 dc x 2 fault domains → 3 racks per fault domain.
    world = WorldModel(
        regions=(
            RegionHardware(
                name="x", gpu_machines={"H100": 10}, cpu_machines=5, machines_per_rack=4
            ),
        ),
        clusters_per_region=1,
    )
    (spec,) = region_specs(world)
    assert (spec.racks, spec.machines) == (3, 4)
    topo = Topology([spec])
    ms = machines(world)
    assert len(ms) == 15 and len(topo.machines) == 24
    assert {m.host for m in ms} <= set(topo.machines)
    assert len({m.rack for m in ms}) == 5


def test_too_few_fault_domains_split_racks_of_each_kind():
    # One fault domain, three clusters: each kind's racks are cut in three blocks.
    world = WorldModel(
        regions=(
            RegionHardware(
                name="x",
                gpu_machines={"A100": 6},
                cpu_machines=12,
                fault_domains=1,
                machines_per_rack=2,
            ),
        ),
        clusters_per_region=3,
    )
    clusters, clustered = static_clusters(world, machines(world))
    assert [c.intended_machines for c in clusters] == [6, 6, 6]
    for c in clusters:
        kinds = Counter(m.gpu_type for m in clustered if m.cluster == c.id)
        assert kinds == {"A100": 2, None: 4}


def test_world_model_rejects_duplicate_regions_and_bad_values():
    with pytest.raises(ValueError, match="duplicate"):
        WorldModel(regions=(RegionHardware(name="a"), RegionHardware(name="a")))
    with pytest.raises(msgspec.ValidationError, match="cpu_machines"):
        msgspec.convert({"regions": [{"name": "a", "cpu_machines": -1}]}, WorldModel, strict=True)
