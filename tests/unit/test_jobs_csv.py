"""Jobs CSVs with a column mapping: public cluster logs read as they are published.

The fixtures mimic three logs' real column names and time formats:
Helios's `cluster_log.csv` (ISO dates, a `duration` column), AcmeTrace's
`trace_seren.csv` (ISO dates with a UTC offset) and a Philly-derived
per-VC log (epoch seconds, start and end instead of a duration). Each has a
CPU-only job, a job that never ran or ran 0 s, and columns outside the
mapping; none is edited to be read.
"""

from __future__ import annotations

import msgspec
import pytest

from actors.cluster.system import ClusterParams
from actors.cluster.traces import CsvColumns, describe, load_trace, parse_trace
from actors.policies.registry import convert_params
from emulator.errors import InputError
from emulator.units import S
from tests.support.paths import DATA

HELIOS = CsvColumns(
    job_id="job_id",
    gpus="gpu_num",
    submit="submit_time",
    duration="duration",
    user="user",
    state="state",
)
ACME = CsvColumns(job_id="job_id", gpus="gpu_num", submit="submit_time", duration="duration")
PHILLY = CsvColumns(
    job_id="jobid",
    gpus="num_gpus",
    submit="submitted_time",
    start="start_time",
    end="end_time",
    state="status",
)


def test_helios():
    jobs, report = load_trace(DATA / "helios_cluster_log.csv", "jobs-csv", columns=HELIOS)
    # Submissions relative to the first (2020-04-01 00:00:07 UTC); durations in s.
    assert [(j.job_id, j.gpus, j.submit_us / S, j.duration_us / S, j.user) for j in jobs] == [
        ("6148", 8, 0, 8000, "u1b3ac"),
        ("6149", 1, 108, 600, "uA9c7e"),
        ("6152", 2, 263, 25, "uA9c7e"),
        ("6153", 16, 293, 86400, "u5e2f0"),
    ]
    assert report.time_origin_s == 1585699207  # 2020-04-01T00:00:07Z
    assert (report.rows_read, report.jobs_kept, report.rows_dropped) == (6, 4, 2)
    assert {n.name: n.count for n in report.dropped} == {
        "no GPUs (a CPU job)": 1,
        "ran 0 s": 1,
    }
    honoured = {n.what: n.rows for n in report.not_honoured}
    assert honoured == {
        "column vc": 6,
        "column jobname": 6,
        "column cpu_num": 6,
        "column node_num": 6,
        "column start_time": 6,
        "column end_time": 6,
        "user": 6,
        "model": 6,
    }
    assert all(j.model == "" for j in jobs)


def test_helios_keeping_only_completed_jobs():
    jobs, report = load_trace(
        DATA / "helios_cluster_log.csv", "jobs-csv", columns=HELIOS, keep_states=("COMPLETED",)
    )
    assert [j.job_id for j in jobs] == ["6148", "6149"]
    # A row is dropped for its first reason: no GPUs, then its state, then its run time.
    assert {n.name: n.count for n in report.dropped} == {
        "no GPUs (a CPU job)": 1,
        "state CANCELLED not kept": 1,
        "state FAILED not kept": 1,
        "state TIMEOUT not kept": 1,
    }


def test_acmetrace_dates_with_an_offset():
    jobs, report = load_trace(DATA / "acme_trace_seren.csv", "jobs-csv", columns=ACME)
    # 14:36:44+08:00 is 06:36:44 UTC; the next at 14:40:00 is 196 s later.
    assert [(j.job_id, j.gpus, j.submit_us / S, j.duration_us / S) for j in jobs] == [
        ("dlc1q2w3e4", 8, 0, 3600),
        ("dlc5t6y7u8", 32, 196, 21600),
        ("dlc9i0o1p2", 1, 286, 120),
    ]
    assert report.time_origin_s == 1678171004
    assert report.rows_dropped == 2


