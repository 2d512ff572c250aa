"""Fault windows on a report's time plots: shaded, numbered and named, labels never overlapping.

Every time plot of a report shades the run's fault windows (Jepsen's
habit: a figure without them invites reading a fault as a policy's
doing) and labels each with its number in the report's list (the page's
"what happened" lists them all with their times) and its name, in rows
above the axes. A label that does not fit in any row beside the ones
already placed shrinks to its number alone, and is left out if even that
does not fit: the shading stays, and the page's list names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Rows of labels above the axes, and the gap kept between two labels of a row (pixels).
LABEL_ROWS = 4
_GAP_PX = 4.0
_FONT_PT = 7


def shade_windows(ax: Any, windows: Sequence[Sequence[Any]], scale: float = 1 / 3600) -> None:
    """Shade `windows` ([start_s, end_s, name], in the report's order) on `ax`, x in s × `scale`.

    Call it last, once the plot's data and limits are set: the labels are
    placed in pixels for the axes' final size.
    """
    if not windows:
        return
    for start, end, _name in windows:
        ax.axvspan(start * scale, end * scale, color="tab:red", alpha=0.12, lw=0)
    fig = ax.figure
    ax.set_xlim(ax.get_xlim())  # no autoscaling from here: the labels' x positions hold
    # Room above the axes for the labels, then the layout the labels are placed in.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.055 * LABEL_ROWS))
    renderer = fig.canvas.get_renderer()
    right = ax.get_window_extent(renderer).x1
    # First every number, in the first row with room; then each label grows to its
    # name where that still ends before the next label of its row.
    rows: list[list[tuple[float, Any, str]]] = [[] for _ in range(LABEL_ROWS)]
    for number, (start, _end, name) in enumerate(windows, 1):
        x_px = ax.transData.transform((start * scale, 0))[0]
        for row, placed in enumerate(rows):
            last_end = placed[-1][1].get_window_extent(renderer).x1 if placed else float("-inf")
            if last_end + _GAP_PX > x_px:
                continue
            label = ax.text(
                start * scale,
                1.02 + 0.1 * row,
                str(number),
                transform=ax.get_xaxis_transform(),
                fontsize=_FONT_PT,
                color="darkred",
                ha="left",
                va="bottom",
                clip_on=False,
            )
            if label.get_window_extent(renderer).x1 > right:
                label.remove()
                continue
            placed.append((x_px, label, f"{number} {name}"))
            break
    for placed in rows:
        for i, (_x, label, full) in enumerate(placed):
            limit = placed[i + 1][0] - _GAP_PX if i + 1 < len(placed) else right
            short = label.get_text()
            label.set_text(full)
            if label.get_window_extent(renderer).x1 > limit:
                label.set_text(short)
