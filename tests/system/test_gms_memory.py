"""The GMS forgets the specs of ended workloads, and forgetting them changes nothing it does.

A week of `meta-day` submits ~100k workloads; a GMS that kept every spec it
ever fetched held them all. Ended workloads never come back to the queue, so
their specs are dropped; the run must be the very same run either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.mast import gms as gms_module
from emulator.kernel import Kernel
from emulator.run.runner import execute, plan_run
from emulator.run.scenario import convert_scenario
from tests.support.builtin import raw_builtin


def _run(tmp_path: Path, name: str) -> tuple[str, dict[str, Any], set[str]]:
    """quickstart's first two hours: its trace hash, the GMS leader's specs, and the
    workloads still queued or active at the end."""
    raw = raw_builtin("quickstart")
    raw["duration"] = "2h"
    text = msgspec.json.encode(raw).decode()
    plan = plan_run(convert_scenario(raw, raw["name"]), text, raw["name"])
    kernels: list[Kernel] = []
    out = tmp_path / f"{name}.db"
    result = asyncio.run(execute(plan, seed=1, out=out, on_kernel=kernels.append))
    assert result.status == "ok" and not result.actor_errors
    leaders = [
        kernels[0].instance(a)
        for a in kernels[0].addresses()
        if a.startswith("gms/") and getattr(kernels[0].instance(a), "scans", 0)
    ]
    specs = max((g.specs for g in leaders), key=len)
    with contextlib.closing(sqlite3.connect(out)) as conn:
        states = dict(conn.execute("SELECT id, state FROM workloads"))
    live = {wid for wid, state in states.items() if state not in ("DONE", "FAILED", "WITHDRAWN")}
    assert len(live) < len(states)  # the story needs workloads that ended
    return result.trace_hash, specs, live


def test_ended_workloads_specs_are_dropped_and_the_run_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept_hash, kept, _ = _run(tmp_path, "kept")  # the default slack: nothing dropped here
    monkeypatch.setattr(gms_module, "SPECS_SLACK", 0)
    dropped_hash, dropped, live = _run(tmp_path, "dropped")
    assert dropped_hash == kept_hash
    assert len(dropped) < len(kept)
    # Only ended workloads were dropped: every live one the GMS had fetched is there.
    assert {wid for wid in kept if wid in live} <= set(dropped)