def test_philly_epoch_seconds_start_and_end():
    jobs, report = load_trace(DATA / "philly_vc_log.csv", "jobs-csv", columns=PHILLY)
    # Run time = end − start: 3600, 1800, 21600, 60 s; job 10245 never started.
    assert [(j.job_id[-5:], j.gpus, j.submit_us / S, j.duration_us / S) for j in jobs] == [
        ("10238", 1, 0, 3600),
        ("10240", 4, 47, 1800),
        ("10241", 8, 147, 21600),
        ("10246", 1, 347, 60),
    ]
    assert {n.name: n.count for n in report.dropped} == {"never ran (no start or end time)": 1}
    assert "column vc" in describe(report)


@pytest.mark.parametrize(
    ("row", "column", "reason"),
    [
        ("7,u,vc,j,two,1,1,COMPLETED,2020-04-01 00:00:07,,,10", "gpu_num", "not a whole number"),
        ("7,u,vc,j,1,1,1,COMPLETED,yesterday,,,10", "submit_time", "neither seconds nor an ISO"),
        ("7,u,vc,j,1,1,1,COMPLETED,,,,10", "submit_time", "missing"),
        ("7,u,vc,j,1,1,1,COMPLETED,5,,,-3", "duration", "must be >= 0"),
        (",u,vc,j,1,1,1,COMPLETED,5,,,10", "job_id", "missing"),
    ],
)
def test_a_bad_row_stops_the_run_naming_file_line_and_column(row: str, column: str, reason: str):
    header = (DATA / "helios_cluster_log.csv").read_text().splitlines()[0]
    text = f"{header}\n7,u,vc,j,1,1,1,COMPLETED,0,,,10\n{row}\n"
    with pytest.raises(InputError) as error:
        parse_trace(text, "jobs-csv", path="log.csv", columns=HELIOS, strict=True)
    assert error.value.source == "log.csv:3"
    assert error.value.path == f"column {column}"
    assert reason in error.value.message
    # Not strict: skipped and listed with its line and column.
    jobs, report = parse_trace(text, "jobs-csv", path="log.csv", columns=HELIOS)
    assert len(jobs) == 1 and report.skipped[0].line == 3 and report.skipped[0].column == column


def test_end_before_start_is_a_bad_row():
    text = "jobid,num_gpus,submitted_time,start_time,end_time,status\na,1,0,100,50,Pass\n"
    cols = CsvColumns(
        job_id="jobid", gpus="num_gpus", submit="submitted_time", start="start_time", end="end_time"
    )
    with pytest.raises(InputError) as error:
        parse_trace(text, "jobs-csv", path="p.csv", columns=cols, strict=True)
    assert (error.value.source, error.value.path) == ("p.csv:2", "column end_time")


def test_a_mapped_column_missing_from_the_header_is_fatal():
    cols = msgspec.structs.replace(HELIOS, gpus="gpus")
    with pytest.raises(InputError) as error:
        load_trace(DATA / "helios_cluster_log.csv", "jobs-csv", columns=cols)
    assert error.value.path == "column gpus"
    assert "mapped as gpus" in error.value.message


BASE = {"job_id": "a", "gpus": "b", "submit": "c"}


@pytest.mark.parametrize(
    ("trace", "message"),
    [
        ({"file": "x.csv", "format": "jobs-csv"}, "`columns` is required"),
        (
            {
                "file": "x.csv",
                "format": "tiresias",
                "columns": {"job_id": "a", "gpus": "b", "submit": "c", "duration": "d"},
            },
            "only for it",
        ),
        (
            {
                "file": "x.csv",
                "format": "jobs-csv",
                "columns": {"job_id": "a", "gpus": "b", "submit": "c"},
            },
            "needs `duration`",
        ),
        (
            {
                "file": "x.csv",
                "format": "jobs-csv",
                "columns": {"job_id": "a", "gpus": "b", "submit": "c", "start": "s"},
            },
            "needs `duration`",
        ),
    ],
)
def test_the_mapping_is_validated_with_the_scenario(trace: dict[str, object], message: str):
    with pytest.raises(InputError) as error:
        convert_params(ClusterParams, {"workload": {"trace": trace}})
    assert error.value.path.startswith("workload.trace")
    assert message in error.value.message
