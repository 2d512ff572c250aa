"""Cluster policies by name: every policy docs/design.md §6 names (but MAST's own) is registered."""

from __future__ import annotations

import pytest

from actors.policies.cluster.registry import cluster_policy, names, register

NAMED = {
    "tiresias-las",
    "tiresias-gittins",
    "dally",
    "shockwave",
    "fifo",
    "best-effort",
    "srtf",
    "gandiva",
    "gavel-maxmin",
    "themis",
    # Shockwave §8.2's other baselines.
    "ossp",
    "mst",
    "allox",
    "gandiva-fair",
}


def test_every_named_policy_is_registered_under_its_name() -> None:
    assert set(names()) == NAMED
    for name in NAMED:
        policy = cluster_policy(name)
        assert policy.name == name
        policy.initial_state(policy.Params())  # defaults are valid


def test_an_unknown_name_lists_the_known_ones_and_a_second_policy_is_refused() -> None:
    with pytest.raises(KeyError, match="known: allox, best-effort, dally"):
        cluster_policy("yarn")

    class Impostor:
        name = "fifo"

    with pytest.raises(ValueError, match="registered twice"):
        register(Impostor())  # type: ignore[arg-type]
