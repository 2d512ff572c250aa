"""meta-day, MAST's fleet at its own scale, in the default test run: no actor dies on a bug.

The small world never showed it: on meta-day (10 regions, ~50k GPUs) the RMS
of ap-east crashed about every ten emulated minutes from 1h05m on, while the
run said `ok`. Seed 1 of a 3-hour meta-day run is that run; its first 70
minutes take seconds.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from emulator.registry import load_plugins
from emulator.run.runner import execute, plan_run
from emulator.run.scenario import decode_scenario
from emulator.units import MIN

load_plugins()

META_DAY = """
name = "md"
duration = "3h"
seed = 1
[system]
kind = "mast"
world = "meta-day"
"""


def test_meta_day_runs_its_first_70_minutes_without_an_actor_error(tmp_path: Path) -> None:
    plan = plan_run(decode_scenario(META_DAY, "meta-day.toml"), META_DAY, "meta-day.toml")
    result = asyncio.run(execute(plan, seed=1, out=tmp_path / "md.db", until_us=70 * MIN))
    assert result.actor_errors == [], [e.describe() for e in result.actor_errors]
    assert result.status == "ok"
    with sqlite3.connect(result.out) as db:
        running = db.execute("SELECT count(*) FROM workloads WHERE state = 'RUNNING'").fetchone()
    assert running[0] > 100  # the control plane works at this size, not only survives
