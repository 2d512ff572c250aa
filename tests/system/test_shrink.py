"""shrink: a failing run's faults cut down to the ones the violation needs.

The failing runs come from a deliberately broken lease candidate whose store
writes ignore the fencing epoch. It only does harm when it wakes from a
pause after its lease has passed to the other candidate: the pause is the one
fault that matters, and every other fault (scripted or drawn by the nemesis)
must be removed from the written reproducer.
"""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

import pytest

from emulator.registry import builtin_scenarios, load_plugins, register_actor
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import decode_scenario, parse_raw
from emulator.run.shrink import ddmin, duration_text, fault_raw, materialise, to_toml
from emulator.units import parse_duration_us
from tests.support.broken import UnfencedCandidate
from tests.support.cli import run_cli

load_plugins()
register_actor(UnfencedCandidate)


# leader-lease compressed into one hour: the leader crashes at 10m, the WAN
# between the candidates is cut at 20m, the leader freezes at 40m. Two more
# scripted link faults and a nemesis of slow, lossy and duplicating links add
# noise; none of them can make a candidate act on a stale epoch.
BROKEN = (
    builtin_scenarios()["leader-lease"]
    .read_text()
    .replace('"lease-candidate"', f'"{UnfencedCandidate.kind}"')
    .replace('duration = "6h"', 'duration = "1h"')
    .replace('at = "1h"', 'at = "10m"')
    .replace('at = "3h"', 'at = "20m"')
    .replace('at = "5h"', 'at = "40m"')
    .replace('restart_after = "20m"', 'restart_after = "5m"')
    .replace('duration = "30m"', 'duration = "5m"')
    .replace(
        "[invariants]",
        """[[faults]]
action = "delay"
at = "2m"
between = ["us-east", "ap-south"]
extra_ms = 400
duration = "10m"

[[faults]]
action = "loss"
at = "45m"
between = ["eu-west", "ap-south"]
probability = 0.3
duration = "5m"

[nemesis]
enabled = true
start = "1m"
interval_mean = "5m"
duration_mean = "1m"
actions = ["delay", "duplicate", "loss"]

[invariants]""",
    )
)


def run_text(text: str, out: Path, *, seed: int = 1, until_us: int | None = None) -> RunResult:
    plan = plan_run(decode_scenario(text, "test.toml"), text, "test.toml")
    return asyncio.run(execute(plan, seed=seed, out=out, until_us=until_us))


# ---- shrinking a real failure -----------------------------------------------------------
def test_only_the_pause_that_causes_the_stale_write_is_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    failing = run_text(BROKEN, tmp_path / "broken.db")
    assert any("stale effect" in v[3] for v in failing.violations)
    # Five scripted faults plus what the nemesis drew.
    faults_before = len(failing.fault_windows)
    assert faults_before > 8

    out = tmp_path / "min.toml"
    code, text, _ = run_cli(capsys, "shrink", str(failing.out), "--out", str(out))
    assert code == 0, text
    assert f"faults: {faults_before} before, 1 after" in text
    assert f"reproduce: mastemu run {out}" in text

    written = tomllib.loads(out.read_text())
    assert written["faults"] == [
        {"action": "pause", "at": "40m", "target": "leader of demo/leader", "duration": "15s"}
    ]
    # The nemesis is kept only for its final heal: it draws nothing.
    assert written["nemesis"]["faults_max"] == 0
    assert written["seed"] == 1 and written["name"] == "leader-lease-min"
    assert written["invariants"] == parse_raw(BROKEN, "t")["invariants"]

    # The file reproduces the violation the way a user runs it.
    code, text, _ = run_cli(capsys, "run", str(out), "--out", str(tmp_path / "again.db"))
    assert code == 1 and "VIOLATION lease-safety" in text and "stale effect" in text


