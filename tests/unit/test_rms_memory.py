"""What an RMS remembers (`actors/mast/dispatches.py`): the attempts an award supersedes.

`superseded` is a direct lookup; `remembered` lists every attempt. On generated
memories both must name the same earlier auctions of a workload, in order.
"""

from __future__ import annotations

import random

import pytest

from actors.mast.dispatches import Dispatch, Live, remembered, superseded
from actors.policies.mast.placement.snapshot import WorkloadPlan

WORKLOADS = ("w0", "w1", "w2", "w3")


def plan(workload: str) -> WorkloadPlan:
    return WorkloadPlan(workload_id=workload, jobs=(), score=0.0)


def memory(rng: random.Random) -> tuple[dict[str, Live], dict[int, Dispatch]]:
    auctions = rng.sample(range(1, 40), 12)
    live = {w: Live(auctions.pop(), {}) for w in WORKLOADS if rng.random() < 0.6}
    dispatching = {
        auctions.pop(): Dispatch(w := rng.choice(WORKLOADS), plan(w), {})
        for _ in range(rng.randrange(6))
    }
    return live, dispatching


@pytest.mark.parametrize("seed", range(200))
def test_superseded_names_the_earlier_attempts_remembered_in_auction_order(seed: int) -> None:
    rng = random.Random(seed)
    live, dispatching = memory(rng)
    workload = rng.choice(WORKLOADS)
    awarded = rng.randrange(1, 45)
    oracle = [a for w, a in remembered(live, dispatching) if w == workload and a < awarded]
    assert superseded(workload, awarded, live, dispatching) == oracle


def test_an_award_supersedes_only_earlier_auctions_of_its_own_workload() -> None:
    live = {"w": Live(5, {}), "v": Live(2, {})}
    dispatching = {
        3: Dispatch("w", plan("w"), {}),
        9: Dispatch("w", plan("w"), {}),
        1: Dispatch("v", plan("v"), {}),
    }
    assert superseded("w", 7, live, dispatching) == [3, 5]
    assert superseded("w", 4, live, dispatching) == [3]
    assert superseded("v", 7, live, dispatching) == [1, 2]
    assert superseded("x", 7, live, dispatching) == []
