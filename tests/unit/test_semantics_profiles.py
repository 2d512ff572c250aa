"""Peer profiles: `[system.semantics] profile = …` presets switches, an explicit switch wins.

A table of what each profile sets (actors/cluster/semantics.py PROFILES,
the README's cluster section), what is left at mastemu's defaults, and how
a bad value is reported (its key path, exit 2).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from actors.cluster.semantics import DEFAULTS, PROFILES, Semantics
from actors.cluster.system import ClusterParams, cluster_shape
from actors.policies.registry import convert_params
from emulator.errors import InputError

TIRESIAS_SIM = {
    "scheduling": "event",
    "preemption_cost": False,
    "comm_model": False,
    "placement": "count",
    "gittins": "tiresias-sim",
    "equal_rank": "reallocate",
    "srtf_remaining": "held",
    "percentiles": "nearest-rank",
}
GAVEL_SIM = {
    "scheduling": "round",
    "round_s": 120.0,
    "preemption_cost": False,
    "comm_model": False,
    "restart_overhead_s": 20.0,
    "batch_size": "trace",
    "ftf_contention": "trace",
    "one_gpu_servers": True,
}


@pytest.mark.parametrize(
    ("profile", "preset"), [("none", {}), ("tiresias-sim", TIRESIAS_SIM), ("gavel-sim", GAVEL_SIM)]
)
def test_a_profile_presets_its_switches_and_leaves_the_rest_at_the_defaults(
    profile: str, preset: dict[str, Any]
):
    sem = Semantics(profile=profile)  # type: ignore[arg-type]
    for name, default in DEFAULTS.items():
        assert getattr(sem, name) == preset.get(name, default), name
    assert PROFILES[profile] == preset


def test_an_explicit_switch_in_the_same_table_wins():
    raw = {"profile": "tiresias-sim", "comm_model": True, "percentiles": "linear"}
    sem = msgspec.convert(raw, Semantics)
    assert (sem.comm_model, sem.percentiles) == (True, "linear")
    assert (sem.placement, sem.gittins) == ("count", "tiresias-sim")  # still the profile's
    assert sem.from_profile()["comm_model"] is False
    assert sem.from_profile()["placement"] is True


def test_the_resolved_semantics_round_trip_as_recorded():
    # The run records the resolved values; reading them back gives the same.
    sem = Semantics(profile="gavel-sim", round_s=60)
    again = msgspec.convert(msgspec.to_builtins(sem), Semantics)
    assert again == sem and again.round_s == 60 and again.restart_overhead_s == 20


@pytest.mark.parametrize(
    ("semantics", "path"),
    [
        ({"profile": "yarn-sim"}, "semantics.profile"),
        ({"placement": "anywhere"}, "semantics.placement"),
        ({"gittins": "tiresias"}, "semantics.gittins"),
        ({"restart_overhead_s": -1}, "semantics"),
        ({"round_s": 0}, "semantics"),
        ({"one_gpu_server": True}, "semantics.one_gpu_server"),
    ],
)
def test_a_bad_switch_is_named_by_its_key_path(semantics: dict[str, Any], path: str):
    with pytest.raises(InputError) as error:
        convert_params(ClusterParams, {"semantics": semantics})
    assert error.value.path.startswith(path)


@pytest.mark.parametrize(
    ("machines", "gpus", "per_rack", "one_gpu", "shape"),
    [
        # 8 four-GPU machines, 8 per rack: as configured, or 32 one-GPU servers
        # in a rack of 32 (a rack keeps its GPUs).
        (8, 4, 8, False, (8, 4, 8)),
        (8, 4, 8, True, (32, 1, 32)),
        (15, 4, 4, True, (60, 1, 16)),
    ],
)
def test_one_gpu_servers_split_the_machines(
    machines: int, gpus: int, per_rack: int, one_gpu: bool, shape: tuple[int, int, int]
):
    params = ClusterParams(
        machines=machines,
        gpus_per_machine=gpus,
        machines_per_rack=per_rack,
        semantics=Semantics(one_gpu_servers=one_gpu),
    )
    assert cluster_shape(params) == shape
    assert shape[0] * shape[1] == params.gpus