def test_a_clean_run_has_nothing_to_shrink(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = builtin_scenarios()["leader-lease"].read_text()
    clean = run_text(text, tmp_path / "clean.db", until_us=parse_duration_us("30m"))
    assert clean.violations == []
    code, out, _ = run_cli(capsys, "shrink", str(clean.out), "--out", str(tmp_path / "m.toml"))
    assert code == 1 and "violated no invariant and failed no other way: nothing to shrink" in out
    assert not (tmp_path / "m.toml").exists()


def test_bad_input_exits_2_naming_the_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "missing.db"
    code, _, err = run_cli(capsys, "shrink", str(missing))
    assert code == 2 and f"{missing}: no such run database" in err
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    code, out, err = run_cli(capsys, "shrink", str(junk))
    assert code == 2 and str(junk) in err and "Traceback" not in out + err

    failing = run_text(BROKEN, tmp_path / "broken.db", until_us=parse_duration_us("41m"))
    code, _, err = run_cli(capsys, "shrink", str(failing.out), "--invariant", "gang")
    assert code == 2 and "'gang' was not violated (found: lease-safety)" in err


# ---- the parts ------------------------------------------------------------------------
def test_the_materialised_nemesis_schedule_is_the_one_the_run_had(tmp_path: Path) -> None:
    # On MAST, whose roles (fault targets) come from the system's build: the
    # explicit schedule must produce the same fault windows as the nemesis did.
    text = builtin_scenarios()["chaos"].read_text()
    until_us = parse_duration_us("40m")
    drawn = run_text(text, tmp_path / "drawn.db", seed=3, until_us=until_us)
    scenario = decode_scenario(text, "chaos.toml")
    schedule = materialise(plan_run(scenario, text, "chaos.toml"), 3)
    raw = parse_raw(text, "chaos.toml")
    raw["nemesis"] = {"enabled": False}
    raw["faults"] = [fault_raw(f) for f in schedule.faults if f.at <= until_us]
    explicit = run_text(to_toml(raw), tmp_path / "explicit.db", seed=3, until_us=until_us)
    assert len(drawn.fault_windows) > 5
    assert explicit.fault_windows == drawn.fault_windows


@pytest.mark.parametrize(
    ("keep", "fails_when", "expected"),
    [
        # Only faults 3 and 7 together break it: ddmin finds exactly them.
        (list(range(10)), {3, 7}, [3, 7]),
        (list(range(10)), {9}, [9]),
        # Breaks with no fault at all: the reproducer needs none.
        (list(range(10)), set(), []),
    ],
)
def test_ddmin_finds_the_faults_that_matter(
    keep: list[int], fails_when: set[int], expected: list[int]
) -> None:
    assert ddmin(keep, lambda kept: fails_when <= set(kept), lambda: True) == expected


def test_ddmin_stops_when_its_budget_is_spent() -> None:
    calls: list[list[int]] = []

    def fails(kept: list[int]) -> bool:
        calls.append(kept)
        return {3, 7} <= set(kept)

    found = ddmin(list(range(10)), fails, lambda: len(calls) < 3)
    assert len(calls) == 3 and {3, 7} <= set(found)


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (0, "0s"),
        (250_000, "0.25s"),
        (90_000_000, "1m30s"),
        (5 * 3_600_000_000, "5h"),
        (3_723_456_789, "1h2m3.456789s"),
        (7, "0.000007s"),
    ],
)
def test_durations_are_written_exactly(us: int, text: str) -> None:
    assert duration_text(us) == text and parse_duration_us(text) == us


def test_the_toml_writer_round_trips_scenarios_and_awkward_strings() -> None:
    for name in ("chaos", "leader-lease", "quickstart"):
        raw = parse_raw(builtin_scenarios()[name].read_text(), name)
        assert tomllib.loads(to_toml(raw)) == raw
    awkward = {
        "name": 'quote " backslash \\ tab \t del \x7f é 😀',
        "n": 3,
        "x": 1e-05,
        "flag": False,
        "table": {"key with space": [1, 2], "nested": {"a": "b"}, "empty": {}},
        "items": [{"a": 1}, {"b": [{"c": 2}]}],
    }
    assert tomllib.loads(to_toml(awkward, ["a comment"])) == awkward
