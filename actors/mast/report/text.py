"""The rows of a MAST report as people read them: the terminal table, and the HTML page's.

`_ROWS` chooses the headline figures, their order and what each measures
(printed under it: a figure without its definition reads as a contradiction,
the SLO's 0% beside a p95 time to start far past the SLO); `report_rows` formats
them (rates as percentages, `-` for a figure the run could not give) once
for both the terminal (`render_text`, several reports side by side for
`mastemu compare`) and the HTML page (`actors.mast.report.page`).
"""

from __future__ import annotations

from typing import Any


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if unit == "%":
            return f"{100 * value:.1f}%"
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _get(report: dict[str, Any], path: str) -> Any:
    value: Any = report
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


# (label, key path, unit, what it measures); a row without a path is a section heading.
# One word for one thing: a "scheduling event" is a submission or a return to the
# queue, up to the next RUNNING; its "time to start" is that whole wait; "within
# quota" at its start is what the GMS's last ranking before its start said; its
# "quota time" is its wait since the ranking last put it within quota (a ranking over
# quota stops that clock, the next one within restarts it): what the SLO judges.
# `{slo}` is the report's `slo_start_s`, `{bucket}` its SLO bucket width.
_ROWS: list[tuple[str, str | None, str, str]] = [
    ("run", None, "", ""),
    ("  trace hash", "trace_hash", "", ""),
    ("  status", "status", "", ""),
    ("  emulated s", "emulated_s", "", ""),
    ("  invariant violations", "invariant_violations", "", ""),
    ("workloads", None, "", "state at the end of the run"),
    *[
        (f"  {k.replace('_', ' ')}", f"workloads.{k}", "", "")
        for k in (
            "submitted",
            "completed",
            "running",
            "dispatching",
            "pending",
            "waiting_data",
            "failed",
            "withdrawn",
            "lost",
        )
    ],
    (
        "  scheduling events",
        "scheduling_events",
        "",
        "submissions and returns to the queue (preempted, failed), each up to its next start",
    ),
    ("  preemptions", "preemptions", "", ""),
    ("allocation", None, "", ""),
    (
        "  GPU allocation rate",
        "gpu_allocation_rate",
        "%",
        "GPU-hours held by jobs over GPU-hours of the ML clusters, whole run",
    ),
    ("  CPU allocation rate", "cpu_allocation_rate", "%", "the same for CPU machines"),
    (
        "  loaded from s",
        "loaded_from_s",
        "",
        "first auction in which a GPU workload found a region without room",
    ),
    (
        "  GPU allocation once loaded",
        "gpu_allocation_rate_loaded",
        "%",
        "GPU allocation rate from `loaded from` on",
    ),
    ("SLO: start within {slo} s of quota time", None, "", ""),
    (
        "  violation rate",
        "slo_violation_rate",
        "%",
        "share of the events judged whose quota time passed {slo} s (quota time: the wait "
        "since the GMS ranking last put the event within quota)",
    ),
    (
        "  violation rate, high priority",
        "slo_violation_rate_high_priority",
        "%",
        "the same for tenants of priority 0 and 1",
    ),
    (
        "  worst bucket, high priority",
        "slo_violation_rate_high_priority_max_bucket",
        "%",
        "highest high-priority violation rate of one {bucket} s bucket (by clock start)",
    ),
    (
        "  events judged",
        "slo_events.judged",
        "",
        "events within quota at their start that started, or still wait with more than "
        "{slo} s of quota time",
    ),
    ("  events judged, high priority", "slo_events.judged_high_priority", "", ""),
    (
        "  whole-wait violation rate",
        "slo_whole_wait.violation_rate",
        "%",
        "the same events against {slo} s of their whole time to start (time over quota "
        "counts): compare with `time to start` below",
    ),
    (
        "  whole-wait violation rate, high priority",
        "slo_whole_wait.violation_rate_high_priority",
        "%",
        "",
    ),
    ("time to start s (whole wait of each scheduling event)", None, "", ""),
    (
        "  within quota avg",
        "time_to_start_s.within_quota.avg",
        "",
        "events within quota at their start; includes any time waited over quota, "
        "which the SLO does not count",
    ),
    ("  within quota p95", "time_to_start_s.within_quota.p95", "", ""),
    ("  within quota events", "time_to_start_s.within_quota.count", "", ""),
    ("  over quota avg", "time_to_start_s.over_quota.avg", "", "events over quota at their start"),
    ("  over quota p95", "time_to_start_s.over_quota.p95", "", ""),
    ("  over quota events", "time_to_start_s.over_quota.count", "", ""),
    ("JCT and queueing s", None, "", ""),
    ("  JCT avg", "jct_s.avg", "", "submission to completion, completed workloads"),
    ("  JCT median", "jct_s.median", "", ""),
    ("  JCT p95", "jct_s.p95", "", ""),
    (
        "  queueing delay avg",
        "queueing_delay_s.avg",
        "",
        "a workload's time to start summed over its scheduling events",
    ),
    ("  queueing delay median", "queueing_delay_s.median", "", ""),
    ("  queueing delay p95", "queueing_delay_s.p95", "", ""),
    ("control plane", None, "", ""),
    ("  RMS decision ms, no preemption", "rms_decision_ms.no_preemption_avg", "", ""),
    ("  RMS decision ms, preemption", "rms_decision_ms.preemption_avg", "", ""),
    (
        "  negative cache hit rate",
        "negative_cache_hit_rate",
        "%",
        "abstentions answered from an RMS's cache of recent `no room`",
    ),
    ("  GMS scan ms avg", "gms_scan_ms_avg", "", ""),
    ("regions per workload", None, "", ""),
    ("  candidate avg", "candidate_regions.avg", "", "regions that bid for it at least once"),
    ("  executing avg", "executing_regions.avg", "", "regions whose dispatch of it ran"),
]


