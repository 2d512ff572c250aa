"""MAST-level policies by name, and a policy registered here steering the control plane.

The registry: every policy is found under its name, an unknown name is
answered with every policy of both families, parameters are validated with
their key path. The interface: toy policies registered by this file (one
routes every auction to one region, one refuses every placement, one
dispatches the queue backwards, one breaks the ordering contract) are run by
the GMS and the RMSs as they are, nothing in actors/ knowing them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pytest
from msgspec import Meta

from actors.mast.system import MastParams, MastSystem
from actors.policies.mast.api import MastDefaults, MastPolicy, Routing, RoutingView
from actors.policies.mast.placement.snapshot import (
    ClusterSnapshot,
    JobRequest,
    Unschedulable,
    WorkloadPlan,
)
from actors.policies.mast.quota import Row
from actors.policies.mast.registry import (
    every_policy,
    mast_policy,
    names,
    register,
    resolve,
    unregister,
)
from emulator.cli.main import main
from emulator.errors import InputError
from emulator.units import H
from tests.support.dsl import job, run, scenario, states, workload
from tests.support.trace import decisions, events_of

MAST_FAMILY = ["federated", "mast", "tetris-v0", "tetris-v1", "tetris-v2"]


# ---- two toy policies, known only to this file ----------------------------------------
class OneRegionParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    region_index: Annotated[int, Meta(ge=0)] = 0


class OneRegion(MastDefaults):
    """Every auction goes to one region: the `region_index`-th of the GMS's list."""

    name = "toy-one-region"
    Params = OneRegionParams

    def route(self, view: RoutingView, state: Any, params: Any) -> tuple[Routing, Any]:
        region = view.regions[params.region_index]
        return (
            Routing(
                targets={e.id: (region,) for e in view.queued},
                notes=tuple(
                    ("toy.route", {"workload": e.id, "region": region}) for e in view.queued
                ),
            ),
            state,
        )


class RefuseAll(MastDefaults):
    """Every region's RMS finds no plan for anything."""

    name = "toy-refuse-all"

    def place(
        self,
        clusters: Sequence[ClusterSnapshot],
        jobs: Sequence[JobRequest],
        now_us: int,
        params: Any,
    ) -> WorkloadPlan | Unschedulable:
        del clusters, jobs, now_us, params
        return Unschedulable(reason="toy refuses", preemption_could_help=True)


class LastFirst(MastDefaults):
    """Dispatches MAST's ranking backwards: the lowest-ranked workload first."""

    name = "toy-last-first"

    def order(self, ranked: Sequence[Row], params: Any) -> Sequence[Row]:
        del params
        return ranked[::-1]


class Drops(MastDefaults):
    """A broken ordering that loses every workload but the first."""

    name = "toy-drops"

    def order(self, ranked: Sequence[Row], params: Any) -> Sequence[Row]:
        del params
        return ranked[:1]


TOYS: tuple[MastPolicy, ...] = (OneRegion(), RefuseAll(), LastFirst(), Drops())


@pytest.fixture
def toys() -> Iterator[None]:
    for toy in TOYS:
        register(toy)
    yield
    for toy in TOYS:
        unregister(toy.name)


# ---- the registry -----------------------------------------------------------------------
def test_every_mast_level_policy_is_registered_under_its_name() -> None:
    assert names() == MAST_FAMILY
    for name in MAST_FAMILY:
        policy, params = resolve(name, {})  # the defaults are valid
        assert policy.name == name and isinstance(params, policy.Params)
        policy.initial_state(params)


@pytest.mark.parametrize(
    ("policy", "tetris", "version", "migration"),
    [
        ("mast", False, "tetris-v2", False),  # the scenario's settings as written
        ("federated", False, "tetris-v2", False),
        ("tetris-v0", True, "tetris-v0", True),  # Tetris on at that version, with its service
        ("tetris-v1", True, "tetris-v1", True),
    ],
)
def test_a_tetris_policy_turns_the_slow_path_on_at_its_version(
    policy: str, tetris: bool, version: str, migration: bool
) -> None:
    settings, service = MastSystem.slow_path(MastParams(policy=policy))
    assert (settings.enabled, settings.policy.version, service.enabled) == (
        tetris,
        version,
        migration,
    )


