"""A run is the same run whether its links' streams stay in memory or are rebuilt."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.net import links
from tests.support.builtin import raw_builtin, run_raw


def test_chaos_is_the_same_run_with_two_live_link_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # chaos's nemesis loses, duplicates and delays messages: every kind of link draw.
    raw = raw_builtin("chaos")
    kept, _ = run_raw(raw, tmp_path / "kept.db")
    monkeypatch.setattr(links, "LIVE_MAX", 2)
    rebuilt, events = run_raw(raw, tmp_path / "rebuilt.db")
    assert rebuilt.trace_hash == kept.trace_hash
    assert {e.type for e in events if e.kind == "fault"} >= {"loss.start", "duplicate.start"}
