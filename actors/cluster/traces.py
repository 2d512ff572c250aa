"""Import of two public cluster-trace formats, with a consistency report.

Formats (`fmt`):
- `"tiresias"`: the Tiresias simulator's CSV. A header row naming at least
  `job_id,num_gpu,submit_time,iterations,model_name,duration` (the usual
  `interval`, the gap to the next submission, is derived data and ignored;
  other extra columns are ignored too, except an optional `gpu_type`).
  Times are seconds; `duration` is the run time without preemption.
- `"shockwave"`: the Shockwave/Gavel trace. No header; twelve tab-separated
  columns `job_type, command, working_directory, num_steps_arg,
  needs_data_dir, total_steps, scale_factor, mode, priority_weight, SLO,
  duration, arrival_time` (`scale_factor` = GPUs, `mode` one of
  static/accordion/gns, times in seconds). Jobs have no id column: a job's id
  is its row's ordinal (0, 1, …, skipped rows included), as Gavel numbers them.
  The model is `job_type` without its "(batch size N)" suffix, named the way
  `actors.policies.cluster.perf_model` names it ("ResNet-18 (batch size 64)" →
  "resnet18"; the traces' "LM" is Table 2's LSTM and "Recommendation" its
  Recoder). `total_steps` becomes `iterations`, `priority_weight` `weight`.
  Not kept: the command columns, the SLO (-1 for none) and the batch size
  in `job_type` (TraceJob has no field for it; perf_model's
  `base_batch_size` gives Table 2's initial batch size by model).

What is fatal and what is not. A `trace_error` (an InputError whose
message reads "FILE:LINE: column COL: why") is raised when the file as a
whole cannot be trusted: it is unreadable, not UTF-8, or has no data rows;
the CSV header lacks a required column; `strict=True` and any row is bad; or
more than `max_bad_rows` rows are bad (a wrong format or a shifted file, not
a few typos). Everything else is per row and recoverable: a row with a
missing, malformed or out-of-range field, a wrong number of fields, or a
duplicate job id is skipped and listed in `TraceReport.skipped` (line and
column); a model that neither perf_model's tables nor the generators' model
lists know (it gets perf_model's default profile), or a GPU type not in
`gpu_types`, keeps its row and is listed; a job larger than the cluster
(`total_gpus`, `max_gpus_per_job`) keeps its row and is listed in `never_fit`.
Jobs come back sorted by submit time (stable: file order among equals).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from actors.cluster.workloads import DALLY_MODELS, GAVEL_MODELS, MODES, TIRESIAS_MODELS
from actors.policies.cluster import perf_model as pm
from actors.policies.cluster.api import TraceJob
from emulator.errors import InputError
from emulator.units import US_PER_S

__all__ = [
    "FitProblem",
    "NameCount",
    "RowProblem",
    "TraceFormat",
    "TraceReport",
    "check_fit",
    "describe",
    "load_trace",
    "model_key",
    "parse_trace",
    "trace_error",
]

TraceFormat = Literal["tiresias", "shockwave"]
# Put a limit on everything: larger values are typos or another format, and
# µs times must stay within 64-bit integers when records are encoded.
SECONDS_MAX = 1e9  # ~32 years
GPUS_MAX = 1_000_000
INT_MAX = 2**63 - 1
TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration")
SHOCKWAVE_COLUMNS = (
    "job_type",
    "command",
    "working_directory",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "mode",
    "priority_weight",
    "SLO",
    "duration",
    "arrival_time",
)
# Shockwave trace job types whose names differ from Table 2's and perf_model's.
_SHOCKWAVE_MODEL_ALIASES = {"lm": "lstm", "recommendation": "recoder"}
_BATCH_SUFFIX = re.compile(r"\s*\(batch size [^)]*\)\s*$", re.IGNORECASE)
_NON_ALNUM = re.compile(r"[^a-z0-9]")


class _Frozen(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the report Structs."""


class RowProblem(_Frozen, kw_only=True):
    """A bad field: its 1-based `line`, its `column`, the raw `value` and why."""

    line: int
    column: str
    value: str
    reason: str


class NameCount(_Frozen, kw_only=True):
    """A name the tables do not know, how many rows use it, and the first of them."""

    name: str
    count: int
    first_line: int


class FitProblem(_Frozen, kw_only=True):
    """A job that no schedule can ever run on the given cluster."""

    job_id: str
    gpus: int
    limit: int
    reason: str
    line: int | None = None


