"""Bugs found and not fixed yet: each reproducer must still fail (strict xfail).

When a fix lands the test passes, strict xfail turns that into a failure,
and whoever fixed it moves the reproducer into a regression test.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.support.builtin import run_raw
from tests.support.paths import DATA


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="open: the Dally scheduler's accounts overbook a host after repeated failovers",
)
def test_dally_racks_failovers_never_overbook_a_host(tmp_path: Path) -> None:
    raw = tomllib.loads((DATA / "dally_racks_overbooked.toml").read_text())
    result, _ = run_raw(raw, tmp_path / "run.db")
    assert result.actor_errors == []
