"""Without faults, a built-in MAST scenario's control plane never refuses its own plans.

A CM refusal or a failed dispatch is the system recovering from something: a
machine lost, a leader gone, a message late past a timeout. In a run with no
fault at all each one is a plan the control plane made wrong, and an
emulator that recovers from its own mistakes hides them from every
invariant. Two such mistakes hid this way until a campaign's catalogue showed
`dispatch-failed` reached by a fault-free run: a bid placed on machines the
RMS had just promised to an award still in flight (`test_auction_races.py`),
and a gang's later job placed on a victim's machines without waiting for it
(`test_gang_victims.py`). A third needed no refusal: a bid counting on a
victim another dispatch was already preempting, whose plan waited at its CM
until the RMS rolled the dispatch back (its workload ended "aborted"; once
in quickstart, `test_claimed_victims.py`). The default run checks
tetris-rebalance and quickstart; `pytest -m slow` every built-in MAST
scenario but the fleet-sized ones.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from emulator.registry import builtin_scenarios
from emulator.trace import TraceEvent
from tests.support.builtin import raw_builtin, run_raw
from tests.support.trace import decisions, delivered

# The fleet's scenarios: `bench day` and its peers watch those, meta-chaos has its own test.
FLEET = ("meta-day", "meta-week", "meta-scale", "meta-chaos")


def mast_builtins() -> list[str]:
    return sorted(
        name
        for name, path in builtin_scenarios().items()
        if name not in FLEET
        and tomllib.loads(path.read_text(encoding="utf-8")).get("system", {}).get("kind") == "mast"
    )


def assert_no_refusals(name: str, tmp_path: Path, duration: str | None = None) -> list[TraceEvent]:
    """Run built-in `name` without faults (to `duration`); assert it never refused its own
    plans; return its trace."""
    raw = raw_builtin(name)
    raw["faults"] = []
    raw.pop("nemesis", None)
    if duration is not None:
        raw["duration"] = duration
    result, events = run_raw(raw, tmp_path / "run.db")
    assert result.status == "ok" and result.violations == []
    assert [e for e in events if e.kind == "crash"] == []
    assert decisions(events, "cm.reject") == []
    assert decisions(events, "dispatch.failed") == []
    # A dispatch that half started and was rolled back ends its workload "aborted".
    ended = delivered(events, "WorkloadEnded")
    assert [m["workload_id"] for m in ended if m["reason"] == "aborted"] == []
    return events


def test_tetris_rebalance_without_faults_refuses_nothing(tmp_path: Path) -> None:
    # Its first failed dispatch came at 34m, the gang's refusal at 2h10m.
    assert_no_refusals("tetris-rebalance", tmp_path, duration="2h15m")


@pytest.mark.slow
@pytest.mark.parametrize("name", mast_builtins())
def test_a_builtin_scenario_without_faults_refuses_nothing(name: str, tmp_path: Path) -> None:
    assert_no_refusals(name, tmp_path)