class TraceReport(_Frozen, kw_only=True):
    """What `load_trace` read, kept, skipped and found suspicious.

    `rows_read` counts data rows (not the header, not blank lines);
    `skipped` may hold several problems of one row (`rows_skipped` counts
    rows); `out_of_order_rows` counts rows submitted before the row above.
    """

    path: str
    fmt: str
    rows_read: int = 0
    jobs_kept: int = 0
    rows_skipped: int = 0
    skipped: tuple[RowProblem, ...] = ()
    unknown_models: tuple[NameCount, ...] = ()
    unknown_gpu_types: tuple[NameCount, ...] = ()
    never_fit: tuple[FitProblem, ...] = ()
    out_of_order_rows: int = 0
    total_gpus: int | None = None
    max_gpus_per_job: int | None = None


def trace_error(path: str, line: int, column: str, reason: str) -> InputError:
    """The trace cannot be trusted as a whole: an InputError naming file, line and column."""
    return InputError(f"{path}:{line}", f"column {column}", reason)


# ---- model names ---------------------------------------------------------------------
def model_key(name: str, fmt: TraceFormat = "tiresias") -> str:
    """The model key a trace's model name maps to: lower case, letters and digits only.

    A Shockwave job type loses its "(batch size N)" suffix first. perf_model's
    aliases are honoured ("InceptionV3" → "inception3").
    """
    if fmt == "shockwave":
        name = _BATCH_SUFFIX.sub("", name)
    key = _NON_ALNUM.sub("", name.lower())
    if fmt == "shockwave":
        key = _SHOCKWAVE_MODEL_ALIASES.get(key, key)
    if key in pm.PROFILES:
        return key
    prof = pm.profile(key)
    # An alias resolves to one of the table's own profile objects: find its key.
    return next(
        (k for k, v in pm.PROFILES.items() if v is prof and prof is not pm.DEFAULT_PROFILE), key
    )


def _default_known_models() -> frozenset[str]:
    return frozenset(pm.PROFILES) | set(TIRESIAS_MODELS + GAVEL_MODELS + DALLY_MODELS)


# ---- field parsing ---------------------------------------------------------------------
class _Row:
    """One data row: typed getters parse a field or record why they can't.

    A getter that fails returns a placeholder (0, "") and adds a RowProblem;
    the row becomes a job only if it has no problem at all.
    """

    def __init__(self, line: int, fields: dict[str, str], *, fields_ok: bool = True) -> None:
        self.line, self.fields = line, fields
        # A short row already has its "missing" problem: its absent columns
        # are not reported again one by one.
        self.fields_ok = fields_ok
        self.problems: list[RowProblem] = []

    def bad(self, column: str, value: str, reason: str) -> None:
        self.problems.append(RowProblem(line=self.line, column=column, value=value, reason=reason))

    def raw(self, column: str, *, required: bool = True) -> str | None:
        """The stripped field, or None if it is empty or absent (a problem if required)."""
        value = self.fields.get(column, "").strip()
        if value:
            return value
        if required and (self.fields_ok or column in self.fields):
            self.bad(column, "", "missing")
        return None

    def text(self, column: str) -> str:
        return self.raw(column) or ""

    def whole(self, column: str, minimum: int, maximum: int = INT_MAX) -> int:
        raw = self.raw(column)
        if raw is None:
            return 0
        try:
            value = int(raw)
        except ValueError:
            self.bad(column, raw, "not a whole number")
            return 0
        if not minimum <= value <= maximum:
            self.bad(
                column, raw, f"must be >= {minimum}" if value < minimum else f"must be <= {maximum}"
            )
            return 0
        return value

    def number(
        self,
        column: str,
        *,
        lower: float = -math.inf,
        strict: bool = False,
        upper: float = math.inf,
    ) -> float:
        """A finite number in [lower, upper] (lower excluded if strict)."""
        raw = self.raw(column)
        if raw is None:
            return 0.0
        try:
            value = float(raw)
        except ValueError:
            self.bad(column, raw, "not a number")
            return 0.0
        if not math.isfinite(value):
            self.bad(column, raw, "must be finite")
        elif value < lower or (strict and value == lower):
            self.bad(column, raw, f"must be {'>' if strict else '>='} {lower:g}")
        elif value > upper:
            self.bad(column, raw, f"must be <= {upper:g}")
        else:
            return value
        return 0.0

    def us(self, column: str, *, positive: bool) -> int:
        """Seconds in the file, µs out: in [0, SECONDS_MAX], and >= 1 µs if `positive`."""
        before = len(self.problems)
        us = round(self.number(column, lower=0.0, strict=positive, upper=SECONDS_MAX) * US_PER_S)
        if positive and us < 1 and len(self.problems) == before and column in self.fields:
            self.bad(column, self.fields[column].strip(), "rounds to 0 µs")
        return us

    def choice(self, column: str, options: Sequence[str]) -> str:
        raw = self.raw(column)
        if raw is not None and raw not in options:
            self.bad(column, raw, f"not one of {'/'.join(options)}")
        return raw or options[0]


