"""The matplotlib figures on a MAST report's HTML page (MAST Figs. 5 and 11, §5.6).

Each is drawn from the report dict alone, 7×3 inches with emulated hours on
the x axis and the fault windows shaded red, numbered and named
(`actors.mast.report.windows`), as PNG files beside the page:
GPU and CPU allocation rate over time (with the moment the fleet became
loaded), queue length, the time-to-start CDF within vs over quota (log
scale, with the SLO), and the SLO violation rate per time bucket
(`slo_series`). The slow path's
figures follow (`actors.mast.report.slow_plots`). matplotlib is imported
only when a page is drawn, with the non-interactive Agg backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from actors.mast.report.slow_plots import slow_path_plots
from actors.mast.report.windows import shade_windows


def write_plots(report: dict[str, Any], out_dir: Path) -> list[tuple[str, str]]:
    """Write the PNG plots; returns (file name, caption) pairs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def shade(ax: Any) -> None:
        shade_windows(ax, report.get("fault_windows") or [])

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=96)
        plt.close(fig)

    out: list[tuple[str, str]] = []
    series = report["series"]
    hours = [t / 3600 for t in series["t_s"]]
    fig, ax = plt.subplots(figsize=(7, 3))
    for key, label in (("gpu_allocation_rate", "GPU"), ("cpu_allocation_rate", "CPU")):
        values = [np.nan if v is None else 100 * v for v in series[key]]
        ax.step(hours, values, where="post", label=label)
    if report.get("loaded_from_s") is not None:
        ax.axvline(report["loaded_from_s"] / 3600, ls="--", c="grey", lw=1, label="loaded")
    shade(ax)
    ax.set(xlabel="emulated hours", ylabel="allocation rate %", ylim=(0, 105))
    ax.legend(loc="lower right")
    save(fig, "allocation.png")
    out.append(("allocation.png", "GPU and CPU allocation rate over time (MAST Fig. 5)"))

    fig, ax = plt.subplots(figsize=(7, 3))
    q = series["queue_length"]
    ax.step([t / 3600 for t in q["t_s"]], q["value"], where="post")
    shade(ax)
    ax.set(xlabel="emulated hours", ylabel="queued workloads")
    save(fig, "queue_length.png")
    out.append(("queue_length.png", "Queue length at each GMS-scan pass"))

    fig, ax = plt.subplots(figsize=(7, 3))
    cdf = report["cdf"]["time_to_start_s"]
    for key, label in (("within_quota", "within quota"), ("over_quota", "over quota")):
        xs = cdf[key]
        if xs:  # log scale: waits under a second are drawn at 1 s
            ax.plot(np.maximum(xs, 1.0), np.linspace(0, 1, len(xs)), label=label)
    ax.axvline(max(1.0, report["slo_start_s"]), ls="--", c="grey", lw=1, label="SLO")
    ax.set(xlabel="time to start s (per scheduling event)", ylabel="CDF", ylim=(0, 1.02))
    ax.set_xscale("log")
    ax.legend(loc="lower right")
    save(fig, "time_to_start_cdf.png")
    out.append(
        (
            "time_to_start_cdf.png",
            "Time to start (whole wait of each scheduling event), within vs over quota at its "
            "start (MAST Fig. 11). The SLO line is for comparison: the SLO counts only quota "
            "time, so events right of it may still meet the SLO.",
        )
    )

    fig, ax = plt.subplots(figsize=(7, 3))
    slo = report["slo_series"]
    hours = [t / 3600 for t in slo["t_s"]]
    for key, label in (
        ("slo_violation_rate", "all within quota"),
        ("slo_violation_rate_high_priority", "high priority"),
    ):
        values = [np.nan if v is None else 100 * v for v in slo[key]]
        ax.plot(hours, values, marker="o", label=label)
    shade(ax)
    ax.set(xlabel="emulated hours (when the SLO clock started)", ylabel="late %", ylim=(-2, 102))
    ax.legend(loc="upper left")
    save(fig, "slo.png")
    out.append(
        (
            "slo.png",
            "SLO violation rate (MAST §5.6): share of the judged scheduling events whose quota "
            "time (time waited while ranked within quota) passed the SLO, by when that clock "
            "started",
        )
    )
    out.extend(slow_path_plots(report, out_dir))  # none for runs without a slow path
    return out
