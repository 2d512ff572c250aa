"""Gang placement by network tier on one cluster (actors/policies/cluster/placement.py)."""

from __future__ import annotations

import pytest

from actors.policies.cluster.api import Slot
from actors.policies.cluster.placement import best_tier, give_back, place, take, tier_of

# Two racks of four 4-GPU machines; free GPUs per machine as listed.
FREE = {"r0": [4, 2, 1, 3], "r1": [1, 1, 2, 0]}
MACHINES = tuple(
    Slot(host=f"{rack}m{i}", rack=rack, gpus_total=4, gpus_free=free)
    for rack, frees in FREE.items()
    for i, free in enumerate(frees)
)
RACK_OF = {s.host: s.rack for s in MACHINES}


@pytest.mark.parametrize(
    ("gpus", "tier", "expected"),
    [
        # machine tier: the tightest single machine (r0m3 has 3 free, r0m0 has 4).
        (3, "machine", (("r0m3", 3),)),
        (4, "machine", (("r0m0", 4),)),
        (5, "machine", None),
        # rack tier: r0 has 10 free; 6 GPUs = r0m0 (4) + the tightest fit for 2 (r0m1).
        (6, "rack", (("r0m0", 4), ("r0m1", 2))),
        # r1 has only 4 free in all, so 5 GPUs on one rack must come from r0: 4 + 1 (r0m2).
        (5, "rack", (("r0m0", 4), ("r0m2", 1))),
        (11, "rack", None),
        # network tier: all 14 free GPUs.
        (
            14,
            "network",
            (
                ("r0m0", 4),
                ("r0m1", 2),
                ("r0m2", 1),
                ("r0m3", 3),
                ("r1m0", 1),
                ("r1m1", 1),
                ("r1m2", 2),
            ),
        ),
        (15, "network", None),
    ],
)
def test_place_finds_the_tightest_gang_at_each_tier(gpus, tier, expected) -> None:
    assert place(MACHINES, gpus, tier) == expected


def test_best_tier_falls_back_from_machine_to_rack_to_network() -> None:
    assert best_tier(MACHINES, 4) == ("machine", (("r0m0", 4),))
    assert best_tier(MACHINES, 9)[0] == "rack"  # r0 has 10 free
    assert best_tier(MACHINES, 12)[0] == "network"
    assert best_tier(MACHINES, 15) is None


def test_tier_of_names_host_rack_and_network_spreads() -> None:
    assert tier_of((("r0m0", 2),), RACK_OF) == "machine"
    assert tier_of((("r0m0", 2), ("r0m1", 2)), RACK_OF) == "rack"
    assert tier_of((("r0m0", 2), ("r1m1", 1)), RACK_OF) == "network"


def test_take_then_give_back_restores_the_machines_and_refuses_over_allocation() -> None:
    gang = place(MACHINES, 6, "rack")
    after = take(MACHINES, gang)
    assert sum(s.gpus_free for s in after) == 14 - 6
    assert give_back(after, gang) == MACHINES
    with pytest.raises(ValueError, match="r0m2"):
        take(MACHINES, (("r0m2", 2),))
    with pytest.raises(ValueError, match="unknown hosts"):
        take(MACHINES, (("nowhere", 1),))
    with pytest.raises(ValueError, match="at least one GPU"):
        place(MACHINES, 0, "network")