class _Parsed(msgspec.Struct, frozen=True):
    """One data row: its job (None if it has problems) and its optional GPU type."""

    line: int
    job: TraceJob | None
    problems: tuple[RowProblem, ...]
    gpu_type: str = ""


# ---- the two formats --------------------------------------------------------------------
def _tiresias_rows(path: str, text: str) -> Iterator[_Parsed]:
    reader = csv.reader(text.splitlines())
    header: list[str] | None = None
    for fields in reader:
        line = reader.line_num
        if not any(f.strip() for f in fields):
            continue
        if header is None:
            header = [f.strip().lstrip("\ufeff") for f in fields]
            for col in TIRESIAS_COLUMNS:
                if col not in header:
                    raise trace_error(path, line, col, f"missing from the header {header}")
            continue
        row = _Row(line, dict(zip(header, fields, strict=False)))
        if len(fields) > len(header):
            row.bad(
                f"(field {len(header) + 1})",
                fields[len(header)],
                f"row has {len(fields)} fields, the header {len(header)}",
            )
        job_id = row.text("job_id")
        gpus = row.whole("num_gpu", 1, GPUS_MAX)
        submit_us = row.us("submit_time", positive=False)
        iterations = row.whole("iterations", 0)
        model = row.text("model_name")
        duration_us = row.us("duration", positive=True)
        gpu_type = row.raw("gpu_type", required=False) or ""
        job = None
        if not row.problems:
            job = TraceJob(
                job_id=job_id,
                submit_us=submit_us,
                gpus=gpus,
                model=model_key(model),
                duration_us=duration_us,
                iterations=iterations,
            )
        yield _Parsed(line, job, tuple(row.problems), gpu_type)
    if header is None:
        raise trace_error(path, 1, "(header)", "empty file: no header row")


def _shockwave_rows(path: str, text: str) -> Iterator[_Parsed]:
    del path  # every problem of this format is per row
    want = len(SHOCKWAVE_COLUMNS)
    ordinal = 0
    for line, raw_line in enumerate(text.splitlines(), start=1):
        if not raw_line.strip():
            continue
        fields = raw_line.split("\t")
        n = len(fields)
        row = _Row(line, dict(zip(SHOCKWAVE_COLUMNS, fields, strict=False)), fields_ok=n >= want)
        if n < want:
            row.bad(
                SHOCKWAVE_COLUMNS[n], "", f"missing: row has {n} of {want} tab-separated fields"
            )
        elif n > want:
            row.bad(f"(field {want + 1})", fields[want], f"row has {n} fields, expected {want}")
        job_type = row.text("job_type")
        row.choice("needs_data_dir", ("0", "1"))
        steps = row.whole("total_steps", 1)
        gpus = row.whole("scale_factor", 1, GPUS_MAX)
        mode = row.choice("mode", MODES)
        weight = row.number("priority_weight", lower=0.0, strict=True)
        row.number("SLO")  # -1 means none; checked only as a sign of a shifted row
        duration_us = row.us("duration", positive=True)
        submit_us = row.us("arrival_time", positive=False)
        job = None
        if not row.problems:
            job = TraceJob(
                job_id=str(ordinal),
                submit_us=submit_us,
                gpus=gpus,
                model=model_key(job_type, "shockwave"),
                duration_us=duration_us,
                iterations=steps,
                mode=mode,  # type: ignore[arg-type]  # checked against MODES above
                weight=weight,
            )
        ordinal += 1
        yield _Parsed(line, job, tuple(row.problems))


_READERS = {"tiresias": _tiresias_rows, "shockwave": _shockwave_rows}


