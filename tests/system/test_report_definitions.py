"""The report says what it measures: each figure's definition next to it, in text and HTML.

quickstart's report showed "violation rate 0.0%" beside a within-quota p95
time to start far past the 900 s SLO: both right, since the SLO counts only
quota time and time to start is the whole wait, but nothing said so. Now
the definition is printed under the figure (text) or beside it (HTML), and
the same words name the same things in both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.mast.report.text import report_rows
from tests.support.cli import run_cli


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("defs") / "q.db"
    from emulator.cli import main as cli

    assert cli.main(["run", "quickstart", "--until", "1h", "--out", str(out), "--no-progress"]) == 0
    return out


def test_each_slo_figure_has_its_definition_under_it_in_the_text(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "report", str(db))
    assert code == 0
    lines = out.splitlines()
    assert "SLO: start within 900 s of quota time" in lines

    def under(label: str) -> str:
        i = next(i for i, line in enumerate(lines) if line.startswith(f"  {label} "))
        assert lines[i + 1].startswith("      = "), lines[i : i + 2]
        return lines[i + 1]

    assert "quota time passed 900 s" in under("violation rate")
    assert "whole time to start" in under("whole-wait violation rate")
    assert "which the SLO does not count" in under("within quota avg")
    assert "time to start s (whole wait of each scheduling event)" in lines


def test_the_html_page_puts_each_definition_beside_its_figure(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run_cli(capsys, "report", str(db), "--html", str(tmp_path / "page"))
    assert code == 0
    page = (tmp_path / "page" / "index.html").read_text(encoding="utf-8")
    assert "<td>violation rate</td>" in page
    assert "quota time passed 900 s" in page
    assert "SLO: start within 900 s of quota time" in page


def test_every_figure_of_the_slo_and_time_to_start_says_what_it_is_or_follows_one_that_does() -> (
    None
):
    report = {"slo_start_s": 900.0, "slo_series": {"bucket_s": 3600.0}}
    rows = report_rows([report])
    sections = {"SLO", "time to start"}
    current = ""
    described = False
    for label, cells, what in rows:
        if not cells:
            current = next((s for s in sections if label.startswith(s)), "")
            described = False
            continue
        if current:
            # The first figure of a section is always defined; those after it read
            # as variants of it ("…, high priority", "… p95").
            described = described or bool(what)
            assert described, label
            assert "{slo}" not in what and "{bucket}" not in what