def test_an_unknown_name_is_answered_with_every_policy_of_both_families() -> None:
    with pytest.raises(KeyError) as caught:
        mast_policy("late-binding")
    message = caught.value.args[0]
    assert "unknown MAST policy 'late-binding'" in message
    assert f"MAST policies: {', '.join(MAST_FAMILY)} " in message
    assert ", ".join(every_policy()["cluster"]) in message
    assert {"tiresias-las", "dally", "shockwave"} <= set(every_policy()["cluster"])


def test_a_second_policy_under_a_taken_name_is_refused() -> None:
    class Impostor(MastDefaults):
        name = "mast"

    with pytest.raises(ValueError, match="registered twice"):
        register(Impostor())
    assert mast_policy("mast").__class__.__name__ == "MastAuction"


@pytest.mark.usefixtures("toys")
@pytest.mark.parametrize(
    ("name", "raw", "key", "fragment"),
    [
        ("federated", {"bogus": 1}, "bogus", "unknown key"),  # federated has no parameters
        ("toy-one-region", {"region_index": -1}, "region_index", ">= 0"),
        ("toy-one-region", {"region_index": "2"}, "region_index", "Expected `int`, got `str`"),
    ],
)
def test_bad_parameters_name_their_key(
    name: str, raw: dict[str, Any], key: str, fragment: str
) -> None:
    with pytest.raises(InputError) as caught:
        resolve(name, raw)
    assert caught.value.path == key and fragment in caught.value.message


@pytest.mark.usefixtures("toys")
def test_parameters_come_back_as_the_policys_struct() -> None:
    _, params = resolve("toy-one-region", {"region_index": 1})
    assert params == OneRegionParams(region_index=1)
    assert resolve("toy-one-region", params)[1] is params  # already validated: passed through


# ---- scenario files: exit 2, file and key path ------------------------------------------------
@pytest.mark.usefixtures("toys")
@pytest.mark.parametrize(
    ("system", "key_path", "fragment"),
    [
        (
            {"policy": "bogus"},
            "system.policy",
            "unknown MAST policy 'bogus'; MAST policies: federated, mast, tetris-v0",
        ),
        # The cluster family's list grows; that it is named as the place to look is the point.
        ({"policy": "tiresias-las"}, "system.policy", 'for [system] kind = "cluster": '),
        ({"policy_params": {"fedrated": {}}}, "system.policy_params.fedrated", "'fedrated'"),
        ({"policy_params": {"federated": {"x": 1}}}, "system.policy_params.federated.x", "unknown"),
        (
            {"policy": "toy-one-region", "policy_params": {"toy-one-region": {"region_index": -1}}},
            "system.policy_params.toy-one-region.region_index",
            ">= 0",
        ),
    ],
)
def test_a_bad_policy_in_a_scenario_exits_2_naming_its_key_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], system: dict, key_path: str, fragment: str
) -> None:
    path = tmp_path / "bad.json"
    raw = {"name": "bad", "duration": "1h", "system": {"kind": "mast", **system}}
    path.write_text(msgspec.json.encode(raw).decode())
    assert main(["run", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: {key_path}: "), err
    assert fragment in err and "Traceback" not in err


def test_compare_refuses_an_unknown_policy_before_running_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compare", "quickstart", "--policies", "bogus,mast"]) == 2
    err = capsys.readouterr().err
    assert "(policy bogus): system.policy: unknown MAST policy 'bogus'" in err
    assert "trace-hash" not in err  # mast was not run either


# ---- the interface: the machinery runs a policy it has never heard of -------------------------
def _data_in_west(policy: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """W needs 8 GPUs (both regions have 32 free) and table t, which only west has."""
    raw = scenario(
        [workload("W", "hi", 0, job(gpus=8, work=H))],
        tables=[{"name": "t", "size_bytes": 1, "home_region": "west"}],
        duration="20m",
    )
    raw["system"]["policy"] = policy
    if params is not None:
        raw["system"]["policy_params"] = {policy: params}
    return raw


def _asked(events: list[Any]) -> set[str]:
    """The regions whose RMS leader was asked to bid, by AuctionOpen deliveries."""
    return {e.dst.split("/")[1] for e in events if e.kind == "deliver" and e.type == "AuctionOpen"}


@pytest.mark.usefixtures("toys")
@pytest.mark.parametrize(
    ("policy", "params", "asked", "state"),
    [
        # MAST asks both regions: east abstains (no data), west bids and runs W.
        ("mast", None, {"east", "west"}, "RUNNING"),
        # The toy asks east only (index 0): W waits for data it will never get there.
        ("toy-one-region", None, {"east"}, "WAITING_DATA"),
        # Its parameter, from the scenario, reaches the GMS: west only, W runs.
        ("toy-one-region", {"region_index": 1}, {"west"}, "RUNNING"),
    ],
)
def test_a_routing_policy_registered_by_a_test_steers_the_gms(
    tmp_path: Path, policy: str, params: dict[str, Any] | None, asked: set[str], state: str
) -> None:
    result, events = run(_data_in_west(policy, params), tmp_path)
    assert result.violations == []
    assert _asked(events) == asked
    assert states(result)["W"][0] == state
    notes = decisions(events, "toy.route")
    if policy == "mast":
        assert notes == []
    else:  # the policy's notes are traced as the GMS's decisions
        assert notes and all(n == {"workload": "W", "region": min(asked)} for n in notes)


@pytest.mark.usefixtures("toys")
def test_a_placement_policy_registered_by_a_test_decides_every_rms_bid(tmp_path: Path) -> None:
    raw = scenario([workload("W", "hi", 0, job(gpus=8, work=H))], duration="20m")
    raw["system"]["policy"] = "toy-refuse-all"
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert _asked(events) == {"east", "west"}  # routing stays MAST's
    assert states(result)["W"][0] == "WAITING"
    assert decisions(events, "auction.award") == []
    reasons = {r for d in decisions(events, "auction.none") for r in d["reasons"]}
    assert reasons <= {"unschedulable", "negative_cache"} and "unschedulable" in reasons


def _one_slot_for_two() -> dict[str, Any]:
    """One region of 32 GPUs; "hi" (priority 1) and "lo" (priority 5) each want all of it."""
    return scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=H)),
            workload("P", "hi", 0, job(gpus=32, work=H)),
        ],
        regions=("east",),
        duration="20m",
    )


