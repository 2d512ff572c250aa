"""Running the built-in scenarios as dicts, edited by a test before the run.

A test reads a built-in scenario's TOML into a dict (`raw_builtin`), changes
what its story needs (faults, duration, the system kind) and runs it
(`run_raw`) with the scenario's own name and seed.
"""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from emulator.registry import builtin_scenarios, load_plugins
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import convert_scenario
from emulator.trace import TraceEvent
from tests.support.rundb import trace_events

load_plugins()

# What a run gives a test: its result and its trace.
Run = tuple[RunResult, list[TraceEvent]]


def raw_builtin(name: str) -> dict[str, Any]:
    """The built-in scenario `name` as the dict its TOML file holds."""
    return tomllib.loads(builtin_scenarios()[name].read_text(encoding="utf-8"))


def run_raw(raw: dict[str, Any], out: Path) -> Run:
    """Run a scenario dict into the database `out`, with its name and seed (default 1)."""
    text = msgspec.json.encode(raw).decode()
    plan = plan_run(convert_scenario(raw, raw["name"]), text, raw["name"])
    result = asyncio.run(execute(plan, seed=raw.get("seed", 1), out=out))
    return result, trace_events(out)
