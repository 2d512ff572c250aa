"""The slow path's plots on a MAST report's HTML page (MAST §5.3, §5.6; Figs. 6 and 8).

Each figure is drawn from the report dict alone (`actors/mast/report/slow_figures.py`
fills the keys) and looks like the fast path's plots in `actors/mast/report/plots.py`:
7×3 inches, emulated hours on the x axis, fault windows shaded red.

- placement: the most overloaded region's high-priority GPU demand/supply
  and the colocation rate, as Tetris's placement changed (`placement_series`);
- waiting for data: the share of live workloads in WAITING_DATA per time
  bucket (`series.waiting_for_data_share`, Fig. 6);
- data movement: bytes planned (Tetris's passes plus on-demand requests) and
  bytes moved per emulated day, side by side (Fig. 8);
- storage: bytes held vs capacity per region.

A run without a slow path (no Tetris, nothing planned or moved, no workload
ever waiting for data: a quickstart run, whose data is replicated everywhere)
gets none of them; the storage bars alone would only show the static initial
placement. Within a run that has one, a figure whose data is absent or all
zero is left out rather than drawn empty.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.mast.report.windows import shade_windows

S_PER_H = 3_600.0
# Decimal byte units, largest first: the data-movement and storage axes use the
# largest unit that keeps the biggest value at or above 1.
_BYTE_UNITS = (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("B", 1.0))
# Storage bars switch to a log axis when the capacity dwarfs what is held (a
# few TB in PB-sized regions), so the used bars stay visible.
_LOG_RATIO_MIN = 100.0


def has_slow_path(report: dict[str, Any]) -> bool:
    """Whether the run had a slow path to show: Tetris's figures, data movement, or data waits."""
    series = report.get("series") or {}
    return bool(
        report.get("placement_series")
        or any(report.get("bytes_moved_per_day") or ())
        or any(report.get("bytes_planned_per_day") or ())
        or any(v for v in series.get("waiting_for_data_share") or () if v)
    )


