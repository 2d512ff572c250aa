"""`explore --grid`: dark spells of whole roles, alone or in pairs, from one instant, for
lengths around the system's clocks, so components that fail together come back in every order.

A hand-made grid of this kind found what seeds and the guided search had not:
us-east's RMSs back after 25 min, its CM after 60, and the RMS took the
given-up attempt's live job for its new dispatch's start
(`rms-timeout-takes-old-attempt` in the bug zoo). The grid is now a mode of
`explore`; these tests run it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from emulator.cli.main import main
from emulator.run.explore import Budget, explore
from emulator.run.explore.grid import GridSpec
from emulator.units import MIN
from tests.support.explore import calm_witness

BUG = "rms-timeout-takes-old-attempt"


def test_explore_grid_runs_the_grid_s_spells_after_the_base_and_reports_its_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = calm_witness(tmp_path, BUG, [], duration="30m")
    argv = ["explore", str(path), "--grid", "--grid-lengths", "12m,30m", "--budget", "3"]
    assert main([*argv, "--out", str(tmp_path / "a"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # 5 groups (a CM and the RMSs of each of 2 regions, the GMS), 2 lengths, 2 actions:
    # 20 alone; 6 pairs share a region or hold the GMS (4 lengths each), 4 do not.
    assert report["grid"] == 20 + 6 * 8 + 4 * 8
    assert report["runs"] == 3
    again = main([*argv, "--out", str(tmp_path / "b"), "--json"])
    assert again == 0 and json.loads(capsys.readouterr().out) == report
    # The grid's options need the grid.
    assert main(["explore", str(path), "--grid-at", "5m", "--budget", "1"]) == 2


@pytest.mark.slow
def test_explore_grid_finds_the_bug_of_a_region_whose_rms_and_cm_come_back_apart(
    tmp_path: Path,
) -> None:
    """The zoo bug's witness without its faults: the grid's own spells find it, at the
    default instant and lengths (within 100 of its 780 schedules)."""
    path = calm_witness(tmp_path, BUG, [BUG])
    result = explore(
        str(path), seed=1, budget=Budget(runs=200), out_dir=tmp_path / "out",
        log=io.StringIO(), stop_at_first=True, grid=GridSpec(),
    )  # fmt: skip
    (failure,) = result.failures
    assert failure.signature[0] == "gang"
    assert len(result.runs) <= 101
    assert failure.minimal is not None and Path(failure.minimal).is_file()


@pytest.mark.slow
def test_every_dark_spell_of_the_region_outage_grid_ends_clean(tmp_path: Path) -> None:
    """Every role group of `region-outage`, alone or in pairs, paused or crashed at 20m
    for 10, 25, 45 or 70 min (360 spells): all clean since the fix."""
    lengths = tuple(m * MIN for m in (10, 25, 45, 70))
    result = explore(
        "region-outage", seed=1, budget=Budget(runs=1000), out_dir=tmp_path / "out",
        log=io.StringIO(), grid=GridSpec((20 * MIN,), lengths),
    )  # fmt: skip
    assert result.grid == 360 and len(result.runs) == 361
    assert [f.signature for f in result.failures] == []
