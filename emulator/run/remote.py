"""A whole scenario run on a Dask worker, its database shipped back (`compare --cluster`).

The worker gets the scenario's text as the caller planned it (a compare's
per-policy variant), its source name and the seed; it plans and runs it
exactly as `execute` does here, in a scratch folder of its own, and returns
the run's result with its database's files, which the caller writes where a
local run would have put them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path

from emulator.run.pools import land_db, ship_db, worker_tempdir
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import convert_scenario, parse_raw


@dataclass(frozen=True)
class RemoteRun:
    result: RunResult
    files: dict[str, bytes]


def run_text_shipped(text: str, source: str, seed: int, until_us: int | None) -> RemoteRun:
    """Plan and run `text` on this worker; the result and the database's files."""
    scenario = convert_scenario(parse_raw(text, source), source)
    plan = plan_run(scenario, text, source)
    with worker_tempdir() as workdir:
        db = Path(workdir) / "run.db"
        result = asyncio.run(execute(plan, seed=seed, out=db, until_us=until_us))
        return RemoteRun(result, ship_db(db))


def land_run(remote: RemoteRun, out: Path) -> RunResult:
    """Write a shipped run's database at `out`; its result, pointing there."""
    land_db(remote.files, out.parent, out.name)
    return replace(remote.result, out=out)
