"""An RMS's negative cache under pipelined bids: a failure found while a bid held
machines must not outlive that hold when it ends without a dispatch.

Three workloads of one tenant arrive together, two auctions in flight. A (32
GPUs, a region's all) can run in both regions; east's machines sit one per
rack, so west's plan (one rack) wins it. B and C (32 GPUs each) have their data
in east only. While east holds its GPUs for its bid on A, B cannot be placed
there: a failure found under a hold. A goes to west and east gives its hold
back; C's auction opens after that, in the same pass, and east has its 32 GPUs
again. The network's jitter orders what reaches east: seed 4 brings it the
scan's start, then A's auction before B's, then A's release before C's auction
(on other seeds B may come first, or C before the release, and then caching
C's failure is right). An RMS that kept B's failure would answer C from its
cache and leave it for the next pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.policies.mast import negative_cache
from tests.support.dsl import job, run, scenario, workload
from tests.support.trace import decisions

SEED = 4


def _holds_then_frees() -> dict[str, Any]:
    raw = scenario(
        [
            workload("A", "hi", 0, job(gpus=32, tables=("t",))),
            workload("B", "hi", 1_000_000, job(gpus=32, tables=("u",))),
            workload("C", "hi", 2_000_000, job(gpus=32, tables=("u",))),
        ],
        tables=[
            {"name": "t", "size_bytes": 1, "home_region": "east", "replicas": ["west"]},
            {"name": "u", "size_bytes": 1, "home_region": "east", "replicas": []},
        ],
        duration="10m",
    )
    raw["system"]["world_model"]["regions"][0]["machines_per_rack"] = 1
    raw["system"]["auction"] = {"pipeline": 2, "hold_ttl": "30s"}
    raw["system"]["scan_interval"] = "5m"
    return raw


def _first_outcome(events: list[Any], workload_id: str) -> tuple[str, list[str]]:
    """How the workload's first auction ended: (award region or "none", abstain reasons)."""
    for event in events:
        if event.kind != "decision" or event.payload.get("workload") != workload_id:
            continue
        if event.type == "auction.award":
            return event.payload["winner"], []
        if event.type == "auction.none":
            return "none", event.payload["reasons"]
    raise AssertionError(f"{workload_id} was never auctioned")


def test_a_failure_found_under_a_hold_ends_with_the_hold(tmp_path: Path) -> None:
    result, events = run(_holds_then_frees(), tmp_path, SEED)
    assert result.violations == []
    east = [h["workload"] for h in decisions(events, "rms.hold") if h["region"] == "east"]
    assert east[:1] == ["A"]  # the story's premise: east held A's machines first
    assert _first_outcome(events, "A")[0] == "west"
    assert _first_outcome(events, "B") == ("none", ["no_data", "unschedulable"])
    assert _first_outcome(events, "C")[0] == "east"  # in the first pass, after A's hold ended


def test_an_rms_that_keeps_failures_found_under_holds_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(negative_cache, "forget_held", lambda cache: cache)
    _, events = run(_holds_then_frees(), tmp_path, SEED)
    assert _first_outcome(events, "C") == ("none", ["negative_cache", "no_data"])


def test_an_auction_opened_twice_by_a_duplicating_link_gets_one_bid_and_one_hold(
    tmp_path: Path,
) -> None:
    # Every message is delivered twice, and a region has room for two plans of A.
    # An RMS that planned again for the second AuctionOpen put a second plan under
    # the first's hold keys: the award ended one hold, and the other kept its
    # machines from every later bid for good (a workload that fit never ran).
    raw = scenario([workload("A", "hi", 0, job(gpus=16))], duration="10m")
    raw["system"]["auction"] = {"pipeline": 2, "hold_ttl": "30s"}
    raw["faults"] = [{"action": "duplicate", "at": "0s", "duration": "10m", "probability": 1.0}]
    result, events = run(raw, tmp_path, SEED)
    assert result.violations == [] and result.actor_errors == []
    holds = [(h["region"], h["auction"]) for h in decisions(events, "rms.hold")]
    assert holds and len(holds) == len(set(holds))
    ends = [(u["region"], u["auction"]) for u in decisions(events, "rms.unhold")]
    assert sorted(ends) == sorted(holds)  # every hold ended, once