def _filled(text: str, reports: list[dict[str, Any]]) -> str:
    """`text` with the SLO threshold and bucket of the (first) report in it."""
    first = reports[0] if reports else {}
    slo = first.get("slo_start_s")
    bucket = _get(first, "slo_series.bucket_s")
    return text.replace("{slo}", f"{slo:g}" if slo is not None else "the SLO's").replace(
        "{bucket}", f"{bucket:g}" if bucket is not None else "one"
    )


def report_rows(reports: list[dict[str, Any]]) -> list[tuple[str, list[str], str]]:
    """(label, one formatted cell per report, what it measures) for each row of `_ROWS`;
    headings have no cells."""
    out: list[tuple[str, list[str], str]] = []
    for label, path, unit, what in _ROWS:
        cells = [] if path is None else [_fmt(_get(r, path), unit) for r in reports]
        out.append((_filled(label, reports), cells, _filled(what, reports)))
    return out


def render_text(reports: list[dict[str, Any]]) -> str:
    """The reports side by side as a table for the terminal, one column per report."""
    rows = report_rows(reports)
    heads = [f"{r.get('policy')} (seed {r.get('seed')})" for r in reports]
    width = max([len(label) for label, vals, _ in rows if vals] + [8])
    cols = [
        max([len(h)] + [len(vals[i]) for _, vals, _ in rows if vals]) for i, h in enumerate(heads)
    ]
    title = reports[0].get("scenario", "") if reports else ""
    lines = [f"report: {title}", ""]
    lines.append(
        " " * width + "  " + "  ".join(h.rjust(c) for h, c in zip(heads, cols, strict=True))
    )
    for label, vals, what in rows:
        if not vals:
            lines.append(f"{label}  ({what})" if what else label)
            continue
        cells = "  ".join(v.rjust(c) for v, c in zip(vals, cols, strict=True))
        lines.append(f"{label.ljust(width)}  {cells}")
        if what:  # what the figure measures, under it
            lines.append(f"      = {what}")
    return "\n".join(lines)
