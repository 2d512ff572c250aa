"""`meta-week` is `meta-day` for seven days: `bench week` must measure the same preset.

It once ran at another arrival rate and without pipelined auctions, and its
week was reported as meta-day's.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import scenarios

SCENARIOS = Path(scenarios.__file__).resolve().parent


def _load(name: str) -> dict:
    return tomllib.loads((SCENARIOS / f"{name}.toml").read_text(encoding="utf-8"))


def test_meta_week_runs_meta_days_settings_for_seven_days() -> None:
    day, week = _load("meta-day"), _load("meta-week")
    assert (week["system"], week["invariants"], week["seed"]) == (
        day["system"],
        day["invariants"],
        day["seed"],
    )
    assert (day["duration"], week["duration"]) == ("24h", "7d")
