"""`mastemu view RUN.db` without a browser: what it writes and how (issue 18, item 1).

view: the page is one file with the run inlined (no URL to fetch), the same
bytes for the same run, under 15 MB for quickstart; embedded data cannot
leave its script element; a folder that does not exist is refused (exit 2).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from actors.mast.timeline.page import embedded_json
from emulator.cli.main import main
from emulator.testing import run_scenario
from tests.support.rundb import RunDb


@pytest.fixture(scope="module")
def gms_failover(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_scenario("gms-failover", out_dir=tmp_path_factory.mktemp("view")).db


def test_view_writes_one_self_contained_page_the_same_bytes_every_time(
    gms_failover: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["view", str(gms_failover)]) == 0  # default: RUN.html beside it
    first = gms_failover.with_suffix(".html").read_bytes()
    assert main(["view", str(gms_failover), "--out", str(tmp_path / "again.html")]) == 0
    assert (tmp_path / "again.html").read_bytes() == first
    page = first.decode()
    # Nothing to fetch: no external script, style, image or link.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "default-src 'none'" in page
    assert "player:" in capsys.readouterr().err


def test_view_refuses_an_output_folder_that_does_not_exist(
    gms_failover: Path, tmp_path: Path
) -> None:
    assert main(["view", str(gms_failover), "--out", str(tmp_path / "no" / "p.html")]) == 2


def test_view_embedded_json_cannot_end_its_script_element() -> None:
    value = {"name": "</script><script>alert(1)</script>", "x": "<!-- & \u2028\u2029 -->"}
    text = embedded_json(value)
    assert not set("<>&") & set(text)
    assert "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == value


def test_view_of_quickstart_stays_under_15_mb(quickstart_run: RunDb, tmp_path: Path) -> None:
    page = tmp_path / "quickstart.html"
    assert main(["view", str(quickstart_run.db), "--out", str(page)]) == 0
    assert page.stat().st_size < 15_000_000
