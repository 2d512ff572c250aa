"""The federated baseline: early binding to the lowest demand/supply region."""

from __future__ import annotations

import pytest

from actors.policies.mast.federated import BindRequest, bind_all, pick_region

CASES = [
    # (name, demand, supply, region)
    # us: 120/100 = 1.2, eu: 40/50 = 0.8, ap: 90/60 = 1.5 -> eu
    (
        "lowest ratio",
        {"us": 120.0, "eu": 40.0, "ap": 90.0},
        {"us": 100.0, "eu": 50.0, "ap": 60.0},
        "eu",
    ),
    # ap has the lowest demand but no supply of the type: not a candidate; us 1.0 < eu 2.0
    (
        "regions without supply are skipped",
        {"us": 8.0, "eu": 16.0, "ap": 0.0},
        {"us": 8.0, "eu": 8.0, "ap": 0.0},
        "us",
    ),
    # no demand recorded for eu: ratio 0
    ("missing demand is zero", {"us": 1.0}, {"us": 100.0, "eu": 1.0}, "eu"),
    # us 50/100 = eu 25/50 = 0.5: tie -> by name, eu
    ("tie by region name", {"us": 50.0, "eu": 25.0}, {"us": 100.0, "eu": 50.0}, "eu"),
    ("nobody has the type", {"us": 1.0}, {}, None),
]


@pytest.mark.parametrize(
    ("demand", "supply", "region"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_pick_region(demand, supply, region) -> None:
    assert pick_region("A100", demand, supply) == region


def test_bind_all_spreads_by_updating_demand() -> None:
    # A100 supply us 100, eu 50; demand starts at us 40 (0.4), eu 10 (0.2).
    # w1 (30) -> eu (0.2 < 0.4), eu demand 40 (0.8)
    # w2 (20) -> us (0.4 < 0.8), us demand 60 (0.6)
    # w3 (10) -> us (0.6 < 0.8), us demand 70
    # w4 V100 -> only ap has V100
    # w5 H100 -> nobody: None
    supply = {"A100": {"us": 100.0, "eu": 50.0}, "V100": {"ap": 10.0}}
    demand = {"A100": {"us": 40.0, "eu": 10.0}}
    bound, after = bind_all(
        [
            BindRequest(workload_id="w1", gpu_type="A100", amount=30),
            BindRequest(workload_id="w2", gpu_type="A100", amount=20),
            BindRequest(workload_id="w3", gpu_type="A100", amount=10),
            BindRequest(workload_id="w4", gpu_type="V100", amount=8),
            BindRequest(workload_id="w5", gpu_type="H100", amount=8),
        ],
        demand,
        supply,
    )
    assert bound == {"w1": "eu", "w2": "us", "w3": "us", "w4": "ap", "w5": None}
    assert after["A100"] == {"us": 70.0, "eu": 40.0}
    assert after["V100"] == {"ap": 8.0}
    assert demand == {"A100": {"us": 40.0, "eu": 10.0}}  # the input is not modified
