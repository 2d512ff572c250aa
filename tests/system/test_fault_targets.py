"""faults: role-relative targets, resolved when the fault fires, and their validation.

`leader of ROLE`, `a follower of ROLE`, `a minority of ROLE`, `all of ROLE`,
`region NAME`, `a live KIND` (crash, restart, pause) and `region NAME` as a
node (down, up).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulator.actor import Actor
from emulator.errors import InputError
from emulator.registry import builtin_scenarios
from emulator.run.faults import FaultInjector
from emulator.run.runner import plan_run
from emulator.run.scenario import convert_scenario, decode_scenario, load_scenario_file
from emulator.units import MIN
from tests.support.dsl import job, run, scenario, states, workload
from tests.support.harness import make_kernel, spawn
from tests.support.report import report_of
from tests.support.trace import leaders


class Idle(Actor):
    """Does nothing."""


class RoleParams(msgspec.Struct, frozen=True):
    role: str


def fleet(n: int, leader: str | None = "svc/1") -> FaultInjector:
    """n instances svc/0… on east's control hosts, an actor naming `svc` in its
    params (not an instance), a non-instance `svc/x` and `svc/0/db` on a machine;
    `leader` holds svc's lease."""
    k = make_kernel()
    for i in range(n):
        spawn(k, Idle, f"svc/{i}", f"east/ctl{i % 2}")
    spawn(k, Idle, "client", "west/ctl0", RoleParams("svc"))
    spawn(k, Idle, "svc/x", "west/ctl1")
    spawn(k, Idle, "svc/0/db", "east/dc0/fd0/r0/m0")
    asyncio.run(k.run(1))
    k.leader_of = lambda role: leader if role == "svc" else None  # type: ignore[method-assign]
    return FaultInjector(k)


def test_the_instances_of_a_role_are_its_numbered_addresses() -> None:
    assert fleet(3).instances("svc") == ["svc/0", "svc/1", "svc/2"]
    assert fleet(3).instances("svc/0") == []


