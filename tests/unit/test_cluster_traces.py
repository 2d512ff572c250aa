"""Trace import: the Tiresias CSV and the Shockwave TSV, the consistency report, fatal errors.

The fixtures in tests/data are small hand-written traces in the published
formats; each has one bad row and one job too big for a small cluster, and
one model the performance model does not know.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest

from actors.cluster.traces import (
    SHOCKWAVE_COLUMNS,
    FitProblem,
    NameCount,
    RowProblem,
    check_fit,
    describe,
    load_trace,
    model_key,
    parse_trace,
)
from actors.cluster.workloads import PhillyParams, philly_jobs
from actors.policies.cluster.api import AcceptsEveryOffer, Decision, Start, TraceJob
from actors.policies.cluster.placement import best_tier, take
from emulator.errors import InputError
from emulator.units import S
from tests.support.paths import DATA

TIRESIAS = DATA / "tiresias_small.csv"
SHOCKWAVE = DATA / "shockwave_small.trace"
HEADER = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval"
SW_ROW = [
    "ResNet-18 (batch size 32)",
    "python3 main.py",
    "image_classification/cifar10",
    "--num_steps",
    "1",
    "5000",
    "2",
    "static",
    "1",
    "-1.000000",
    "600",
    "10",
]


def _sw(**changes: str) -> str:
    """A Shockwave row with some columns changed (by name), tab-joined."""
    cols = SHOCKWAVE_COLUMNS
    row = dict(zip(cols, SW_ROW, strict=True)) | changes
    return "\t".join(row[c] for c in cols)


# ---- the fixtures, end to end ------------------------------------------------------------
def test_tiresias_fixture_parses_to_the_expected_jobs():
    jobs, report = load_trace(TIRESIAS, "tiresias", total_gpus=16)
    # Seconds become µs; "ResNet-50" becomes the perf_model key "resnet50";
    # row 2 (line 4) has num_gpu "two" and is skipped.
    assert jobs == (
        TraceJob(
            job_id="0", submit_us=0, gpus=1, model="vgg19", duration_us=200 * S, iterations=500
        ),
        TraceJob(
            job_id="1", submit_us=30 * S, gpus=8, model="vgg11", duration_us=150 * S, iterations=150
        ),
        TraceJob(
            job_id="3",
            submit_us=75 * S,
            gpus=4,
            model="resnet50",
            duration_us=120_500_000,
            iterations=140,
        ),
        TraceJob(
            job_id="4",
            submit_us=110 * S,
            gpus=32,
            model="inception3",
            duration_us=140 * S,
            iterations=300,
        ),
        TraceJob(
            job_id="5",
            submit_us=150 * S,
            gpus=2,
            model="foonet",
            duration_us=125 * S,
            iterations=320,
        ),
    )
    assert (report.rows_read, report.jobs_kept, report.rows_skipped) == (6, 5, 1)
    assert report.skipped == (
        RowProblem(line=4, column="num_gpu", value="two", reason="not a whole number"),
    )
    assert report.unknown_models == (NameCount(name="foonet", count=1, first_line=7),)
    assert report.never_fit == (
        FitProblem(
            job_id="4", gpus=32, limit=16, reason="needs 32 GPUs, the cluster has 16", line=6
        ),
    )
    assert report.out_of_order_rows == 0


def test_shockwave_fixture_parses_to_the_expected_jobs():
    jobs, report = load_trace(SHOCKWAVE, "shockwave", total_gpus=8)
    # Ids are row ordinals (row 2 is skipped, so there is no "2"); the A3C
    # row (line 5) arrives at 60 s, before line 4's 75.5 s: sorted by submit.
    # Each job keeps its job type's batch size.
    assert jobs == (
        TraceJob(
            job_id="0",
            submit_us=0,
            gpus=1,
            model="resnet18",
            duration_us=3000 * S,
            iterations=50_000,
            mode="accordion",
            batch_size=32,
        ),
        TraceJob(
            job_id="1",
            submit_us=40 * S,
            gpus=2,
            model="lstm",
            duration_us=1500 * S,
            iterations=80_000,
            mode="gns",
            batch_size=20,
        ),
        TraceJob(
            job_id="4",
            submit_us=60 * S,
            gpus=1,
            model="a3c",
            duration_us=900 * S,
            iterations=4000,
            batch_size=4,
        ),
        TraceJob(
            job_id="3",
            submit_us=75_500_000,
            gpus=16,
            model="resnet50",
            duration_us=10_000 * S,
            iterations=40_000,
            weight=2.0,
            batch_size=64,
        ),
    )
    assert (report.rows_read, report.jobs_kept, report.rows_skipped) == (5, 4, 1)
    assert report.skipped == (
        RowProblem(line=3, column="mode", value="turbo", reason="not one of static/accordion/gns"),
    )
    assert report.unknown_models == (NameCount(name="a3c", count=1, first_line=5),)
    assert [(p.job_id, p.line) for p in report.never_fit] == [("3", 4)]
    assert report.out_of_order_rows == 1


def test_describe_names_every_finding():
    _, report = load_trace(SHOCKWAVE, "shockwave", total_gpus=8)
    text = describe(report)
    assert "5 rows read, 4 jobs kept, 1 row skipped" in text
    assert "line 3, column mode: not one of static/accordion/gns ('turbo')" in text
    assert "a3c: 1 job, first at line 5" in text
    assert "job 3 (line 4): needs 16 GPUs, the cluster has 8" in text
    assert "1 row submitted before the row above" in text
    _, fits = load_trace(TIRESIAS, "tiresias", total_gpus=64)
    assert "every job fits 64 GPUs" in describe(fits)


def test_the_report_is_msgspec_encodable():
    _, report = load_trace(TIRESIAS, "tiresias", total_gpus=16)
    assert msgspec.json.decode(msgspec.json.encode(report), type=type(report)) == report


# ---- per-row problems: skipped and listed ------------------------------------------------
@pytest.mark.parametrize(
    ("fmt", "row", "line", "column", "reason"),
    [
        ("tiresias", "0,1,0,10,vgg19,,0", 2, "duration", "missing"),
        ("tiresias", "0,1,-5,10,vgg19,60,0", 2, "submit_time", "must be >= 0"),
        ("tiresias", "0,1,0,10,vgg19,0,0", 2, "duration", "must be > 0"),
        ("tiresias", "0,1,0,10,vgg19,nan,0", 2, "duration", "must be finite"),
        ("tiresias", "0,1,0,10,vgg19,0.0000001,0", 2, "duration", "rounds to 0 µs"),
        ("tiresias", "0,1,0,10,vgg19,2e9,0", 2, "duration", "must be <= 1e+09"),
        ("tiresias", "0,2000000,0,10,vgg19,60,0", 2, "num_gpu", "must be <= 1000000"),
        ("tiresias", "0,0,0,10,vgg19,60,0", 2, "num_gpu", "must be >= 1"),
        ("tiresias", "0,1,0,-1,vgg19,60,0", 2, "iterations", "must be >= 0"),
        ("tiresias", "0,1,0,10,,60,0", 2, "model_name", "missing"),
        ("tiresias", "0,1,0,10,vgg19,60,0,surplus", 2, "(field 8)", "8 fields"),
        ("tiresias", "0,1,0", 2, "iterations", "missing"),
        ("shockwave", _sw(scale_factor="0"), 1, "scale_factor", "must be >= 1"),
        ("shockwave", _sw(priority_weight="0"), 1, "priority_weight", "must be > 0"),
        ("shockwave", _sw(SLO="soon"), 1, "SLO", "not a number"),
        ("shockwave", _sw(needs_data_dir="yes"), 1, "needs_data_dir", "not one of 0/1"),
        ("shockwave", _sw(total_steps="1e5"), 1, "total_steps", "not a whole number"),
        ("shockwave", _sw(arrival_time="-1"), 1, "arrival_time", "must be >= 0"),
        ("shockwave", _sw().rsplit("\t", 1)[0], 1, "arrival_time", "11 of 12"),
        ("shockwave", _sw() + "\textra", 1, "(field 13)", "13 fields"),
    ],
)
def test_a_bad_row_is_skipped_and_listed_with_line_and_column(fmt, row, line, column, reason):
    text = f"{HEADER}\n{row}\n" if fmt == "tiresias" else row + "\n"
    jobs, report = parse_trace(text, fmt)
    assert jobs == ()
    assert report.rows_skipped == 1
    first = report.skipped[0]
    assert (first.line, first.column) == (line, column)
    assert reason in first.reason


def test_a_short_row_reports_each_missing_column_once():
    # "0,1,0": iterations, model_name and duration are absent.
    _, report = parse_trace(f"{HEADER}\n0,1,0\n", "tiresias")
    assert [p.column for p in report.skipped] == ["iterations", "model_name", "duration"]
    _, report = parse_trace(_sw().rsplit("\t", 3)[0] + "\n", "shockwave")
    assert [p.column for p in report.skipped] == ["SLO"]  # the first absent column only


def test_a_duplicate_job_id_is_skipped_naming_the_first():
    text = f"{HEADER}\n7,1,0,10,vgg19,60,0\n\n7,2,5,10,vgg16,60,0\n"
    jobs, report = parse_trace(text, "tiresias")
    assert [j.gpus for j in jobs] == [1]
    # The blank line 3 is skipped without counting as a row.
    assert report.rows_read == 2
    assert report.skipped == (
        RowProblem(line=4, column="job_id", value="7", reason="duplicate of line 2"),
    )


def test_gpu_types_outside_the_cluster_are_listed_but_kept():
    text = f"{HEADER},gpu_type\n0,1,0,10,vgg19,60,0,v100\n1,1,0,10,vgg19,60,0,k80\n"
    jobs, report = parse_trace(text, "tiresias", gpu_types={"v100"})
    assert len(jobs) == 2
    assert report.unknown_gpu_types == (NameCount(name="k80", count=1, first_line=3),)


# ---- fatal: the file as a whole ----------------------------------------------------------
def _write(tmp_path: Path, data: bytes | str) -> Path:
    path = tmp_path / "trace.txt"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.mark.parametrize(
    ("data", "fmt", "kwargs", "line", "column"),
    [
        # The header lacks `duration`.
        (
            "job_id,num_gpu,submit_time,iterations,model_name\n0,1,0,1,x\n",
            "tiresias",
            {},
            1,
            "duration",
        ),
        # A byte that is not UTF-8 on line 3.
        (
            f"{HEADER}\n0,1,0,10,vgg19,60,0\n1,1,0,10,vgg\xff,60,0\n".encode("latin-1"),
            "tiresias",
            {},
            3,
            "(encoding)",
        ),
        ("", "tiresias", {}, 1, "(header)"),
        (f"{HEADER}\n", "tiresias", {}, 1, "(all)"),
        ("\n\n", "shockwave", {}, 1, "(all)"),
        # strict: the first bad row is fatal.
        (
            f"{HEADER}\n0,1,0,10,vgg19,60,0\n1,x,0,10,vgg19,60,0\n",
            "tiresias",
            {"strict": True},
            3,
            "num_gpu",
        ),
        # More bad rows than allowed: probably the wrong format.
        (
            f"{HEADER}\n0,x,0,10,vgg19,60,0\n1,x,0,10,vgg19,60,0\n",
            "tiresias",
            {"max_bad_rows": 1},
            3,
            "num_gpu",
        ),
    ],
)
def test_fatal_errors_name_file_line_and_column(tmp_path, data, fmt, kwargs, line, column):
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as info:
        load_trace(path, fmt, **kwargs)
    err = info.value
    assert (err.source, err.path) == (f"{path}:{line}", f"column {column}")
    assert str(err).startswith(f"{path}:{line}: column {column}: ")


def test_a_missing_file_and_an_unknown_format_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match=r"nothere\.csv.*cannot read"):
        load_trace(tmp_path / "nothere.csv", "tiresias")
    with pytest.raises(ValueError, match="unknown trace format 'philly'"):
        load_trace(TIRESIAS, "philly")  # type: ignore[arg-type]


def test_the_wrong_format_fails_instead_of_loading_nothing():
    # A Shockwave file read as Tiresias CSV: its first row is taken as a
    # header without the Tiresias columns.
    with pytest.raises(InputError, match="column job_id: missing from the header"):
        load_trace(SHOCKWAVE, "tiresias")


# ---- fit checks and model names -------------------------------------------------------
def _job(job_id: str, gpus: int) -> TraceJob:
    return TraceJob(job_id=job_id, submit_us=0, gpus=gpus, model="vgg19", duration_us=S)


@pytest.mark.parametrize(
    ("total", "cap", "expected"),
    [
        (16, None, [("32", 16)]),  # only the 32-GPU job exceeds the cluster
        (16, 8, [("16", 8), ("32", 16)]),  # 16 exceeds the per-job cap, 32 the cluster
        (64, None, []),
        (64, 1, [("8", 1), ("16", 1), ("32", 1)]),
    ],
)
def test_check_fit(total, cap, expected):
    jobs = [_job(str(g), g) for g in (1, 8, 16, 32)]
    got = check_fit(jobs, total, cap)
    assert [(p.job_id, p.limit) for p in got] == expected
    with pytest.raises(ValueError, match="total_gpus"):
        check_fit(jobs, 0)


@pytest.mark.parametrize(
    ("name", "fmt", "key"),
    [
        ("ResNet-18 (batch size 64)", "shockwave", "resnet18"),
        ("LM (batch size 5)", "shockwave", "lstm"),
        ("Recommendation (batch size 8192)", "shockwave", "recoder"),
        ("Transformer (batch size 16)", "shockwave", "transformer"),
        ("ResNet-50", "tiresias", "resnet50"),
        ("InceptionV3", "tiresias", "inception3"),  # a perf_model alias
        ("BERT large", "tiresias", "bertlarge"),
        ("my_net", "tiresias", "mynet"),
    ],
)
def test_model_names_map_to_perf_model_keys(name, fmt, key):
    assert model_key(name, fmt) == key


def test_a_generated_workload_round_trips_through_the_tiresias_csv(tmp_path):
    jobs = philly_jobs(PhillyParams(), random.Random(5))
    lines = [HEADER] + [
        f"{j.job_id},{j.gpus},{j.submit_us / S:.6f},{j.iterations},{j.model},"
        f"{j.duration_us / S:.6f},0"
        for j in jobs
    ]
    path = _write(tmp_path, "\n".join(lines) + "\n")
    loaded, report = load_trace(path, "tiresias", total_gpus=32)
    assert loaded == jobs
    assert report.unknown_models == () and report.never_fit == () and report.skipped == ()


# ---- a loaded trace runs in the reference engine ------------------------------------------
class _NoParams(msgspec.Struct, frozen=True):
    pass


class _GreedyFifo(AcceptsEveryOffer):
    """Test policy: start waiting jobs in submit order wherever they fit (most consolidated)."""

    name: ClassVar[str] = "test-greedy-fifo"
    Params: ClassVar[type] = _NoParams

    def initial_state(self, params: Any) -> None:
        return None

    def decide(self, view: Any, state: Any, params: Any) -> tuple[Decision, None]:
        machines = view.machines
        starts = []
        for job in sorted(view.jobs, key=lambda j: (j.submit_us, j.job_id)):
            got = None if job.running else best_tier(machines, job.gpus)
            if got is not None:
                machines = take(machines, got[1])
                starts.append(Start(job_id=job.job_id, placement=got[1], tier=got[0]))
        return Decision(start=tuple(starts)), None


def test_the_tiresias_fixture_runs_in_the_reference_engine():
    sim = pytest.importorskip("actors.cluster.engine")
    jobs, report = load_trace(TIRESIAS, "tiresias", total_gpus=16)
    # 2 machines × 8 GPUs = 16 GPUs; no communication or preemption cost, so
    # every job that fits runs exactly its duration from its submit time (the
    # 8-GPU job 1 and the 4-GPU job 3 overlap but fit side by side), and the
    # 32-GPU job the report flags fails at arrival.
    semantics = sim.Semantics(comm_model=False, preemption_cost=False)
    result = sim.simulate(_GreedyFifo(), _NoParams(), jobs, sim.cluster_of(2, 8, 2), semantics)
    by_id = {r.job_id: r for r in result.jobs}
    for job in jobs:
        if job.job_id in {p.job_id for p in report.never_fit}:
            assert by_id[job.job_id].failed
        else:
            assert by_id[job.job_id].finish_us == job.submit_us + job.duration_us
