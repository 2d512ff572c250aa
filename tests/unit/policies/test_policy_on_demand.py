"""On-demand replication target: fewest bytes to copy into a region with the hardware."""

from __future__ import annotations

from actors.policies.mast.on_demand import OnDemandPlan, plan_on_demand

GB = 1 << 30
TABLES = {
    # name: (size, home, {region: state})
    "a": (10 * GB, "east", {"east": "ready"}),
    "b": (1 * GB, "west", {"west": "ready", "north": "copying"}),
    "c": (5 * GB, "north", {"north": "ready"}),
}
HARDWARE = {"east": {"H100": 64, "cpu": 10}, "west": {"A100": 32, "cpu": 10}, "north": {"H100": 8}}
ROOM = {r: (0, 1000 * GB) for r in HARDWARE}


def test_the_region_needing_the_fewest_bytes_wins() -> None:
    # H100 + cpu: only east qualifies (north has no CPU machines); it lacks b (1 GB).
    plan = plan_on_demand(TABLES, ["a", "b"], HARDWARE, ["H100", "cpu"], ROOM)
    assert plan == OnDemandPlan(region="east", copies=(("b", "west"),), bytes=GB)


def test_a_copy_on_its_way_counts_as_there() -> None:
    # H100 only: east lacks b + c = 1 + 5 = 6 GB; north holds c, receives b, and
    # lacks a = 10 GB. 6 < 10: east.
    plan = plan_on_demand(TABLES, ["a", "b", "c"], HARDWARE, ["H100"], ROOM)
    assert plan is not None and plan.region == "east" and plan.bytes == 6 * GB
    # b and c: north holds c and is receiving b → nothing to copy.
    plan = plan_on_demand(TABLES, ["b", "c"], HARDWARE, ["H100"], ROOM)
    assert plan == OnDemandPlan(region="north", copies=(), bytes=0)


def test_ties_go_to_the_bigger_supply_then_the_name() -> None:
    tables = {"x": (GB, "west", {"west": "ready"})}
    hardware = {"east": {"H100": 8}, "north": {"H100": 64}, "south": {"H100": 64}}
    plan = plan_on_demand(tables, ["x"], hardware, ["H100"], dict.fromkeys(hardware, (0, 10 * GB)))
    assert plan is not None and plan.region == "north"


def test_storage_quota_and_missing_hardware_rule_regions_out() -> None:
    full = {**ROOM, "east": (999 * GB, 1000 * GB)}  # 1 GB free: b fits, b + c does not
    assert plan_on_demand(TABLES, ["b"], HARDWARE, ["H100", "cpu"], full) is not None
    assert plan_on_demand(TABLES, ["b", "c"], HARDWARE, ["H100", "cpu"], full) is None
    assert plan_on_demand(TABLES, ["a"], HARDWARE, ["V100"], ROOM) is None
    assert plan_on_demand(TABLES, ["nope"], HARDWARE, ["H100"], ROOM) is None