@pytest.mark.parametrize(
    ("n", "size"),
    # floor((n − 1) / 2), at least one: the rest are always a majority of n.
    [(0, 0), (1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (6, 2), (7, 3)],
)
def test_a_minority_is_the_most_a_majority_survives_and_at_least_one(n: int, size: int) -> None:
    injector = fleet(n)
    picked = injector.resolve("a minority of svc")
    assert len(picked) == size and set(picked) <= set(injector.instances("svc"))


def test_a_follower_is_up_and_never_the_leader_and_a_seed_picks_the_same_one() -> None:
    picks = {fleet(4).resolve("a follower of svc")[0] for _ in range(3)}
    assert len(picks) == 1 and picks <= {"svc/0", "svc/2", "svc/3"}
    injector = fleet(4)
    seen = set()
    for _ in range(40):
        (pick,) = injector.resolve("a follower of svc")
        seen.add(pick)
    assert seen == {"svc/0", "svc/2", "svc/3"}  # every follower, never svc/1
    for address in ("svc/0", "svc/2", "svc/3"):
        injector.kernel.crash(address, "test")
    assert injector.resolve("a follower of svc") == []  # nobody up but the leader


def test_all_of_a_role_and_the_leader_and_a_region_s_control_plane() -> None:
    injector = fleet(3)
    assert injector.resolve("all of svc") == ["svc/0", "svc/1", "svc/2"]
    assert injector.resolve("leader of svc") == ["svc/1"]
    assert injector.resolve("leader of other") == []
    # Control hosts only: svc/0/db runs on one of east's machines.
    assert injector.resolve("region east") == ["svc/0", "svc/1", "svc/2"]
    assert injector.resolve("region west") == ["client", "svc/x"]


class Worker(Actor):
    kind = "test-worker"


def test_a_live_kind_is_one_actor_of_that_kind_that_is_up_also_one_spawned_late() -> None:
    injector = fleet(2)
    k = injector.kernel
    for i in range(3):
        spawn(k, Worker, f"job/{i}", "west/ctl0", at_us=k.now_us)
    asyncio.run(k.run(2))
    k.crash("job/1", "test")
    seen = {pick for _ in range(40) for pick in injector.resolve("a live test-worker")}
    assert seen == {"job/0", "job/2"}  # never the crashed one, nor an actor of another kind
    k.crash("job/0", "test")
    k.crash("job/2", "test")
    assert injector.resolve("a live test-worker") == []
    spawn(k, Worker, "job/late", "west/ctl1", at_us=k.now_us)  # spawned while the run goes on
    asyncio.run(k.run(k.now_us + 1))
    assert injector.resolve("a live test-worker") == ["job/late"]


# ---- in a MAST run ---------------------------------------------------------------------------
def story(*faults: dict[str, Any], duration: str = "2h") -> dict[str, Any]:
    raw = scenario(
        [
            workload("A", "lo", 0, job(gpus=16, work=40 * MIN)),
            workload("B", "hi", 10 * MIN, job(gpus=16, work=40 * MIN)),
        ],
        duration=duration,
    )
    raw["faults"] = list(faults)
    return raw


def crashes(events: list[Any]) -> list[tuple[float, str]]:
    return [(e.t_us / MIN, e.dst) for e in events if e.kind == "crash"]


def test_mast_a_minority_of_cms_and_a_follower_of_the_gms_leave_every_leader_alone(
    tmp_path: Path,
) -> None:
    raw = story(
        {"action": "crash", "at": "15m", "target": "a minority of cm/east/c0"},
        {"action": "crash", "at": "16m", "target": "a follower of gms", "restart_after": "5m"},
        {"action": "pause", "at": "17m", "target": "a follower of rms/west", "duration": "1m"},
    )
    result, events = run(raw, tmp_path)
    assert result.violations == []
    down = crashes(events)
    assert [t for t, _ in down] == [15.0, 16.0]
    assert down[0][1].startswith("cm/east/c0/") and down[1][1] == "gms/1"
    assert [e.dst for e in events if e.kind == "pause"] == ["rms/west/1"]
    # A crashed CM follower, or the leader itself (then a follower leads): one of 3 either way.
    for role in ("gms", "rms/west"):
        assert len(leaders(events, role)) == 1
    assert states(result) == {"A": ("DONE", 0), "B": ("DONE", 0)}
    # One window per actor's fault for the report to shade, each ending when that
    # actor's fault ends: the CM crash without restart lasts to the end of the run.
    windows = report_of(result.out)["fault_windows"]
    assert windows == [
        [900.0, 7200.0, "crash"],
        [960.0, 1260.0, "crash"],
        [1020.0, 1080.0, "pause"],
    ]


def test_mast_all_of_an_rms_role_down_leaves_it_leaderless_until_one_restarts(
    tmp_path: Path,
) -> None:
    raw = story({"action": "crash", "at": "5m", "target": "all of rms/east", "restart_after": "3m"})
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert crashes(events) == [(5.0, "rms/east/0"), (5.0, "rms/east/1")]
    claims = leaders(events, "rms/east")
    assert [epoch for _, _, epoch in claims] == [1, 2]
    assert claims[1][0] >= 8 * MIN  # nobody could lead before the restarts
    assert states(result) == {"A": ("DONE", 0), "B": ("DONE", 0)}


def test_mast_a_region_target_crashes_its_control_plane_and_a_region_node_its_machines(
    tmp_path: Path,
) -> None:
    raw = story(
        {"action": "crash", "at": "5m", "target": "region west", "restart_after": "2m"},
        {"action": "down", "at": "1h", "node": "region east", "duration": "10m"},
        duration="3h",
    )
    result, events = run(raw, tmp_path)
    assert result.violations == []
    at_5m = [a for t, a in crashes(events) if t == 5.0]
    assert at_5m == [
        "cm/west/c0/0",
        "cm/west/c0/1",
        "cm/west/c0/2",
        "gms/1",
        "rms/west/0",
        "rms/west/1",
    ]
    # East's outage takes every actor there down, and the GMS fails over to west.
    at_1h = {a for t, a in crashes(events) if t == 60.0}
    assert at_1h >= {"gms/0", "client", "rms/east/0", "rms/east/1", "cm/east/c0/0"}
    assert [(src, epoch) for _, src, epoch in leaders(events, "gms")] == [
        ("gms/0", 1),
        ("gms/1", 2),
    ]
    downs = [
        (e.t_us / MIN, e.dst, e.type)
        for e in events
        if e.kind == "fault" and e.type in ("down", "up")
    ]
    assert downs == [(60.0, "east", "down"), (70.0, "east", "up")]
    assert all(s[0] == "DONE" for s in states(result).values())


# ---- validation ---------------------------------------------------------------------------------
def plan(raw: dict[str, Any]) -> None:
    text = msgspec.json.encode(raw).decode()
    plan_run(convert_scenario(raw, "story.toml"), text, "story.toml")


@pytest.mark.parametrize(
    ("fault", "path", "message"),
    [
        (
            {"action": "crash", "target": "a follower of gsm"},
            "faults[0].target",
            "unknown role 'gsm'",
        ),
        (
            {"action": "pause", "target": "leader of nobody", "duration": "1s"},
            "faults[0].target",
            "unknown role 'nobody'",
        ),
        (
            {"action": "crash", "target": "all of cm/east"},
            "faults[0].target",
            "unknown role 'cm/east'",
        ),
        (
            {"action": "restart", "target": "region mars"},
            "faults[0].target",
            "unknown region 'mars'",
        ),
        ({"action": "crash", "target": "gms/7"}, "faults[0].target", "'a minority of ROLE'"),
        (
            {"action": "crash", "target": "a live job-agnet"},
            "faults[0].target",
            "unknown actor kind 'job-agnet' (kinds: ",
        ),
        ({"action": "down", "node": "region mars"}, "faults[0].node", "unknown region 'mars'"),
        (
            {"action": "up", "node": "region east/dc0"},
            "faults[0].node",
            "unknown region 'east/dc0'",
        ),
    ],
)
def test_a_bad_target_names_its_key_path(fault: dict[str, Any], path: str, message: str) -> None:
    raw = story({"at": "1m", **fault})
    with pytest.raises(InputError) as caught:
        plan(raw)
    assert caught.value.path == path and message in str(caught.value)


def test_a_role_named_only_in_params_takes_only_the_leader_form(tmp_path: Path) -> None:
    path = builtin_scenarios()["leader-lease"]
    text = path.read_text()
    decode_scenario(text, str(path))  # `leader of demo/leader`: its candidates say so
    bad = tmp_path / "lease.toml"
    bad.write_text(
        text.replace('target = "leader of demo/leader"', 'target = "a follower of demo/leader"', 1)
    )
    with pytest.raises(InputError) as caught:
        load_scenario_file(bad)
    assert caught.value.path == "faults[0].target"
    assert "no instances addressed 'demo/leader/N'" in str(caught.value)


def test_every_target_form_of_a_mast_system_is_accepted() -> None:
    targets = [
        "leader of gms",
        "a follower of rms/east",
        "a minority of cm/west/c0",
        "all of gms",
        "region west",
        "cm/east/c0/2",
        "a live job-agent",
    ]
    raw = story(
        *({"action": "crash", "at": f"{i + 1}m", "target": t} for i, t in enumerate(targets))
    )
    raw["faults"].append({"action": "down", "at": "1h", "node": "region east", "duration": "1m"})
    plan(raw)  # no InputError
