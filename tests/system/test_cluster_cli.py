"""cluster: results a user takes away from the command line.

`mastemu run FILE --engine reference` writes a run database that `report`
reads like an actor run's; `report --jobs FILE.csv` and `report --json`'s
`jobs` give one row per job; a trace-driven run ends when its last job
ends, and one that its `duration` cuts short says so.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pytest

from emulator.cli import main as cli
from tests.support.paths import DATA

COLUMNS = [
    "job_id",
    "gpus",
    "submit_s",
    "first_start_s",
    "end_s",
    "jct_s",
    "queueing_delay_s",
    "preemptions",
    "ftf_rho",
    "state",
]


def scenario_file(tmp_path: Path, *, duration: str = "24h", policy: str = "srtf") -> Path:
    """The Tiresias simulator's twelve-job trace on two 4-GPU machines, its conventions."""
    path = tmp_path / "twelve.toml"
    path.write_text(
        f"""name = "twelve"
duration = "{duration}"
seed = 1

[system]
kind = "cluster"
policy = "{policy}"
machines = 2
gpus_per_machine = 4
machines_per_rack = 2

[system.semantics]
profile = "tiresias-sim"
control_latency = "zero"

[system.workload.trace]
file = "{DATA / "tiresias_twelve.csv"}"
format = "tiresias"
""",
        encoding="utf-8",
    )
    return path


def mastemu(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main([*argv, "--no-progress"] if argv[0] == "run" else list(argv))
    return code, out.getvalue()


def job_rows(db: Path, csv_path: Path) -> list[dict[str, str]]:
    code, _ = mastemu("report", str(db), "--jobs", str(csv_path))
    assert code == 0
    with csv_path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def test_the_reference_engine_and_the_actors_give_the_same_job_rows(tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path)
    actors, reference = tmp_path / "actors.db", tmp_path / "reference.db"
    assert mastemu("run", str(scenario), "--out", str(actors))[0] == 0
    code, out = mastemu("run", str(scenario), "--engine", "reference", "--out", str(reference))
    assert code == 0 and "engine: reference" in out
    got, want = job_rows(actors, tmp_path / "a.csv"), job_rows(reference, tmp_path / "r.csv")
    assert len(got) == 12 and all(r["state"] == "done" for r in got)
    assert got == want
    # `report --json` has the same rows, and says which machinery ran.
    code, text = mastemu("report", str(reference), "--json")
    report = json.loads(text)
    assert code == 0 and report["engine"] == "reference" and report["status"] == "ok"
    assert [r["job_id"] for r in report["jobs"]] == [r["job_id"] for r in want]
    # A trace-driven run ends when its last job ends, not at its 24 h duration.
    last_end = max(float(r["end_s"]) for r in want)
    assert report["emulated_s"] == pytest.approx(last_end, abs=1e-6)
    assert report["makespan_s"] == pytest.approx(last_end, abs=1e-6)


@pytest.mark.parametrize("engine", ["actors", "reference"])
def test_a_run_its_duration_cuts_short_says_so(engine: str, tmp_path: Path) -> None:
    # The twelve jobs need well over 10 minutes on 8 GPUs.
    scenario = scenario_file(tmp_path, duration="10m")
    db = tmp_path / "run.db"
    mastemu("run", str(scenario), "--engine", engine, "--out", str(db))
    code, text = mastemu("report", str(db), "--json")
    report = json.loads(text)
    assert code == 0
    assert report["status"] == "cut-short" and report["cut_short"] is True
    assert report["emulated_s"] == pytest.approx(600.0)
    states = {r["state"] for r in report["jobs"]}
    assert "unfinished" in states or report["not_submitted"] > 0
    assert report["finished"] < report["jobs_total"] == 12
