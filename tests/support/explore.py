"""Searches of `explore` over a zoo bug's witness with its faults removed."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from actors.mast.zoo import witness_path
from emulator.run.explore import Budget, explore
from emulator.run.explore.results import ExploreResult
from emulator.run.explore.search import Explorer


def calm_witness(
    tmp_path: Path, bug: str, bugs: list[str], duration: str | None = None, **system: Any
) -> Path:
    """`bug`'s witness without its faults, with `bugs` on and `system` keys set.

    `duration` cuts the run short (a search's cost is its runs' length).
    """
    raw = json.loads(witness_path(bug).read_text())
    raw["faults"] = []
    if duration is not None:
        raw["duration"] = duration
    raw["bugs"] = bugs
    raw["system"].update(system)
    path = tmp_path / "calm.json"
    path.write_text(json.dumps(raw))
    return path


def one_run_explorer(path: Path, tmp_path: Path, seed: int = 1) -> Explorer:
    """An explorer of `path` (a budget of one run) to read its fault space and arms."""
    return Explorer(
        str(path), seed=seed, budget=Budget(runs=1), out_dir=tmp_path / "ex", log=io.StringIO()
    )


def search(path: Path, out_dir: Path, seed: int, runs: int, first: bool = False) -> ExploreResult:
    """`explore` of `path` for `runs` runs (stopping at its first failure if `first`)."""
    return explore(
        str(path), seed=seed, budget=Budget(runs=runs), out_dir=out_dir,
        log=io.StringIO(), stop_at_first=first,
    )  # fmt: skip
