"""What a start counts on (`claims_for`) and what its plan waits for (`plan_victims`).

The host: 8 GPUs, 7 of them held by a running job R. V was preempted and
stops (it saves a checkpoint); J's dispatch counted on V's GPU, and J was
preempted in turn before its CM's answer came: J stands in for V there
(`stand_in`). At the CM, that GPU is V's until V has stopped, and J's only
once J starts, so a start on it must wait for both.
"""

from __future__ import annotations

import pytest

from actors.cluster.jobs import JobAccount, claims_for, hand_over, plan_victims
from actors.common.messages import Pace
from emulator.errors import ComponentBug

HOST = "h"
GPUS = {HOST: 8}
PACE = Pace(slowdown=1.0, mode="static", checkpoint_us=1_000, restore_us=0, overhead_us=0)


def account(job_id: str, state: str, n: int, **kw: object) -> JobAccount:
    return JobAccount(
        job_id=job_id,
        state=state,
        placement=((HOST, n),),
        pace=PACE,
        **kw,  # type: ignore[arg-type]
    )


def world(v_state: str = "stopping") -> dict[str, JobAccount]:
    return {
        "R": account("R", "running", 7, begin_us=0),
        "V": account("V", v_state, 1, begin_us=0, stop_us=100),
        "J": account("J", "stopping", 1, begin_us=200, stop_us=200, stand_in=(("V", HOST, 1),)),
    }


def test_a_start_on_a_stand_in_waits_for_it_and_for_its_victim() -> None:
    accounts = world()
    claims, _ = claims_for(accounts, ((HOST, 1),), 300, GPUS)
    assert claims == (("J", HOST, 1),)  # V's GPU is J's to take: not free twice
    assert plan_victims(accounts, claims) == ("J", "V")


def test_the_stand_in_frees_its_gpu_no_earlier_than_its_victim() -> None:
    accounts = world()
    _, begins = claims_for(accounts, ((HOST, 1),), 300, GPUS)
    assert begins == 100 + PACE.checkpoint_us  # V's checkpoint, though J stopped at once


def test_two_starts_cannot_count_on_one_gpu() -> None:
    # The policy sees one GPU free (V and J stopping); a second start finds none.
    accounts = world()
    claims, _ = claims_for(accounts, ((HOST, 1),), 300, GPUS)
    accounts["X"] = account("X", "dispatching", 1, claims=claims)
    with pytest.raises(ComponentBug, match="nobody frees"):
        claims_for(accounts, ((HOST, 1),), 300, GPUS)


def test_once_its_victim_has_stopped_the_stand_in_alone_holds_the_gpu() -> None:
    accounts = world(v_state="waiting")
    accounts["V"].placement, accounts["V"].begin_us = (), None
    claims, begins = claims_for(accounts, ((HOST, 1),), 300, GPUS)
    assert claims == (("J", HOST, 1),) and begins == 300
    assert plan_victims(accounts, claims) == ("J",)


@pytest.mark.parametrize(
    ("chain", "victims"),
    [
        ({}, ()),
        ({"A": ()}, ("A",)),
        ({"A": ("B",), "B": ()}, ("A", "B")),
        ({"A": ("B",), "B": ("C",), "C": ()}, ("A", "B", "C")),
        ({"A": ("B",), "B": ("A",)}, ("A", "B")),  # a cycle ends
        ({"A": ("gone",)}, ("A",)),  # a victim no longer stopping is no victim
    ],
)
def test_plan_victims_follow_stand_ins(
    chain: dict[str, tuple[str, ...]], victims: tuple[str, ...]
) -> None:
    accounts = {
        v: account(
            v, "stopping", 1, begin_us=0, stop_us=0, stand_in=tuple((w, HOST, 1) for w in ws)
        )
        for v, ws in chain.items()
    }
    accounts["gone"] = account("gone", "waiting", 0)
    claims = tuple((v, HOST, 1) for v in chain)[:1]
    assert plan_victims(accounts, claims) == victims


@pytest.mark.parametrize("field", ["claims", "stand_in"])
@pytest.mark.parametrize(
    ("v_state", "after"),
    [
        ("stopping", (("V", HOST, 1),)),  # J stood in for V, still stopping: V's GPU now
        ("waiting", ()),  # V has stopped: the GPU J took is free once J's run ends
    ],
)
def test_a_runs_end_hands_what_others_counted_on_over(
    field: str, v_state: str, after: tuple[tuple[str, str, int], ...]
) -> None:
    # X counts on J's GPU: a start about to begin (`claims`), or one begun (`stand_in`).
    accounts = world()
    accounts["V"].state = v_state
    accounts["X"] = account("X", "dispatching", 1, **{field: (("J", HOST, 1),)})
    changed = hand_over(accounts, accounts["J"], 500)
    assert getattr(accounts["X"], field) == after
    assert [b.job_id for b in changed] == ["X"]  # to be saved; R and V untouched


@pytest.mark.parametrize(
    ("v_state", "begins"),
    [
        # J stood in for V, which stops at 100 and checkpoints for 1 ms: X waits for V now.
        ("stopping", 1_100),
        ("waiting", 500),  # V has stopped too: X's start begins as J's run ends
    ],
)
def test_a_start_whose_claims_were_handed_over_begins_when_its_victims_have_stopped(
    v_state: str, begins: int
) -> None:
    # X was to begin once J had checkpointed (at 1,200); J's run ends at 500.
    accounts = world()
    accounts["V"].state = v_state
    accounts["X"] = account("X", "dispatching", 1, claims=(("J", HOST, 1),), begins_us=1_200)
    hand_over(accounts, accounts["J"], 500)
    assert accounts["X"].begins_us == begins
