"""report --html: the slow path's plots (Tetris's placement, Fig. 6's data waits, Fig. 8's bytes).

Two short real runs through the command line (`tetris-rebalance` for its
first hour: Tetris's first pass at 10 min moves tables; `quickstart` for 20
minutes: data replicated everywhere, no Tetris), and hand-built report dicts
whose drawn numbers are worked out in the comments.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import matplotlib
import pytest

from actors.mast.report.slow_plots import (
    FIGURES,
    data_movement_figure,
    has_slow_path,
    placement_figure,
    slow_path_plots,
    storage_figure,
    waiting_for_data_figure,
)
from emulator.cli.main import main

matplotlib.use("Agg")  # before pyplot: no display where tests run
import matplotlib.pyplot as plt

SLOW = [name for name, _, _ in FIGURES]
FAST = ["allocation.png", "queue_length.png", "time_to_start_cdf.png", "slo.png"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_and_page(
    tmp: Path, scenario: str, until: str, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, str]:
    """`mastemu run SCENARIO --until T` then `mastemu report --html`: the page dir and its HTML."""
    db, page = tmp / f"{scenario}.db", tmp / f"{scenario}-page"
    assert main(["run", scenario, "--until", until, "--out", str(db), "--no-progress"]) == 0
    assert main(["report", str(db), "--html", str(page)]) == 0
    capsys.readouterr()
    return page, (page / "index.html").read_text(encoding="utf-8")


def test_a_tetris_run_gets_the_four_slow_path_plots_with_captions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page, text = run_and_page(tmp_path, "tetris-rebalance", "1h", capsys)
    for name, caption, _ in FIGURES:
        png = page / name
        assert png.read_bytes()[:8] == PNG_MAGIC, name
        figure = f'<img src="{name}" alt="{html.escape(caption)}">'
        assert figure in text
        assert f"<figcaption>{html.escape(caption)}</figcaption>" in text
    # Shown after the fast path's plots, in FIGURES' order.
    positions = [text.index(f'src="{name}"') for name in FAST + SLOW]
    assert positions == sorted(positions)


def test_a_run_without_a_slow_path_gets_only_the_fast_path_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page, text = run_and_page(tmp_path, "quickstart", "20m", capsys)
    assert sorted(p.name for p in page.glob("*.png")) == sorted(FAST)
    for name, caption, _ in FIGURES:
        assert name not in text and html.escape(caption) not in text


def report(**slow: Any) -> dict[str, Any]:
    """A report with the keys the slow plots read; no slow path unless `slow` adds one."""
    base: dict[str, Any] = {
        "emulated_s": 7_200.0,
        "fault_windows": [],
        "series": {"t_s": [0.0, 1_800.0, 3_600.0, 5_400.0], "waiting_for_data_share": [0.0] * 4},
        "placement_series": [],
        "bytes_moved_per_day": [0],
        "bytes_planned_per_day": [0],
        "storage": {"us-east": {"used_bytes": 10**12, "capacity_bytes": 4 * 10**15}},
    }
    base.update(slow)
    return base


@pytest.mark.parametrize(
    ("slow", "expected"),
    [
        ({}, False),  # storage alone is the static initial placement
        ({"placement_series": [[600.0, 2.5, 0.9]]}, True),
        ({"bytes_moved_per_day": [0, 0], "bytes_planned_per_day": [0, 5]}, True),
        ({"bytes_moved_per_day": [3]}, True),
        ({"series": {"t_s": [0.0, 60.0], "waiting_for_data_share": [0.0, 0.01]}}, True),
        ({"series": {}, "placement_series": None, "bytes_moved_per_day": None}, False),
    ],
)
def test_has_slow_path(slow: dict[str, Any], expected: bool) -> None:
    assert has_slow_path(report(**slow)) is expected


def test_no_slow_path_writes_nothing(tmp_path: Path) -> None:
    assert slow_path_plots(report(), tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_a_figure_without_data_is_left_out_of_a_slow_path_run(tmp_path: Path) -> None:
    # Only the data waits have something to show: the bytes are zero, no Tetris,
    # no storage in the catalog.
    r = report(series={"t_s": [0.0, 60.0], "waiting_for_data_share": [0.0, 0.25]}, storage={})
    assert slow_path_plots(r, tmp_path) == [("waiting_for_data.png", FIGURES[1][1])]
    assert [p.name for p in tmp_path.iterdir()] == ["waiting_for_data.png"]


def test_data_movement_bars_are_planned_then_moved_per_day_in_tb() -> None:
    # Day 1: 6 TB planned, 2 TB moved (the cap); day 2: nothing planned, 4 TB moved.
    fig = data_movement_figure(
        report(bytes_planned_per_day=[6 * 10**12, 0], bytes_moved_per_day=[2 * 10**12, 4 * 10**12])
    )
    ax = fig.axes[0]
    planned, moved = (c for c in ax.containers)
    assert [b.get_height() for b in planned] == pytest.approx([6.0, 0.0])
    assert [b.get_height() for b in moved] == pytest.approx([2.0, 4.0])
    # Side by side: planned left of moved within each day.
    assert [b.get_x() for b in planned] < [b.get_x() for b in moved]
    assert ax.get_ylabel() == "data TB"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2"]
    assert planned.get_label() == "planned" and moved.get_label() == "moved"
    plt.close(fig)


def span_hours(patch: Any) -> tuple[float, float]:
    """x extent of an axvspan patch in data units (a Rectangle or, before matplotlib 3.9, a
    Polygon)."""
    xs = patch.get_patch_transform().transform(patch.get_path().vertices)[:, 0]
    return float(xs.min()), float(xs.max())


def test_waiting_for_data_is_in_percent_with_fault_windows_shaded() -> None:
    # Shares 0, 2%, 5%, 0 per 30-minute bucket; a partition from 0.5 h to 1.25 h.
    r = report(
        series={
            "t_s": [0.0, 1_800.0, 3_600.0, 5_400.0],
            "waiting_for_data_share": [0.0, 0.02, 0.05, 0.0],
        },
        fault_windows=[[1_800.0, 4_500.0, "partition us-east|eu-west"]],
    )
    fig = waiting_for_data_figure(r)
    ax = fig.axes[0]
    (line,) = ax.get_lines()
    # The last bucket holds until the run's end (2 h).
    assert list(line.get_xdata()) == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0])
    assert list(line.get_ydata()) == pytest.approx([0.0, 2.0, 5.0, 0.0, 0.0])
    assert [span_hours(p) for p in ax.patches] == [pytest.approx((0.5, 1.25))]
    assert ax.get_ylabel() == "waiting for data %"
    plt.close(fig)


def test_placement_steps_to_the_end_and_tolerates_missing_values() -> None:
    # Tetris's first pass at 10 min (demand/supply 7.0, 95% colocated), its moves at
    # 11 min bring it to 1.03 with no colocation figure yet, the run ends at 2 h.
    r = report(placement_series=[[600.0, 7.0, 0.95], [660.0, 1.03, None]])
    fig = placement_figure(r)
    left, right = fig.axes
    demand = left.get_lines()[0]
    assert list(demand.get_xdata()) == pytest.approx([600 / 3600, 660 / 3600, 2.0])
    assert list(demand.get_ydata()) == pytest.approx([7.0, 1.03, 1.03])
    (colocation,) = right.get_lines()
    assert colocation.get_ydata()[0] == pytest.approx(95.0)
    assert right.get_ylabel() == "colocation rate %"
    plt.close(fig)


def test_storage_goes_log_when_capacity_dwarfs_use_and_linear_with_an_empty_region() -> None:
    dwarfed = report(
        storage={
            "us-east": {"used_bytes": 2 * 10**13, "capacity_bytes": 4 * 10**15},
            "eu-west": {"used_bytes": 6 * 10**12, "capacity_bytes": 6 * 10**15},
        }
    )
    fig = storage_figure(dwarfed)
    ax = fig.axes[0]
    used, capacity = ax.containers
    # Regions sorted by name, in PB: eu-west 0.006 of 6, us-east 0.02 of 4.
    assert [t.get_text() for t in ax.get_xticklabels()] == ["eu-west", "us-east"]
    assert [b.get_height() for b in used] == pytest.approx([0.006, 0.02])
    assert [b.get_height() for b in capacity] == pytest.approx([6.0, 4.0])
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.texts] == ["0.1%", "0.5%"]
    plt.close(fig)
    empty = dwarfed["storage"] | {"ap-south": {"used_bytes": 0, "capacity_bytes": 2 * 10**16}}
    fig = storage_figure(report(storage=empty))
    assert fig.axes[0].get_yscale() == "linear"
    plt.close(fig)
