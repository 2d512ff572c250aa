"""`mastemu report RUN.db --html DIR` reads as a page (issue 18, item 5).

report page: the scenario's description and what happened at the top (the
workloads' fate, the fault windows with their times, the failovers, the
violations); plots side by side in a grid; the JSON in `report.json`,
linked, not dumped; on every time plot the fault windows shaded, numbered
and named, with labels that never overlap.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest

from actors.mast.report.story import Facts, story
from actors.mast.report.windows import shade_windows
from emulator.cli.main import main
from emulator.testing import run_scenario
from tests.support.rundb import read_run_db


@pytest.fixture(scope="module")
def gms_failover(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_scenario("gms-failover", out_dir=tmp_path_factory.mktemp("report")).db


def test_report_page_opens_with_the_description_and_what_happened(
    gms_failover: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "page"
    assert main(["report", str(gms_failover), "--html", str(out)]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    meta, trace = read_run_db(gms_failover)
    # The description, as the scenario says it, before everything else.
    assert "the follower in eu-west takes the lease" in page
    assert page.index("takes the lease") < page.index("What happened") < page.index("Plots")
    # What happened: the workloads, the crash's window with its times, the failover.
    start = next(e for e in trace if e.type == "crash.start").t_us // 1_000_000
    end = next(e for e in trace if e.type == "crash.end").t_us // 1_000_000
    assert "workloads were submitted" in page and "lost." in page
    clock = f"{start // 3600}:{start // 60 % 60:02d}:{start % 60:02d}"
    until = f"{end // 3600}:{end // 60 % 60:02d}:{end % 60:02d}"
    crashed = next(e for e in trace if e.type == "crash.start").payload["actor"]
    assert f"<li>{clock}–{until} crash {crashed} (leader of gms)</li>" in page
    leader = next(
        e for e in trace if e.type == "lease.leader" and e.payload == {"epoch": 2, "role": "gms"}
    )
    assert f"gms: {leader.src} leads (epoch 2)" in page
    assert "No invariant was violated." in page
    # Plots in a grid; the JSON behind a link, the whole report in its own file.
    assert 'class="plots"' in page and "grid-template-columns" in page
    assert '<a href="report.json">' in page and "<pre>" not in page
    assert main(["report", str(gms_failover), "--json"]) == 0
    capsys.readouterr()
    written = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert written["trace_hash"] == meta.trace_hash and "series" in written


def test_report_plot_names_every_fault_window_it_can_and_no_two_labels_overlap() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # 30 windows, many a few seconds apart (chaos's pattern), on a 2 h axis.
    windows = [[120.0 * i + (i % 3) * 7, 120.0 * i + 300, f"fault-{i}"] for i in range(30)]
    windows += [[3600.0, 3660.0, "partition us-east|eu-west"]]
    windows.sort()
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot([0, 2], [0, 1])
    shade_windows(ax, windows)
    fig.tight_layout()  # as the report's save does: the labels must still not overlap
    renderer = fig.canvas.get_renderer()
    labels = list(ax.texts)
    assert len(ax.patches) == len(windows)
    boxes = [t.get_window_extent(renderer) for t in labels]
    for a, b in combinations(boxes, 2):
        assert not a.overlaps(b)
    numbers = [int(t.get_text().split()[0]) for t in labels]
    assert len(set(numbers)) == len(numbers) and len(numbers) > len(windows) // 2
    # A label is its window's number, and its name where there is room.
    for n, t in zip(numbers, labels, strict=True):
        assert t.get_text() in (str(n), f"{n} {windows[n - 1][2]}")
    assert "31 partition us-east|eu-west" in {t.get_text() for t in labels}
    plt.close(fig)
    # Windows far apart: every one named.
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot([0, 2], [0, 1])
    shade_windows(ax, [[600.0, 900.0, "crash"], [3600.0, 4000.0, "pause"]])
    assert [t.get_text() for t in ax.texts] == ["1 crash", "2 pause"]
    plt.close(fig)


def test_report_story_counts_what_the_report_and_the_lease_history_say() -> None:
    report = {
        "emulated_s": 7200.0,
        "workloads": {"submitted": 10, "completed": 6, "running": 2, "pending": 1, "lost": 1},
        "fault_windows": [[60.0, 120.5, "crash"], [3600.0, 5400.0, "partition"]],
        "preemptions": 3,
        "invariant_violations": 1,
        "gpu_allocation_rate": 0.5,
        "slo_violation_rate": 0.25,
    }
    facts = Facts(
        description="two faults",
        failovers=[(90.0, "gms", "gms/1", 2)],
        violations=[(4000.0, "no-lost-workload", "w1 lost")],
        fault_targets={(60.0, "crash"): "gms/0 (leader of gms)"},
    )
    told = story(report, facts)
    assert told["description"] == "two faults"
    assert told["summary"] == [
        "In 2 h of emulated time, 10 workloads were submitted: 6 done, 2 running and 1 "
        "waiting at the end, 0 failed, 1 lost.",
        "2 fault window(s) (crash, partition), shaded and numbered on the plots below.",
        "1 leadership change(s), of gms; 3 preemption(s).",
        "1 invariant violation(s).",
        "GPUs were 50.0% allocated on average; 25.0% of the judged scheduling events missed "
        "the SLO.",
    ]
    assert told["faults"] == [
        "0:01:00–0:02:00 crash gms/0 (leader of gms)",
        "1:00:00–1:30:00 partition",
    ]
    assert told["failovers"] == ["0:01:30 gms: gms/1 leads (epoch 2)"]
    assert told["violations"] == ["1:06:40 no-lost-workload: w1 lost"]