@pytest.mark.usefixtures("toys")
@pytest.mark.parametrize(
    ("policy", "awarded"),
    [
        # MAST ranks P (priority 1) before L (priority 5): P takes the region, L waits.
        ("mast", ["P"]),
        # Dispatched backwards, L is auctioned and awarded first; P's auction then
        # wins by preempting L (a higher priority), so both are awarded, L first.
        ("toy-last-first", ["L", "P"]),
    ],
)
def test_an_ordering_policy_registered_by_a_test_sets_the_dispatch_order(
    tmp_path: Path, policy: str, awarded: list[str]
) -> None:
    raw = _one_slot_for_two()
    raw["system"]["policy"] = policy
    result, events = run(raw, tmp_path)
    assert result.violations == []
    awards = [d["workload"] for d in decisions(events, "auction.award")]
    assert awards[: len(awarded)] == awarded
    assert states(result)["P"][0] == "RUNNING"


@pytest.mark.usefixtures("toys")
def test_an_ordering_that_is_not_a_permutation_crashes_the_gms_and_loses_nothing(
    tmp_path: Path,
) -> None:
    raw = _one_slot_for_two()
    raw["system"]["policy"] = "toy-drops"
    result, events = run(raw, tmp_path, errors_expected=True)
    # A policy breaking its contract is a bug: the run fails, naming it.
    assert result.status == "error"
    assert {e.error for e in result.actor_errors} == {"PolicyContractError"}
    crashes = [e.reason for e in events_of(events, "crash")]
    assert crashes and all(
        "'toy-drops': order() must return a permutation of the ranked workloads" in c
        for c in crashes
    )
    # Every pass stops before its first auction: both workloads wait in the queue.
    assert decisions(events, "auction.award") == []
    assert {w: s[0] for w, s in states(result).items()} == {"L": "PENDING", "P": "PENDING"}
