"""The rows of a MAST report as people read them: the terminal table, and the HTML page's.

`_ROWS` chooses the headline figures and their order; `report_rows` formats
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


# (label, key path, unit); a row without a path is a section heading.
_ROWS: list[tuple[str, str | None, str]] = [
    ("run", None, ""),
    ("  trace hash", "trace_hash", ""),
    ("  status", "status", ""),
    ("  emulated s", "emulated_s", ""),
    ("  invariant violations", "invariant_violations", ""),
    ("workloads", None, ""),
    *[
        (f"  {k.replace('_', ' ')}", f"workloads.{k}", "")
        for k in (
            "submitted",
            "completed",
            "running",
            "dispatching",
            "pending",
            "waiting_data",
            "failed",
            "lost",
        )
    ],
    ("  scheduling events", "scheduling_events", ""),
    ("  preemptions", "preemptions", ""),
    ("allocation", None, ""),
    ("  GPU allocation rate", "gpu_allocation_rate", "%"),
    ("  CPU allocation rate", "cpu_allocation_rate", "%"),
    ("  loaded from s", "loaded_from_s", ""),
    ("  GPU allocation once loaded", "gpu_allocation_rate_loaded", "%"),
    ("SLO (within quota)", None, ""),
    ("  violation rate", "slo_violation_rate", "%"),
    ("  violation rate, high priority", "slo_violation_rate_high_priority", "%"),
    ("  worst bucket, high priority", "slo_violation_rate_high_priority_max_bucket", "%"),
    ("  events judged", "slo_events.judged", ""),
    ("  events judged, high priority", "slo_events.judged_high_priority", ""),
    ("  whole waits: violation rate", "slo_whole_wait.violation_rate", "%"),
    ("  whole waits: high priority", "slo_whole_wait.violation_rate_high_priority", "%"),
    ("time to start s", None, ""),
    ("  within quota avg", "time_to_start_s.within_quota.avg", ""),
    ("  within quota p95", "time_to_start_s.within_quota.p95", ""),
    ("  within quota events", "time_to_start_s.within_quota.count", ""),
    ("  over quota avg", "time_to_start_s.over_quota.avg", ""),
    ("  over quota p95", "time_to_start_s.over_quota.p95", ""),
    ("  over quota events", "time_to_start_s.over_quota.count", ""),
    ("JCT and queueing s", None, ""),
    ("  JCT avg", "jct_s.avg", ""),
    ("  JCT median", "jct_s.median", ""),
    ("  JCT p95", "jct_s.p95", ""),
    ("  queueing delay avg", "queueing_delay_s.avg", ""),
    ("  queueing delay median", "queueing_delay_s.median", ""),
    ("  queueing delay p95", "queueing_delay_s.p95", ""),
    ("control plane", None, ""),
    ("  RMS decision ms, no preemption", "rms_decision_ms.no_preemption_avg", ""),
    ("  RMS decision ms, preemption", "rms_decision_ms.preemption_avg", ""),
    ("  negative cache hit rate", "negative_cache_hit_rate", "%"),
    ("  GMS scan ms avg", "gms_scan_ms_avg", ""),
    ("regions per workload", None, ""),
    ("  candidate avg", "candidate_regions.avg", ""),
    ("  executing avg", "executing_regions.avg", ""),
]


def report_rows(reports: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(label, one formatted cell per report) for each row of `_ROWS`; headings have no cells."""
    out: list[tuple[str, list[str]]] = []
    for label, path, unit in _ROWS:
        if path is None:
            out.append((label, []))
        else:
            out.append((label, [_fmt(_get(r, path), unit) for r in reports]))
    return out


def render_text(reports: list[dict[str, Any]]) -> str:
    """The reports side by side as a table for the terminal, one column per report."""
    rows = report_rows(reports)
    heads = [f"{r.get('policy')} (seed {r.get('seed')})" for r in reports]
    width = max([len(label) for label, _ in rows] + [8])
    cols = [max([len(h)] + [len(vals[i]) for _, vals in rows if vals]) for i, h in enumerate(heads)]
    title = reports[0].get("scenario", "") if reports else ""
    lines = [f"report: {title}", ""]
    lines.append(
        " " * width + "  " + "  ".join(h.rjust(c) for h, c in zip(heads, cols, strict=True))
    )
    for label, vals in rows:
        if not vals:
            lines.append(label)
            continue
        cells = "  ".join(v.rjust(c) for v, c in zip(vals, cols, strict=True))
        lines.append(f"{label.ljust(width)}  {cells}")
    return "\n".join(lines)
