"""The scripted-scenario DSL as mastemu's own tests use it: build, run, read back.

The builders (`scenario`, `workload`, `job`, `crash`…) are installed with
mastemu (`actors/mast/scripted.py`), so a user's suite builds the same
worlds; `run` here runs one through the public testing API
(`emulator.testing.run_scenario`) and hands back the result and the trace,
and the readers below look at the tables the run left.
"""

from __future__ import annotations

import asyncio
import io
import sqlite3
from pathlib import Path
from typing import Any

from actors.mast.scripted import (
    CHECKERS,
    TAKEOVER_US_MAX,
    crash,
    job,
    preemption_story,
    region,
    scenario,
    workload,
)
from emulator.registry import load_plugins
from emulator.run.replay import check
from emulator.run.runner import RunResult
from emulator.testing import run_scenario
from emulator.trace import TraceEvent

load_plugins()

__all__ = [
    "CHECKERS",
    "TAKEOVER_US_MAX",
    "caught_offline",
    "copies",
    "crash",
    "job",
    "preemption_story",
    "region",
    "run",
    "scenario",
    "states",
    "workload",
    "workload_states",
]


# ---- running it -------------------------------------------------------------------------------
def run(
    raw: dict[str, Any], tmp_path: Path, seed: int = 1, *, errors_expected: bool = False
) -> tuple[RunResult, list[TraceEvent]]:
    """Run the scenario to its end into `tmp_path` (`scripted-SEED.db`): the result and the trace.

    A run in which an actor died on an exception of its own fails the test,
    unless the test says it expects that (`errors_expected`) and looks at it.
    """
    done = run_scenario(raw, seed=seed, out_dir=tmp_path)
    result = done.result
    if not errors_expected:
        assert result.status != "error", "actors died on exceptions: " + "; ".join(
            e.describe() for e in result.actor_errors
        )
    return result, done.trace()


def caught_offline(db: Path, invariant: str) -> bool:
    """Whether `mastemu check` of the run database fails, naming `invariant`."""
    out = io.StringIO()
    code = asyncio.run(check(db, out=out))
    return code == 1 and f"VIOLATION {invariant}" in out.getvalue()


# ---- what the run left in its tables -----------------------------------------------------------
def states(result: RunResult) -> dict[str, tuple[str, int]]:
    """Workload → (state, preemptions) at the end of the run."""
    with sqlite3.connect(result.out) as c:
        return {w: (s, p) for w, s, p in c.execute("SELECT id, state, preemptions FROM workloads")}


def workload_states(result: RunResult) -> dict[str, str]:
    """Workload → state at the end of the run."""
    with sqlite3.connect(result.out) as c:
        return dict(c.execute("SELECT id, state FROM workloads").fetchall())


def copies(result: RunResult) -> list[tuple[Any, ...]]:
    """Every data copy (table, src, dst, bytes done, size, state, reason, workload), by id."""
    with sqlite3.connect(result.out) as c:
        return c.execute(
            "SELECT table_name, src, dst, bytes_done, size_bytes, state, reason, workload_id "
            "FROM copies ORDER BY id"
        ).fetchall()
