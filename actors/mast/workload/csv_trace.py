"""CSV traces of workloads: the format (`CSV_FORMAT`), writing and reading them.

A scenario may import a trace instead of generating its workloads
(`workload_csv`); `write_csv_trace` writes what the generator made in the
same format. Reading checks every cell, and an error names the file, the
line and the column (an `InputError` whose source is the file and whose path
is `line N`); a caller's `check` cross-checks each workload against the world
the same way.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import get_args

from emulator.errors import InputError
from emulator.units import US_PER_S
from store.mast.records import JobRole, JobSpec, WorkloadSpec

CSV_COLUMNS = (
    "workload_id",
    "tenant",
    "submit_s",
    "recurring",
    "job",
    "role",
    "gpu_type",
    "gpus",
    "cpu_machines",
    "work_s",
    "checkpoint_s",
    "input_tables",
)
CSV_FORMAT = """\
One header row naming the columns (any order), then one row per job:
  workload_id   workload id; a workload's rows must be consecutive
  tenant        tenant name (same on every row of a workload)
  submit_s      submission time, seconds (decimal, µs precision; same per workload)
  recurring     true/false (same per workload)
  job           job name, unique within the workload
  role          trainer | preprocess | parameter-server | evaluator
  gpu_type      GPU type of a GPU job; empty for a CPU job
  gpus          GPUs of a GPU job (≥ 1), 0 for a CPU job
  cpu_machines  CPU machines of a CPU job (≥ 1), 0 for a GPU job
  work_s        uninterrupted run time, seconds (≥ 0)
  checkpoint_s  checkpoint interval, seconds (≥ 1)
  input_tables  table names separated by ';' (may be empty)
"""
_ROLES = frozenset(get_args(JobRole))


def _seconds_text(us: int) -> str:
    whole, frac = divmod(us, US_PER_S)
    return str(whole) if frac == 0 else f"{whole}.{frac:06d}".rstrip("0")


def write_csv_trace(path: str | Path, workloads: Sequence[WorkloadSpec]) -> None:
    """Write `workloads` in the CSV trace format (`CSV_FORMAT`)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(CSV_COLUMNS)
        for w in workloads:
            for j in w.jobs:
                out.writerow(
                    (
                        w.id,
                        w.tenant,
                        _seconds_text(w.submit_at_us),
                        "true" if w.recurring else "false",
                        j.name,
                        j.role,
                        j.gpu_type or "",
                        j.gpus,
                        j.cpu_machines,
                        _seconds_text(j.work_us),
                        _seconds_text(j.checkpoint_every_us),
                        ";".join(j.input_tables),
                    )
                )


class _Row:
    """One CSV row with its position, for error messages."""

    def __init__(self, path: str, line: int, cells: dict[str, str]) -> None:
        self.path, self.line, self.cells = path, line, cells

    def fail(self, column: str, message: str) -> InputError:
        return InputError(self.path, f"line {self.line}", f"column {column!r}: {message}")

    def text(self, column: str, *, required: bool = True) -> str:
        value = self.cells[column].strip()
        if required and not value:
            raise self.fail(column, "must not be empty")
        return value

    def count(self, column: str) -> int:
        value = self.text(column)
        if not value.isdigit():
            raise self.fail(column, f"expected a whole number ≥ 0, got {value!r}")
        return int(value)

    def micros(self, column: str, *, positive: bool = False) -> int:
        value = self.text(column)
        try:
            seconds = Decimal(value)
        except InvalidOperation:
            raise self.fail(column, f"expected seconds, got {value!r}") from None
        if not seconds.is_finite() or seconds < 0 or (positive and seconds == 0):
            raise self.fail(
                column, f"expected seconds {'> 0' if positive else '≥ 0'}, got {value!r}"
            )
        us = seconds * US_PER_S
        if us != us.to_integral_value() or us > 2**62:
            raise self.fail(column, f"{value!r} is not a whole number of microseconds")
        return int(us)

    def flag(self, column: str) -> bool:
        value = self.text(column).lower()
        if value not in ("true", "false"):
            raise self.fail(column, f"expected true or false, got {value!r}")
        return value == "true"


