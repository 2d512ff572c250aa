"""A trace's consistency report: what was read, kept, skipped, dropped and not honoured.

Nothing a trace says is lost without a word. A bad row is skipped (or
fatal) and listed with its line and column; a well-formed row that is no
job for this cluster (a CPU-only job of a cluster log, one that never ran,
a state left out) is dropped and counted by reason; a model or GPU type the
tables do not know keeps its row and is listed; and whatever a format
carries that the run does not use (a column outside the mapping, a job
type's batch size under `semantics.batch_size = "model"`, an SLO) is listed
in `not_honoured` with the rows it concerns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from actors.cluster.traces.rows import RowProblem
from actors.policies.cluster.api import TraceJob

__all__ = [
    "FitProblem",
    "NameCount",
    "NotHonoured",
    "TraceReport",
    "check_fit",
    "describe",
    "name_counts",
]


class _Frozen(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the report Structs."""


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


class NotHonoured(_Frozen, kw_only=True):
    """Something the trace says that the run does not use: `what`, in how many `rows`, and why."""

    what: str
    rows: int
    why: str


class TraceReport(_Frozen, kw_only=True):
    """What `load_trace` read, kept, skipped and found suspicious.

    `rows_read` counts data rows (not the header, not blank lines);
    `skipped` may hold several problems of one row (`rows_skipped` counts
    rows); `out_of_order_rows` counts rows submitted before the row above.
    `dropped` counts well-formed rows that are not jobs, by reason;
    `time_origin_s` is the absolute time a cluster log's first submission
    had (it becomes t = 0; None for the peer formats, already relative).
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
    rows_dropped: int = 0
    dropped: tuple[NameCount, ...] = ()
    not_honoured: tuple[NotHonoured, ...] = ()
    time_origin_s: float | None = None


def name_counts(seen: Iterable[tuple[str, int]]) -> tuple[NameCount, ...]:
    """(name, line) pairs counted by name, each with its first line, sorted by name."""
    counts: dict[str, list[int]] = {}
    for name, line in seen:
        entry = counts.setdefault(name, [0, line])
        entry[0] += 1
    return tuple(NameCount(name=k, count=c, first_line=f) for k, (c, f) in sorted(counts.items()))


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
        + (f", {_n(r.rows_dropped, 'row')} dropped" if r.rows_dropped else "")
    ]
    if r.skipped:
        out.append("skipped rows:")
        out += [
            f"  line {p.line}, column {p.column}: {p.reason}"
            + (f" ({p.value!r})" if p.value else "")
            for p in r.skipped
        ]
    if r.dropped:
        out.append("dropped rows (well-formed, not jobs for this run):")
        out += [
            f"  {n.name}: {_n(n.count, 'row')}, first at line {n.first_line}" for n in r.dropped
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
    if r.not_honoured:
        out.append("not honoured:")
        out += [f"  {n.what} ({_n(n.rows, 'row')}): {n.why}" for n in r.not_honoured]
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
    if r.time_origin_s is not None:
        out.append(f"times relative to the first submission, at {r.time_origin_s:.0f} s")
    return "\n".join(out)
