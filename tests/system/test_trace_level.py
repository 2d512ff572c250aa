"""`[trace] level = "decisions"`: a smaller run database, the same trace hash, reports intact."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from emulator.errors import InputError
from emulator.registry import builtin_scenarios, load_plugins
from emulator.run.replay import check
from emulator.run.resume import resume
from emulator.run.runner import execute, plan_run
from emulator.run.scenario import decode_scenario
from emulator.trace import MESSAGE_KINDS
from tests.support.rundb import trace_events

load_plugins()


def _run(tmp_path: Path, level: str) -> tuple[object, Path]:
    text = builtin_scenarios()["gms-failover"].read_text(encoding="utf-8")
    text += f'\n[trace]\nlevel = "{level}"\n'
    plan = plan_run(decode_scenario(text, "t.toml"), text, "t.toml")
    result = asyncio.run(execute(plan, seed=1, out=tmp_path / f"{level}.db"))
    return result, tmp_path / f"{level}.db"


def test_a_decisions_trace_keeps_the_hash_and_drops_only_message_traffic(tmp_path: Path) -> None:
    full, full_db = _run(tmp_path, "full")
    sparse, sparse_db = _run(tmp_path, "decisions")
    assert sparse.trace_hash == full.trace_hash  # the hash covers every event either way
    kept = trace_events(sparse_db)
    everything = trace_events(full_db)
    assert [e for e in everything if e.kind not in MESSAGE_KINDS] == kept
    assert len(kept) < len(everything) / 2
    with sqlite3.connect(sparse_db) as a, sqlite3.connect(full_db) as b:
        size = "SELECT sum(length(events)) FROM trace_chunks"
        assert a.execute(size).fetchone()[0] < b.execute(size).fetchone()[0]


def test_a_decisions_trace_is_checked_offline_and_refuses_a_resume(tmp_path: Path) -> None:
    _, db = _run(tmp_path, "decisions")
    assert asyncio.run(check(db)) == 0
    with sqlite3.connect(db) as c:
        c.execute("UPDATE run_meta SET status = 'interrupted'")
    with pytest.raises(InputError, match="level decisions"):
        asyncio.run(resume(db))
