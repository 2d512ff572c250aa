"""The `mastemu.plugins` entry point: what this package adds to mastemu."""

from __future__ import annotations

from pathlib import Path

from actors.extend import register_checker, register_cluster_policy, register_scenario_dir
from smallest_first.checks import SmallestFirstOrder
from smallest_first.policy import SmallestFirst


def register() -> None:
    register_cluster_policy(SmallestFirst())
    register_checker(SmallestFirstOrder.name, SmallestFirstOrder)
    register_scenario_dir(Path(__file__).parent / "scenarios")