# ---- loading ---------------------------------------------------------------------------
def _names(seen: Iterable[tuple[str, int]]) -> tuple[NameCount, ...]:
    counts: dict[str, list[int]] = {}
    for name, line in seen:
        entry = counts.setdefault(name, [0, line])
        entry[0] += 1
    return tuple(NameCount(name=k, count=c, first_line=f) for k, (c, f) in sorted(counts.items()))


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
) -> tuple[tuple[TraceJob, ...], TraceReport]:
    """Parse trace `text` (see the module docstring); `path` only names it in messages.

    `known_models` defaults to perf_model's models plus the generators'
    model lists; `gpu_types` None skips the GPU-type check.
    """
    if fmt not in _READERS:
        raise InputError(
            "", "format", f"unknown trace format {fmt!r}; known: {', '.join(sorted(_READERS))}"
        )
    if max_bad_rows < 0:
        raise ValueError(f"max_bad_rows must be >= 0, got {max_bad_rows}")
    known = _default_known_models() if known_models is None else frozenset(known_models)
    jobs: list[TraceJob] = []
    lines: dict[str, int] = {}
    skipped: list[RowProblem] = []
    bad_rows = rows = out_of_order = 0
    unknown_models: list[tuple[str, int]] = []
    unknown_types: list[tuple[str, int]] = []
    last_submit = -1
    for parsed in _READERS[fmt](path, text):
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
        assert job is not None
        jobs.append(job)
        lines[job.job_id] = parsed.line
        if job.model not in known:
            unknown_models.append((job.model, parsed.line))
        if gpu_types is not None and parsed.gpu_type and parsed.gpu_type not in gpu_types:
            unknown_types.append((parsed.gpu_type, parsed.line))
        if job.submit_us < last_submit:
            out_of_order += 1
        last_submit = job.submit_us
    if rows == 0:
        raise trace_error(path, 1, "(all)", "no data rows")
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
        unknown_models=_names(unknown_models),
        unknown_gpu_types=_names(unknown_types),
        never_fit=never_fit,
        out_of_order_rows=out_of_order,
        total_gpus=total_gpus,
        max_gpus_per_job=max_gpus_per_job,
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
    )


def check_fit(
    jobs: Sequence[TraceJob], total_gpus: int, max_gpus_per_job: int | None = None
) -> tuple[FitProblem, ...]:
    """Jobs that can never run: more GPUs than the cluster, or than one job may take.

    `max_gpus_per_job` is a per-job cap the caller imposes (e.g. one machine
    for a policy that only consolidates); None means the cluster size.
    """
    if total_gpus < 1:
        raise ValueError(f"total_gpus must be >= 1, got {total_gpus}")
    if max_gpus_per_job is not None and max_gpus_per_job < 1:
        raise ValueError(f"max_gpus_per_job must be >= 1, got {max_gpus_per_job}")
    out = []
    for job in jobs:
        if job.gpus > total_gpus:
            out.append(
                FitProblem(
                    job_id=job.job_id,
                    gpus=job.gpus,
                    limit=total_gpus,
                    reason=f"needs {job.gpus} GPUs, the cluster has {total_gpus}",
                )
            )
        elif max_gpus_per_job is not None and job.gpus > max_gpus_per_job:
            out.append(
                FitProblem(
                    job_id=job.job_id,
                    gpus=job.gpus,
                    limit=max_gpus_per_job,
                    reason=f"needs {job.gpus} GPUs, at most {max_gpus_per_job} per job",
                )
            )
    return tuple(out)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def describe(report: TraceReport) -> str:
    """The report as a few lines for people."""
    r = report
    out = [
        f"trace {r.path} ({r.fmt}): {_n(r.rows_read, 'row')} read, "
        f"{_n(r.jobs_kept, 'job')} kept, {_n(r.rows_skipped, 'row')} skipped"
    ]
    if r.skipped:
        out.append("skipped rows:")
        out += [
            f"  line {p.line}, column {p.column}: {p.reason}"
            + (f" ({p.value!r})" if p.value else "")
            for p in r.skipped
        ]
    if r.unknown_models:
        out.append("unknown models (jobs kept, default performance profile):")
        out += [
            f"  {n.name}: {_n(n.count, 'job')}, first at line {n.first_line}"
            for n in r.unknown_models
        ]
    if r.unknown_gpu_types:
        out.append("unknown GPU types (jobs kept):")
        out += [
            f"  {n.name}: {_n(n.count, 'job')}, first at line {n.first_line}"
            for n in r.unknown_gpu_types
        ]
    if r.total_gpus is not None:
        cap = "" if r.max_gpus_per_job is None else f", at most {r.max_gpus_per_job} per job"
        if r.never_fit:
            out.append(f"jobs that can never run on {r.total_gpus} GPUs{cap}:")
            out += [f"  job {p.job_id} (line {p.line}): {p.reason}" for p in r.never_fit]
        else:
            out.append(f"every job fits {r.total_gpus} GPUs{cap}")
    if r.out_of_order_rows:
        out.append(
            f"{_n(r.out_of_order_rows, 'row')} submitted before the row above (jobs re-sorted)"
        )
    return "\n".join(out)
