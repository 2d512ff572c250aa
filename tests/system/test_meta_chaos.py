"""`meta-chaos`: chaos's nemesis on MAST's fleet (meta-day's settings), not on the small world.

Faults at this scale reach what the small world's three regions cannot (the
RMS placement bug of issue 16 showed only here). Each seed takes about half a
minute; the slow run sweeps two, in parallel, and asks for what a campaign
asks of every seed: no violation, no actor dead on its own bug, no work
stalled after the final heal, and the faults reached the control plane.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from emulator.registry import builtin_scenarios
from tests.support.cli import run_cli


def _load(name: str) -> dict[str, Any]:
    return tomllib.loads(builtin_scenarios()[name].read_text(encoding="utf-8"))


def test_meta_chaos_runs_meta_days_fleet_and_settings_under_a_nemesis() -> None:
    day, chaos = _load("meta-day"), _load("meta-chaos")
    assert (chaos["system"], chaos["invariants"]) == (day["system"], day["invariants"])
    nemesis = chaos["nemesis"]
    assert nemesis["enabled"] and set(nemesis["actions"]) == set(
        _load("chaos")["nemesis"]["actions"]
    )


@pytest.mark.slow
def test_two_seeds_of_meta_chaos_are_clean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_cli(
        capsys,
        "sweep",
        "meta-chaos",
        "--seeds",
        "1-2",
        "--jobs",
        "2",
        "--keep-dir",
        str(tmp_path),
        "--json",
    )
    report = json.loads(out)
    assert report["failures"] == [] and (code, report["seeds"]) == (0, 2), report["failures"]
    reached = {name for name, seen in report["sometimes"].items() if seen["runs"]}
    assert {"leader-failover", "leader-lost-lease"} <= reached
