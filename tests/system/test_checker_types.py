"""Checkers fed only the event types they declare judge as if fed every event of their kinds.

A checker names the store and decision types it reads (`types`) so that the
tracer decodes nothing else; one that reads a type it forgot to name would
go blind to it. Differential: over the bug zoo's witnesses with their bug on
(violations to find) and a chaos seed (a long, noisy history), the declared
checkers and the same checkers fed everything report the same violations;
and a checker declared without a type it reads is caught by that comparison.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.checks.preemption import PreemptionChecker
from actors.mast.zoo import ZOO, witness_path
from emulator.invariants import CHECKERS, Checker, check_events, make_checkers, tell_end
from emulator.registry import builtin_scenarios, load_plugins
from emulator.run.scenario import parse_raw
from emulator.trace import TraceEvent
from tests.support.dsl import run

load_plugins()


class FedEverything:
    """A checker with its declared types hidden: it gets every event of its kinds."""

    def __init__(self, inner: Checker) -> None:
        self.inner = inner
        self.name = inner.name
        self.kinds = inner.kinds

    def observe(self, event: TraceEvent) -> list[str]:
        return self.inner.observe(event)

    def at_end(self, t_us: int) -> None:
        tell_end(self.inner, t_us)

    def finish(self) -> list[str]:
        return self.inner.finish()


def _both_ways(events: list[TraceEvent]) -> tuple[list[Any], list[Any]]:
    names = sorted(CHECKERS)
    declared = check_events(events, make_checkers(names))
    everything = check_events(events, [FedEverything(c) for c in make_checkers(names)])
    return declared, everything


@pytest.mark.parametrize("name", [bug.name for bug in ZOO])
def test_a_zoo_witness_is_judged_the_same_with_declared_types(name: str, tmp_path: Path) -> None:
    raw = json.loads(witness_path(name).read_text())
    raw["bugs"] = [name]
    _, events = run(raw, tmp_path)
    declared, everything = _both_ways(events)
    assert declared == everything
    assert everything  # the witness breaks its invariant: there is something to agree on


def test_a_chaos_seed_is_judged_the_same_with_declared_types(tmp_path: Path) -> None:
    raw = parse_raw(builtin_scenarios()["chaos"].read_text(), "chaos.toml")
    raw["duration"] = "2h"
    _, events = run(raw, tmp_path, seed=3)
    declared, everything = _both_ways(events)
    assert declared == everything == []


class BlindPreemption(PreemptionChecker):
    """Declares no decision it reads: it never hears of a preempting dispatch."""

    other_types = {"decision": frozenset()}


def test_a_checker_that_forgets_a_type_it_reads_is_caught(tmp_path: Path) -> None:
    # The harness's own check: a declaration missing `rms.dispatch` goes blind to
    # the victims of a preemption, and the comparison shows it.
    name = "cm-frees-victim-before-checkpoint"
    raw = json.loads(witness_path(name).read_text())
    raw["bugs"] = [name]
    _, events = run(raw, tmp_path)
    declared = check_events(events, [BlindPreemption()])
    everything = check_events(events, [FedEverything(BlindPreemption())])
    assert everything and declared != everything