def _pyplot() -> Any:
    """pyplot on the file-only backend: reports are written where no display may exist."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _shade(ax: Any, report: dict[str, Any]) -> None:
    shade_windows(ax, report.get("fault_windows") or [], scale=1 / S_PER_H)


def _nan(value: float | None, scale: float = 1.0) -> float:
    return float("nan") if value is None else scale * value


def _byte_unit(largest: float) -> tuple[str, float]:
    for name, size in _BYTE_UNITS:
        if largest >= size:
            return name, size
    return _BYTE_UNITS[-1]


def placement_figure(report: dict[str, Any]) -> Any | None:
    """Demand/supply max (left axis) and colocation rate % (right axis) over time."""
    plt = _pyplot()
    points = report.get("placement_series") or []
    if not points:
        return None
    # Each point holds until the next change; the last one holds to the run's end.
    end_s = max(float(report.get("emulated_s") or 0.0), points[-1][0])
    hours = [p[0] / S_PER_H for p in points] + [end_s / S_PER_H]
    demand = [_nan(p[1]) for p in points]
    colocation = [_nan(p[2], 100.0) for p in points]
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.step(hours, [*demand, demand[-1]], where="post", c="tab:blue", label="demand/supply max")
    ax.axhline(1.0, ls="--", c="grey", lw=1, label="balanced")
    ax.set(xlabel="emulated hours", ylabel="demand/supply max (ratio)", xlim=(0, hours[-1]))
    ax.set_ylim(bottom=0)
    right = ax.twinx()
    right.step(
        hours, [*colocation, colocation[-1]], where="post", c="tab:green", label="colocation rate"
    )
    right.set(ylabel="colocation rate %", ylim=(0, 105))
    _shade(ax, report)
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="center right")
    return fig


def waiting_for_data_figure(report: dict[str, Any]) -> Any | None:
    """Share of live workloads waiting for data per time bucket, in percent."""
    plt = _pyplot()
    series = report.get("series") or {}
    shares = series.get("waiting_for_data_share") or []
    t_s = series.get("t_s") or []
    if not shares or len(shares) != len(t_s):
        return None
    # Values are bucket means from each bucket's start; the last bucket ends with the run.
    end_s = max(float(report.get("emulated_s") or 0.0), t_s[-1])
    percent = [_nan(v, 100.0) for v in shares]
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.step([t / S_PER_H for t in [*t_s, end_s]], [*percent, percent[-1]], where="post")
    _shade(ax, report)
    ax.set(xlabel="emulated hours", ylabel="waiting for data %")
    ax.set_ylim(bottom=0, top=max(1.0, 1.1 * max((100 * v for v in shares if v), default=0)))
    return fig


def data_movement_figure(report: dict[str, Any]) -> Any | None:
    """Bytes planned vs bytes moved per emulated day, as bars side by side."""
    plt = _pyplot()
    planned = list(report.get("bytes_planned_per_day") or [])
    moved = list(report.get("bytes_moved_per_day") or [])
    if not any(planned) and not any(moved):
        return None
    days = max(len(planned), len(moved))
    planned += [0] * (days - len(planned))
    moved += [0] * (days - len(moved))
    unit, size = _byte_unit(max(planned + moved))
    fig, ax = plt.subplots(figsize=(7, 3))
    x = list(range(days))
    ax.bar([d - 0.2 for d in x], [b / size for b in planned], width=0.4, label="planned")
    ax.bar([d + 0.2 for d in x], [b / size for b in moved], width=0.4, label="moved")
    ax.set_xticks(x, [str(d + 1) for d in x])
    ax.set_xlim(-0.75, days - 0.25)  # a one-day run keeps bars of the usual width
    ax.set(xlabel="emulated day", ylabel=f"data {unit}")
    ax.legend(loc="upper right")
    return fig


def storage_figure(report: dict[str, Any]) -> Any | None:
    """Bytes held vs capacity per region, as bars side by side."""
    plt = _pyplot()
    storage = report.get("storage") or {}
    regions = sorted(storage)
    if not regions:
        return None
    used = [float(storage[r].get("used_bytes") or 0) for r in regions]
    capacity = [float(storage[r].get("capacity_bytes") or 0) for r in regions]
    values = [v for v in used + capacity if v > 0]
    if not values:
        return None
    unit, size = _byte_unit(max(values))
    fig, ax = plt.subplots(figsize=(7, 3))
    x = list(range(len(regions)))
    bars = ax.bar([i - 0.2 for i in x], [u / size for u in used], width=0.4, label="used")
    ax.bar([i + 0.2 for i in x], [c / size for c in capacity], width=0.4, label="capacity")
    # The used share on top of each used bar: on a log axis the heights alone mislead.
    for bar, u, c in zip(bars, used, capacity, strict=True):
        if c > 0:
            ax.annotate(
                f"{100 * u / c:.2g}%",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    # A log axis cannot show a zero bar: linear unless every bar is positive.
    all_positive = len(values) == 2 * len(regions)
    if all_positive and max(values) / min(values) > _LOG_RATIO_MIN:
        ax.set_yscale("log")
    ax.set_xticks(x, regions)
    ax.set(xlabel="region", ylabel=f"storage {unit}")
    ax.legend(loc="upper left")
    return fig


# (file name, caption, builder), in the order the page shows them.
FIGURES: tuple[tuple[str, str, Callable[[dict[str, Any]], Any | None]], ...] = (
    (
        "placement.png",
        "Tetris's placement over time: the most overloaded region's high-priority GPU "
        "demand/supply and the colocation rate (MAST §5.6)",
        placement_figure,
    ),
    (
        "waiting_for_data.png",
        "Share of live workloads waiting for data (MAST Fig. 6)",
        waiting_for_data_figure,
    ),
    (
        "data_movement.png",
        "Data movement per day: planned by Tetris and on demand vs moved (MAST Fig. 8)",
        data_movement_figure,
    ),
    ("storage.png", "Storage used vs capacity per region at the end of the run", storage_figure),
)


def slow_path_plots(report: dict[str, Any], out_dir: Path) -> list[tuple[str, str]]:
    """Write the slow path's PNG plots into `out_dir`; returns (file name, caption) pairs."""
    if not has_slow_path(report):
        return []
    plt = _pyplot()
    out: list[tuple[str, str]] = []
    for name, caption, build in FIGURES:
        fig = build(report)
        if fig is None:
            continue
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=96)
        plt.close(fig)
        out.append((name, caption))
    return out
