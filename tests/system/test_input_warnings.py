"""A job no region can hold: an error when the whole world cannot, a warning when one region cannot.

The world of the scripted DSL: regions east and west, each 4 A100 machines
(32 GPUs) and 4 CPU machines, so 64 A100 GPUs and 8 CPU machines in all.
A job of 64 GPUs fits the world but no region: it waits forever, which some
scenarios want (a gang that never starts), so it is run, with a warning on
stderr at load and in the report. 65 GPUs, or a GPU type the world lacks,
could never run anywhere: exit 2 naming the key path.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from tests.support.cli import run_cli
from tests.support.dsl import job, scenario, workload


def _write(tmp_path: Path, *jobs: dict) -> Path:
    raw = scenario([workload("W", "hi", 0, *jobs)], duration="20m")
    path = tmp_path / "s.json"
    path.write_text(msgspec.json.encode(raw).decode())
    return path


def test_a_job_larger_than_any_region_is_run_and_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, job(gpus=64))
    db = tmp_path / "w.db"
    code, _, err = run_cli(capsys, "run", str(path), "--out", str(db), "--no-progress")
    assert code == 0, err
    expected = "system.workload_list[0].jobs[0].gpus: 64 A100 GPUs: more than any region has (32)"
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and expected in warnings[0] and str(path) in warnings[0]
    code, out, _ = run_cli(capsys, "report", str(db), "--json")
    assert code == 0
    (listed,) = json.loads(out)["warnings"]
    assert listed.startswith(expected)
    code, out, _ = run_cli(capsys, "report", str(db))
    assert f"warning: {expected}" in out
    code, _, _ = run_cli(capsys, "report", str(db), "--html", str(tmp_path / "page"))
    page = (tmp_path / "page" / "index.html").read_text(encoding="utf-8")
    assert code == 0 and "<h3>Input warnings</h3>" in page and expected in page


def test_a_workload_no_region_holds_whole_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each job fits a region (24 ≤ 32), the gang of both (48) fits none.
    path = _write(tmp_path, job("a", gpus=24), job("b", gpus=24))
    code, _, err = run_cli(capsys, "run", str(path), "--out", str(tmp_path / "w.db"))
    assert code == 0, err
    assert "system.workload_list[0].jobs: its jobs together need more than any one region" in err


def test_a_job_that_fits_a_region_is_not_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, job(gpus=8))
    code, _, err = run_cli(capsys, "run", str(path), "--out", str(tmp_path / "w.db"))
    assert code == 0 and "warning" not in err
    code, out, _ = run_cli(capsys, "report", str(tmp_path / "w.db"), "--json")
    assert json.loads(out)["warnings"] == []


@pytest.mark.parametrize(
    ("jobs", "key_path", "message"),
    [
        (
            [job(gpus=65)],
            "system.workload_list[0].jobs[0].gpus",
            "65 A100 GPUs: more than the whole world has (64)",
        ),
        (
            [job("prep", cpus=9)],
            "system.workload_list[0].jobs[0].cpu_machines",
            "9 CPU machines: more than the whole world has (8)",
        ),
        (
            [{**job(gpus=8), "gpu_type": "TPU"}],
            "system.workload_list[0].jobs[0].gpu_type",
            "unknown GPU type 'TPU'",
        ),
    ],
    ids=["gpus", "cpus", "gpu-type"],
)
def test_a_job_larger_than_the_world_exits_2_naming_its_key_path(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    jobs: list[dict],
    key_path: str,
    message: str,
) -> None:
    path = _write(tmp_path, *jobs)
    code, _, err = run_cli(capsys, "run", str(path), "--out", str(tmp_path / "w.db"))
    assert code == 2
    assert err.startswith(f"error: {path}: {key_path}: {message}"), err
    assert not (tmp_path / "w.db").exists()


CSV_HEAD = (
    "workload_id,tenant,submit_s,recurring,job,role,gpu_type,gpus,cpu_machines,work_s,"
    "checkpoint_s,input_tables\n"
)


@pytest.mark.parametrize(
    ("row", "where", "message"),
    [
        ("W,hi,0,false,trainer,trainer,TPU,8,0,3600,600,t", "gpu_type", "unknown GPU type 'TPU'"),
        ("W,nobody,0,false,trainer,trainer,A100,8,0,3600,600,t", "tenant", "unknown tenant"),
        (
            "W,hi,0,false,trainer,trainer,A100,100000,0,3600,600,t",
            "gpus",
            "more than the whole world has (64)",
        ),
        (
            "W,hi,0,false,trainer,trainer,A100,8,0,3600,0.5,t",
            "checkpoint_s",
            "must be at least 1,000,000",
        ),
    ],
    ids=["tpu", "tenant", "huge", "checkpoint"],
)
def test_a_csv_trace_row_the_world_cannot_hold_exits_2_at_its_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: str, where: str, message: str
) -> None:
    raw = scenario([], duration="20m")
    del raw["system"]["workload_list"]
    raw["system"]["workload_csv"] = "trace.csv"
    (tmp_path / "trace.csv").write_text(CSV_HEAD + row + "\n", encoding="utf-8")
    path = tmp_path / "s.json"
    path.write_text(msgspec.json.encode(raw).decode())
    code, _, err = run_cli(capsys, "run", str(path), "--out", str(tmp_path / "w.db"))
    assert code == 2
    assert err.startswith(f"error: {tmp_path / 'trace.csv'}: line 2: column {where!r}: "), err
    assert message in err
