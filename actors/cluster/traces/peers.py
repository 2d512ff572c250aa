"""The two peer simulators' trace formats: the Tiresias CSV and the Shockwave/Gavel TSV.

- `"tiresias"`: the Tiresias simulator's CSV. A header row naming at least
  `job_id,num_gpu,submit_time,iterations,model_name,duration` (the usual
  `interval`, the gap to the next submission, is derived data; an optional
  `gpu_type` is checked against the cluster's; every other column is
  listed as not honoured). Times are seconds; `duration` is the run time
  without preemption.
- `"shockwave"`: the Shockwave/Gavel trace. No header; twelve tab-separated
  columns `job_type, command, working_directory, num_steps_arg,
  needs_data_dir, total_steps, scale_factor, mode, priority_weight, SLO,
  duration, arrival_time` (`scale_factor` = GPUs, `mode` one of
  static/accordion/gns, times in seconds). Jobs have no id column: a job's id
  is its row's ordinal (0, 1, …, skipped rows included), as Gavel numbers them.
  The model is `job_type` without its "(batch size N)" suffix, named the way
  `actors.policies.cluster.perf_model` names it ("ResNet-18 (batch size 64)" →
  "resnet18"; the traces' "LM" is Table 2's LSTM and "Recommendation" its
  Recoder), and N is kept as the job's `batch_size` (what the run makes of
  it is `semantics.batch_size`'s). `total_steps` becomes `iterations`,
  `priority_weight` `weight`. Not used, and listed as such: the command
  columns (how the peer launches a job) and any SLO other than -1.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator

from actors.cluster.traces.report import NotHonoured
from actors.cluster.traces.rows import BATCH_SUFFIX, GPUS_MAX, Parsed, Row, model_key, trace_error
from actors.cluster.workloads import MODES
from actors.policies.cluster.api import TraceJob

__all__ = ["SHOCKWAVE_COLUMNS", "TIRESIAS_COLUMNS", "shockwave_rows", "tiresias_rows"]

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
_SHOCKWAVE_LAUNCH = ("command", "working_directory", "num_steps_arg", "needs_data_dir")
_TIRESIAS_DERIVED = {"interval": "the gap to the next submission, derived from submit_time"}


def tiresias_rows(path: str, text: str, notes: list[NotHonoured]) -> Iterator[Parsed]:
    """The Tiresias CSV's rows; columns it does not use go to `notes` once the file is read."""
    reader = csv.reader(text.splitlines())
    header: list[str] | None = None
    rows = 0
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
        rows += 1
        row = Row(line, dict(zip(header, fields, strict=False)))
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
        yield Parsed(line, job, tuple(row.problems), gpu_type)
    if header is None:
        raise trace_error(path, 1, "(header)", "empty file: no header row")
    for col in header:
        if col and col not in TIRESIAS_COLUMNS and col != "gpu_type":
            why = _TIRESIAS_DERIVED.get(col, "no job field takes it")
            notes.append(NotHonoured(what=f"column {col}", rows=rows, why=why))


def _batch_size(row: Row, job_type: str) -> int:
    """The N of a job type's "(batch size N)" (0 without one: A3C, CycleGAN)."""
    match = BATCH_SUFFIX.search(job_type)
    if match is None:
        return 0
    try:
        size = int(match.group(1))
    except ValueError:
        size = 0
    if size < 1:
        row.bad("job_type", job_type, "batch size must be a whole number >= 1")
    return max(size, 0)


def shockwave_rows(path: str, text: str, notes: list[NotHonoured]) -> Iterator[Parsed]:
    """The Shockwave TSV's rows (every problem of this format is per row)."""
    del path
    want = len(SHOCKWAVE_COLUMNS)
    ordinal = slos = 0
    for line, raw_line in enumerate(text.splitlines(), start=1):
        if not raw_line.strip():
            continue
        fields = raw_line.split("\t")
        n = len(fields)
        row = Row(line, dict(zip(SHOCKWAVE_COLUMNS, fields, strict=False)), fields_ok=n >= want)
        if n < want:
            row.bad(
                SHOCKWAVE_COLUMNS[n], "", f"missing: row has {n} of {want} tab-separated fields"
            )
        elif n > want:
            row.bad(f"(field {want + 1})", fields[want], f"row has {n} fields, expected {want}")
        job_type = row.text("job_type")
        batch_size = _batch_size(row, job_type)
        row.choice("needs_data_dir", ("0", "1"))
        steps = row.whole("total_steps", 1)
        gpus = row.whole("scale_factor", 1, GPUS_MAX)
        mode = row.choice("mode", MODES)
        weight = row.number("priority_weight", lower=0.0, strict=True)
        slo = row.number("SLO")  # -1 means none; also a sign of a shifted row
        duration_us = row.us("duration", positive=True)
        submit_us = row.us("arrival_time", positive=False)
        job = None
        if not row.problems:
            slos += slo != -1.0
            job = TraceJob(
                job_id=str(ordinal),
                submit_us=submit_us,
                gpus=gpus,
                model=model_key(job_type, "shockwave"),
                duration_us=duration_us,
                iterations=steps,
                mode=mode,  # type: ignore[arg-type]  # checked against MODES above
                weight=weight,
                batch_size=batch_size,
            )
        ordinal += 1
        yield Parsed(line, job, tuple(row.problems))
    if ordinal:
        notes.append(
            NotHonoured(
                what=f"columns {', '.join(_SHOCKWAVE_LAUNCH)}",
                rows=ordinal,
                why="how the peer launches a job; nothing of it is emulated",
            )
        )
    if slos:
        notes.append(NotHonoured(what="SLO", rows=slos, why="no cluster policy here has deadlines"))
