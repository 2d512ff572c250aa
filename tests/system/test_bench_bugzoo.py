"""bench bugzoo: random seeds and explore against a seeded bug, CPU seconds to a failure."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from actors.mast.bench.bugzoo import first_seed, paired_scenario, search_scenario
from emulator.bugs import BUGS
from emulator.registry import load_plugins
from emulator.run.explore import Budget, explore
from emulator.run.explore.grid import GridSpec
from emulator.run.sweep import run_seed
from tests.support.cli import run_cli

load_plugins()


def test_every_search_finds_a_shallow_bug_and_the_json_has_the_issue_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_cli(
        capsys, "bench", "bugzoo", "--bugs", "gms-quota-ignores-running", "--budget-s", "20",
        "--repetitions", "1", "--json",
    )  # fmt: skip
    report = json.loads(out)
    (row,) = report["bugs"]
    assert row["name"] == "gms-quota-ignores-running" and row["depth"] == "shallow"
    assert row["random_found"] == row["explore_found"] == row["grid_found"] == 1
    assert all(0 < row[f"{search}_s"] < 20 for search in ("random", "explore", "grid"))
    assert report["random"]["found"] == report["explore"]["found"] == report["grid"]["found"] == 1
    # Rounded to hundredths: a ratio of 0.245 is reported as 0.25.
    ratio = row["random_s"] / row["explore_s"]
    assert report["speedup_median"] == pytest.approx(ratio, abs=0.0051)
    assert code == 0


def test_an_unknown_bug_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "bench", "bugzoo", "--bugs", "no-such-bug", "--json")
    assert code == 2 and "unknown bug 'no-such-bug'" in err


@pytest.mark.parametrize("grid", [None, GridSpec()], ids=["guided", "grid"])
def test_explore_s_base_run_is_the_random_search_s_first_seed(
    tmp_path: Path, grid: GridSpec | None
) -> None:
    # Paired draws: a shallow bug the first random seed catches is caught by
    # explore's base run (guided or grid), the same run, so it costs every search alike.
    bug = BUGS["gms-quota-ignores-running"]
    path = tmp_path / "zoo.json"
    path.write_text(json.dumps(search_scenario(bug)), encoding="utf-8")
    repetition = 2
    random_run = run_seed(str(path), first_seed(repetition), str(tmp_path))
    result = explore(
        str(paired_scenario(path, repetition, tmp_path)),
        seed=repetition,
        budget=Budget(runs=1),
        out_dir=tmp_path / "explore",
        log=io.StringIO(),
        stop_at_first=True,
        grid=grid,
    )
    assert random_run.failed
    [failure] = result.failures
    assert (failure.run, failure.seed) == (1, first_seed(repetition))  # runs count from 1
