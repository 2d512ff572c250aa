"""Loading a trace file in any of the formats, with its consistency report.

What is fatal and what is not. A `trace_error` (an InputError whose
message reads "FILE:LINE: column COL: why") is raised when the file as a
whole cannot be trusted: it is unreadable, not UTF-8, or has no data rows;
a header lacks a required (or mapped) column; `strict=True` and any row is
bad; or more than `max_bad_rows` rows are bad (a wrong format or a shifted
file, not a few typos). Everything else is per row and recoverable: a row
with a missing, malformed or out-of-range field, a wrong number of fields,
or a duplicate job id is skipped and listed in `TraceReport.skipped` (line
and column); a well-formed row that is no job here (jobs CSV) is dropped and
counted; a model that neither perf_model's tables nor the generators' model
lists know (it gets perf_model's default profile), or a GPU type not in
`gpu_types`, keeps its row and is listed; a job larger than the cluster
(`total_gpus`, `max_gpus_per_job`) keeps its row and is listed in
`never_fit`. Jobs come back sorted by submit time (stable: file order among
equals); a jobs CSV's are shifted so the first submission is t = 0.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path

import msgspec

from actors.cluster.traces.jobs_csv import CsvColumns, jobs_csv_rows
from actors.cluster.traces.peers import shockwave_rows, tiresias_rows
from actors.cluster.traces.report import (
    FitProblem,
    NotHonoured,
    TraceReport,
    check_fit,
    name_counts,
)
from actors.cluster.traces.rows import (
    SECONDS_MAX,
    Parsed,
    RowProblem,
    TraceFormat,
    default_known_models,
    trace_error,
)
from actors.policies.cluster.api import TraceJob
from emulator.errors import InputError
from emulator.units import US_PER_S

__all__ = ["FORMATS", "load_trace", "parse_trace"]

FORMATS: tuple[str, ...] = ("tiresias", "shockwave", "jobs-csv")


def _rows(
    fmt: str,
    path: str,
    text: str,
    notes: list[NotHonoured],
    columns: CsvColumns | None,
    keep_states: tuple[str, ...],
    delimiter: str,
) -> Iterator[Parsed]:
    if fmt == "tiresias":
        return tiresias_rows(path, text, notes)
    if fmt == "shockwave":
        return shockwave_rows(path, text, notes)
    if columns is None:
        raise InputError("", "columns", "a jobs-csv trace needs its column mapping")
    return jobs_csv_rows(path, text, notes, columns, keep_states, delimiter)


def _from_origin(path: str, jobs: list[TraceJob], lines: dict[str, int]) -> float | None:
    """Shift absolute submission times so the first is 0; the origin in seconds."""
    if not jobs:
        return None
    origin = min(j.submit_us for j in jobs)
    for i, job in enumerate(jobs):
        rel = job.submit_us - origin
        if rel > SECONDS_MAX * US_PER_S:
            raise trace_error(
                path, lines[job.job_id], "submit", f"more than {SECONDS_MAX:g} s after the first"
            )
        jobs[i] = msgspec.structs.replace(job, submit_us=rel)
    return origin / US_PER_S


def parse_trace(
    text: str,
    fmt: TraceFormat,
    *,
    path: str = "<trace>",
    total_gpus: int | None = None,
    max_gpus_per_job: int | None = None,
    known_models: Collection[str] | None = None,
    gpu_types: Collection[str] | None = None,
    strict: bool = False,
    max_bad_rows: int = 1000,
    columns: CsvColumns | None = None,
    keep_states: tuple[str, ...] = (),
    delimiter: str = ",",
) -> tuple[tuple[TraceJob, ...], TraceReport]:
    """Parse trace `text` (see the module docstring); `path` only names it in messages.

    `known_models` defaults to perf_model's models plus the generators'
    model lists; `gpu_types` None skips the GPU-type check. `columns`,
    `keep_states` and `delimiter` are a jobs CSV's (`jobs_csv.py`).
    """
    if fmt not in FORMATS:
        raise InputError(
            "", "format", f"unknown trace format {fmt!r}; known: {', '.join(sorted(FORMATS))}"
        )
    if max_bad_rows < 0:
        raise ValueError(f"max_bad_rows must be >= 0, got {max_bad_rows}")
    known = default_known_models() if known_models is None else frozenset(known_models)
    jobs: list[TraceJob] = []
    lines: dict[str, int] = {}
    skipped: list[RowProblem] = []
    notes: list[NotHonoured] = []
    bad_rows = rows = out_of_order = 0
    unknown_models: list[tuple[str, int]] = []
    unknown_types: list[tuple[str, int]] = []
    dropped: list[tuple[str, int]] = []
    last_submit = -1
    for parsed in _rows(fmt, path, text, notes, columns, keep_states, delimiter):
        rows += 1
        problems = list(parsed.problems)
        job = parsed.job
        if job is not None and job.job_id in lines:
            problems.append(
                RowProblem(
                    line=parsed.line,
                    column="job_id",
                    value=job.job_id,
                    reason=f"duplicate of line {lines[job.job_id]}",
                )
            )
        if problems:
            first = problems[0]
            if strict:
                raise trace_error(
                    path, first.line, first.column, f"{first.reason} (value {first.value!r})"
                )
            bad_rows += 1
            skipped += problems
            if bad_rows > max_bad_rows:
                raise trace_error(
                    path,
                    first.line,
                    first.column,
                    f"more than {max_bad_rows} bad rows, the last: "
                    f"{first.reason}; is fmt={fmt!r} right?",
                )
            continue
        if job is None:
            dropped.append((parsed.dropped, parsed.line))
            continue
        jobs.append(job)
        lines[job.job_id] = parsed.line
        if job.model and job.model not in known:
            unknown_models.append((job.model, parsed.line))
        if gpu_types is not None and parsed.gpu_type and parsed.gpu_type not in gpu_types:
            unknown_types.append((parsed.gpu_type, parsed.line))
        if job.submit_us < last_submit:
            out_of_order += 1
        last_submit = job.submit_us
    if rows == 0:
        raise trace_error(path, 1, "(all)", "no data rows")
    origin = _from_origin(path, jobs, lines) if fmt == "jobs-csv" else None
    never_fit: tuple[FitProblem, ...] = ()
    if total_gpus is not None:
        never_fit = tuple(
            msgspec.structs.replace(p, line=lines[p.job_id])
            for p in check_fit(jobs, total_gpus, max_gpus_per_job)
        )
    report = TraceReport(
        path=path,
        fmt=fmt,
        rows_read=rows,
        jobs_kept=len(jobs),
        rows_skipped=bad_rows,
        skipped=tuple(skipped),
        unknown_models=name_counts(unknown_models),
        unknown_gpu_types=name_counts(unknown_types),
        never_fit=never_fit,
        out_of_order_rows=out_of_order,
        total_gpus=total_gpus,
        max_gpus_per_job=max_gpus_per_job,
        rows_dropped=len(dropped),
        dropped=name_counts(dropped),
        not_honoured=tuple(notes),
        time_origin_s=origin,
    )
    return tuple(sorted(jobs, key=lambda j: j.submit_us)), report


def load_trace(
    path: str | Path,
    fmt: TraceFormat,
    *,
    total_gpus: int | None = None,
    max_gpus_per_job: int | None = None,
    known_models: Collection[str] | None = None,
    gpu_types: Collection[str] | None = None,
    strict: bool = False,
    max_bad_rows: int = 1000,
    columns: CsvColumns | None = None,
    keep_states: tuple[str, ...] = (),
    delimiter: str = ",",
) -> tuple[tuple[TraceJob, ...], TraceReport]:
    """Read the trace file at `path` in format `fmt`: (jobs sorted by submit time, report)."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise trace_error(name, 0, "(file)", f"cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise trace_error(name, line, "(encoding)", "not UTF-8") from None
    return parse_trace(
        text,
        fmt,
        path=name,
        total_gpus=total_gpus,
        max_gpus_per_job=max_gpus_per_job,
        known_models=known_models,
        gpu_types=gpu_types,
        strict=strict,
        max_bad_rows=max_bad_rows,
        columns=columns,
        keep_states=keep_states,
        delimiter=delimiter,
    )