def _job(row: _Row) -> JobSpec:
    role = row.text("role")
    if role not in _ROLES:
        raise row.fail("role", f"expected one of {', '.join(sorted(_ROLES))}, got {role!r}")
    gpu_type = row.text("gpu_type", required=False) or None
    gpus, cpu_machines = row.count("gpus"), row.count("cpu_machines")
    if gpu_type is not None:
        if gpus < 1:
            raise row.fail("gpus", "a GPU job (gpu_type set) needs at least one GPU")
        if cpu_machines:
            raise row.fail("cpu_machines", "must be 0 for a GPU job (gpu_type set)")
    else:
        if gpus:
            raise row.fail("gpu_type", "a job with GPUs needs a GPU type")
        if cpu_machines < 1:
            raise row.fail("cpu_machines", "a CPU job (no gpu_type) needs at least one machine")
    tables = row.text("input_tables", required=False)
    names = tuple(t.strip() for t in tables.split(";")) if tables else ()
    if any(not t for t in names):
        raise row.fail("input_tables", f"empty table name in {tables!r}")
    return JobSpec(
        name=row.text("job"),
        role=role,  # type: ignore[arg-type]  # checked against JobRole above
        gpu_type=gpu_type,
        gpus=gpus,
        cpu_machines=cpu_machines,
        work_us=row.micros("work_s"),
        checkpoint_every_us=row.micros("checkpoint_s", positive=True),
        input_tables=names,
    )


def _csv_rows(source: str, text: str) -> Iterator[_Row]:
    """The non-blank rows after a header that names every column once."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in CSV_COLUMNS if c not in header]
        unknown = [c for c in header if c not in CSV_COLUMNS]
        if missing or unknown or len(set(header)) != len(header):
            raise InputError(
                source,
                "line 1",
                f"header must name each of {', '.join(CSV_COLUMNS)} once"
                f" (missing {missing}, unknown {unknown})",
            )
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(header):
                raise InputError(
                    source, f"line {line}", f"expected {len(header)} columns, got {len(cells)}"
                )
            yield _Row(source, line, dict(zip(header, cells, strict=True)))
    except csv.Error as error:
        raise InputError(source, f"line {reader.line_num}", str(error)) from None


# A workload's cross-check: (key path below it, why) of its first problem, or None.
WorkloadCheck = Callable[[WorkloadSpec], tuple[str, str] | None]
# Columns that hold what a workload's key path names.
_COLUMN_OF = {
    "tenant": "tenant",
    "gpu_type": "gpu_type",
    "gpus": "gpus",
    "cpu_machines": "cpu_machines",
    "name": "job",
    "work_us": "work_s",
    "checkpoint_every_us": "checkpoint_s",
}


def read_csv_trace(
    path: str | Path, *, check: WorkloadCheck | None = None, workloads_max: int | None = None
) -> list[WorkloadSpec]:
    """Read a CSV trace (`CSV_FORMAT`); `InputError` names the file, line and column.

    `check` is asked about each workload once its rows are read; its
    complaint is reported at the workload's first line.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(source, "", f"cannot read: {error}") from None
    workloads = _read(source, text, check, workloads_max)
    return workloads


def _read(
    source: str, text: str, check: WorkloadCheck | None, workloads_max: int | None
) -> list[WorkloadSpec]:
    # (workload_id, tenant, submit_at_us, recurring) of each workload, and its jobs.
    groups: list[tuple[tuple[str, str, int, bool], list[JobSpec]]] = []
    firsts: list[_Row] = []
    seen: set[str] = set()
    for row in _csv_rows(source, text):
        head = (
            row.text("workload_id"),
            row.text("tenant"),
            row.micros("submit_s"),
            row.flag("recurring"),
        )
        if not groups or head[0] != groups[-1][0][0]:
            if head[0] in seen:
                raise row.fail("workload_id", f"rows of {head[0]!r} are not consecutive")
            if workloads_max is not None and len(groups) >= workloads_max:
                raise row.fail("workload_id", f"more than {workloads_max:,} workloads")
            _checked(groups, firsts, check)
            seen.add(head[0])
            groups.append((head, []))
            firsts.append(row)
        first, jobs = groups[-1]
        for i, column in enumerate(("tenant", "submit_s", "recurring"), start=1):
            if head[i] != first[i]:
                raise row.fail(column, f"differs from the first row of {head[0]!r}")
        job = _job(row)
        if any(j.name == job.name for j in jobs):
            raise row.fail("job", f"duplicate job {job.name!r} in {head[0]!r}")
        jobs.append(job)
    _checked(groups, firsts, check)
    return [_workload(head, jobs) for head, jobs in groups]


def _workload(head: tuple[str, str, int, bool], jobs: list[JobSpec]) -> WorkloadSpec:
    wid, tenant, at, recurring = head
    return WorkloadSpec(
        id=wid, tenant=tenant, submit_at_us=at, recurring=recurring, jobs=tuple(jobs)
    )


def _checked(
    groups: list[tuple[tuple[str, str, int, bool], list[JobSpec]]],
    firsts: list[_Row],
    check: WorkloadCheck | None,
) -> None:
    """Cross-check the last workload read (at its first line), if any."""
    if check is None or not groups:
        return
    problem = check(_workload(*groups[-1]))
    if problem is not None:
        field = problem[0].rpartition(".")[2].partition("[")[0]
        raise firsts[-1].fail(_COLUMN_OF.get(field, "workload_id"), problem[1])
