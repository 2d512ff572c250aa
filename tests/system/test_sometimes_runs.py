"""Built-in scenarios reach the rare states they were written for; online equals offline.

Each scenario below stages one rare state on purpose; if a change to the
system (or to a detector) stopped it from being reached, the scenario
would no longer test what its description says. The tally a run keeps
while it runs and the one read back from its database must agree.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from emulator.registry import load_plugins
from emulator.run.coverage import reached, system_kind
from emulator.run.runner import execute, plan_run
from emulator.run.scenario import resolve_scenario
from emulator.sometimes import Tally
from tests.support.cli import run_cli

load_plugins()


@pytest.mark.parametrize(
    ("scenario", "state"),
    [
        ("gms-failover", "gms-failover-mid-auction"),
        ("region-outage", "region-lost-and-back"),
        ("wan-partition-migration", "copy-resumed-after-partition"),
        ("cm-failover-preemption", "cm-takes-up-preemption"),
        ("leader-lease", "leader-failover"),
    ],
)
def test_a_scenario_reaches_the_state_it_stages(scenario: str, state: str, tmp_path: Path) -> None:
    loaded, text, source = resolve_scenario(scenario)
    online = Tally(system_kind(loaded.system))
    db = tmp_path / "run.db"
    result = asyncio.run(
        execute(plan_run(loaded, text, source), seed=1, out=db, on_kernel=online.attach)
    )
    assert result.status == "ok"
    assert online.counts[state] >= 1
    assert asyncio.run(reached(db)) == online.counts


def test_sweep_reports_the_catalogue_in_text_and_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["sweep", "gms-failover", "--seeds", "1-2", "--jobs", "2", "--keep-dir", str(tmp_path)]
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    assert "sometimes: " in out and " reached over 2 seeds" in out
    line = next(x for x in out.splitlines() if "gms-failover-mid-auction" in x)
    assert line.split()[1:3] == ["2", "seeds"]
    assert any(
        "copy-resumed-after-partition" in x and "never reached" in x for x in out.splitlines()
    )
    code, out, _ = run_cli(capsys, *argv, "--json")
    cover = json.loads(out)["sometimes"]
    assert cover["gms-failover-mid-auction"]["runs"] == 2
    assert cover["copy-resumed-after-partition"] == {
        "runs": 0,
        "count": 0,
        "description": cover["copy-resumed-after-partition"]["description"],
    }


def test_check_lists_what_a_recorded_run_reached(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "gf.db"
    assert run_cli(capsys, "run", "gms-failover", "--out", str(db))[0] == 0
    code, out, _ = run_cli(capsys, "check", str(db), "--json")
    cover = json.loads(out)["sometimes"]
    assert code == 0 and cover == {
        name: {"runs": int(n > 0), "count": n, "description": cover[name]["description"]}
        for name, n in asyncio.run(reached(db)).items()
    }
    assert cover["gms-failover-mid-auction"]["count"] == 1
    code, out, _ = run_cli(capsys, "check", str(db))
    assert "sometimes: " in out and "gms-failover-mid-auction" in out
