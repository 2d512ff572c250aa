"""`mastemu policies`: what a scenario's `[system] policy` may name, per system kind."""

from __future__ import annotations

import json

import pytest

from actors.policies.cluster import registry as cluster_registry
from actors.policies.mast import registry as mast_registry
from actors.policies.mast.api import MastDefaults
from emulator.cli.main import main


class _Toy(MastDefaults):
    name = "toy-listed"


def test_policies_lists_both_families_from_their_registries(
    capsys: pytest.CaptureFixture[str],
) -> None:
    toy = mast_registry.register(_Toy())
    try:
        assert main(["policies", "--json"]) == 0
    finally:
        mast_registry.unregister(toy.name)
    listed = json.loads(capsys.readouterr().out)
    assert listed["cluster"] == cluster_registry.names()
    assert {"mast", "federated", "toy-listed"} <= set(listed["mast"])
    assert {"tiresias-las", "dally", "shockwave"} <= set(listed["cluster"])


def test_policies_prints_one_line_per_system_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies"]) == 0
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert "fifo" in lines["cluster"] and "federated" in lines["mast"]
