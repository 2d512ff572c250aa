"""A jobs CSV with a column mapping: public GPU-cluster logs read as they are published.

Helios (`cluster_log.csv`: `job_id, user, vc, gpu_num, state, submit_time,
start_time, end_time, duration`, ISO dates), AcmeTrace (`trace_seren.csv`,
`trace_kalos.csv`: the same names, dates with a UTC offset) and per-VC logs
derived from Philly (epoch seconds) all hold one job per row under a header,
with different names for the same things. The scenario says which column
is which (`CsvColumns`, header names): the job id, its GPUs, its submission
time, and how long it ran, either a `duration` column (seconds) or `start`
and `end` times; optionally who submitted it (`user`), its final `state`
and its `model`.

Times are seconds (epoch or relative) or ISO 8601 dates (no offset: UTC),
and the whole trace is shifted so that its first submission is t = 0 (the
report's `time_origin_s` keeps the original). A job's run time is what it
ran in the log, taken as its run time alone (logs have no better).

Well-formed rows that are not jobs for this run are dropped and counted by
reason, never bad: a CPU-only job (0 GPUs), one that never ran (no start or
end, or an empty duration) or ran 0 s, and one whose state is not in
`keep_states` (when given). Columns outside the mapping, a mapped `user`
(kept, used by no policy) and a missing `model` (every job gets the default
performance profile) are listed as not honoured. A malformed field is a bad
row, as in the peer formats: fatal with file, line and column unless skipped.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator

import msgspec

from actors.cluster.traces.report import NotHonoured
from actors.cluster.traces.rows import (
    GPUS_MAX,
    SECONDS_MAX,
    Parsed,
    Row,
    model_key,
    trace_error,
)
from actors.policies.cluster.api import TraceJob
from emulator.units import US_PER_S

__all__ = ["CsvColumns", "jobs_csv_rows"]

# Put a limit on everything: a delimiter is one character, a state list short.
STATES_MAX = 64


class CsvColumns(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which header column holds what; "" leaves an optional one out.

    `duration` (seconds) or both `start` and `end` (times) give the run time.
    """

    job_id: str
    gpus: str
    submit: str
    duration: str = ""
    start: str = ""
    end: str = ""
    user: str = ""
    state: str = ""
    model: str = ""

    def __post_init__(self) -> None:
        for name in ("job_id", "gpus", "submit"):
            if not getattr(self, name).strip():
                raise ValueError(f"columns.{name} must name a column")
        if self.duration and (self.start or self.end):
            raise ValueError("columns: give `duration` or `start` and `end`, not both")
        if not self.duration and not (self.start and self.end):
            raise ValueError("columns: the run time needs `duration`, or both `start` and `end`")

    def mapped(self) -> dict[str, str]:
        """Field → column, for the fields given."""
        return {k: v for k, v in msgspec.structs.asdict(self).items() if v}


def _run_s(row: Row, cols: CsvColumns) -> tuple[float | None, str]:
    """The job's run time in seconds, or None with the reason the row is dropped ("" if bad)."""
    if cols.duration:
        if row.raw(cols.duration, required=False) is None:
            return None, "never ran (no duration)"
        before = len(row.problems)
        seconds = row.number(cols.duration, lower=0.0, upper=SECONDS_MAX)
        if len(row.problems) > before:
            return None, ""
        return (None, "ran 0 s") if seconds == 0 else (seconds, "")
    start, end = row.instant_s(cols.start), row.instant_s(cols.end)
    if row.problems:
        return None, ""
    if start is None or end is None:
        return None, "never ran (no start or end time)"
    if end < start:
        row.bad(cols.end, row.fields.get(cols.end, "").strip(), "before the start time")
        return None, ""
    return (None, "ran 0 s") if end == start else (end - start, "")


def _parse(row: Row, cols: CsvColumns, keep_states: tuple[str, ...]) -> Parsed:
    job_id = row.text(cols.job_id)
    gpus = row.whole(cols.gpus, 0, GPUS_MAX)
    submit_s = row.instant_s(cols.submit)
    if submit_s is None and not row.problems:
        row.bad(cols.submit, "", "missing")
    run_s, dropped = _run_s(row, cols)
    state = (row.raw(cols.state, required=False) or "") if cols.state else ""
    if row.problems:
        return Parsed(row.line, None, tuple(row.problems))
    # One reason per row, the first of: no GPUs, a state left out, no run time.
    if gpus == 0:
        dropped = "no GPUs (a CPU job)"
    elif keep_states and state not in keep_states:
        dropped = f"state {state or '(empty)'} not kept"
    if dropped or run_s is None or submit_s is None:
        return Parsed(row.line, None, (), dropped=dropped or "never ran")
    duration_us = round(run_s * US_PER_S)
    if duration_us < 1:
        return Parsed(row.line, None, (), dropped="ran under 1 µs")
    model = row.raw(cols.model, required=False) if cols.model else None
    job = TraceJob(
        job_id=job_id,
        # Absolute for now: the loader shifts every job by the first submission.
        submit_us=round(submit_s * US_PER_S),
        gpus=gpus,
        model=model_key(model) if model else "",
        duration_us=duration_us,
        user=(row.raw(cols.user, required=False) or "") if cols.user else "",
    )
    return Parsed(row.line, job, ())


def jobs_csv_rows(
    path: str,
    text: str,
    notes: list[NotHonoured],
    cols: CsvColumns,
    keep_states: tuple[str, ...] = (),
    delimiter: str = ",",
) -> Iterator[Parsed]:
    """The rows of a jobs CSV under the column mapping `cols` (see the module docstring)."""
    if len(delimiter) != 1:
        raise trace_error(path, 0, "(delimiter)", f"must be one character, got {delimiter!r}")
    if len(keep_states) > STATES_MAX:
        raise trace_error(path, 0, "(keep_states)", f"at most {STATES_MAX} states")
    reader = csv.reader(text.splitlines(), delimiter=delimiter)
    header: list[str] | None = None
    rows = 0
    for fields in reader:
        line = reader.line_num
        if not any(f.strip() for f in fields):
            continue
        if header is None:
            header = [f.strip().lstrip("\ufeff") for f in fields]
            for field, col in cols.mapped().items():
                if col not in header:
                    raise trace_error(
                        path, line, col, f"mapped as {field} but missing from the header {header}"
                    )
            continue
        rows += 1
        row = Row(line, dict(zip(header, fields, strict=False)))
        if len(fields) > len(header):
            row.bad(
                f"(field {len(header) + 1})",
                fields[len(header)],
                f"row has {len(fields)} fields, the header {len(header)}",
            )
        yield _parse(row, cols, keep_states)
    if header is None:
        raise trace_error(path, 1, "(header)", "empty file: no header row")
    used = set(cols.mapped().values())
    for col in header:
        if col and col not in used:
            notes.append(NotHonoured(what=f"column {col}", rows=rows, why="not in the mapping"))
    if cols.user:
        notes.append(
            NotHonoured(what="user", rows=rows, why="kept on each job; no policy here uses it")
        )
    if not cols.model:
        notes.append(
            NotHonoured(
                what="model",
                rows=rows,
                why="no column mapped: every job gets the default performance profile",
            )
        )
