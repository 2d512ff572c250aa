"""The bug zoo: every seeded protocol bug is caught by an existing checker.

For each bug of `actors/mast/zoo.py`, its witness scenario (explicit
faults, stored in `scenarios/zoo/NAME.json`) run with `bugs = [NAME]`
violates the invariant the catalogue names, and the same scenario without
the bug is clean. A scenario naming an unknown bug is bad input (exit 2,
key path `bugs[i]`), and the run database keeps the bugs in its scenario
text, so `resume` sees them too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.mast.zoo import ZOO, ZooBug, family, witness_path, witness_text
from emulator.bugs import known_bugs
from emulator.registry import load_plugins
from emulator.run.scenario import convert_scenario
from emulator.testing import run_scenario
from tests.support.cli import run_cli

BY_NAME = {bug.name: bug for bug in ZOO}


def test_zoo_has_at_least_twelve_bugs_from_shallow_to_deep() -> None:
    assert len(ZOO) >= 12
    assert {bug.depth for bug in ZOO} == {"shallow", "medium", "deep"}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_zoo_witness_file_matches_its_builder(name: str) -> None:
    """The stored witnesses are what `actors/mast/zoo.py` builds (`write_witnesses`)."""
    assert witness_path(name).read_text(encoding="utf-8") == witness_text(BY_NAME[name])


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_zoo_bug_caught_by_its_invariant_and_witness_clean_without_it(
    name: str, tmp_path: Path
) -> None:
    bug: ZooBug = BY_NAME[name]
    clean = run_scenario(witness_path(name), out_dir=tmp_path / "clean")
    assert clean.violations == [], [v.message for v in clean.violations]
    assert clean.actor_errors == []
    buggy = run_scenario(witness_path(name), out_dir=tmp_path / "buggy", overrides={"bugs": [name]})
    caught = {v.invariant for v in buggy.violations}
    assert bug.invariant in caught, [v.message for v in buggy.violations]


def test_zoo_empty_bug_list_changes_nothing(tmp_path: Path) -> None:
    """`bugs = []` is the default: the same run, the same trace hash."""
    path = witness_path("gms-quota-ignores-running")
    plain = run_scenario(path, out_dir=tmp_path / "plain")
    empty = run_scenario(path, out_dir=tmp_path / "empty", overrides={"bugs": []})
    assert plain.trace_hash == empty.trace_hash


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_zoo_family_of_each_bug_is_a_valid_scenario_with_the_bug(name: str) -> None:
    """The random family its depth was measured on (chaos, or chaos-like) loads with the bug."""
    raw = family(BY_NAME[name])
    assert convert_scenario(raw, name).bugs == [name]
    assert raw["nemesis"]["enabled"]


def test_zoo_registry_names_invariant_and_witness_of_every_bug() -> None:
    load_plugins()
    known = known_bugs()
    for bug in ZOO:
        entry = known[bug.name]
        assert entry.depth == bug.depth
        assert entry.invariant == bug.invariant
        assert entry.witness == witness_path(bug.name)
        assert entry.witness is not None and entry.witness.is_file()


def test_zoo_unknown_bug_is_bad_input_naming_its_key_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    raw = json.loads(witness_path("rms-forgets-hold").read_text(encoding="utf-8"))
    raw["bugs"] = ["rms-forgets-hold", "no-such-bug"]
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    code, _, err = run_cli(capsys, "run", str(path), "--out", str(tmp_path / "typo.db"))
    assert code == 2
    assert "bugs[1]" in err
    assert "no-such-bug" in err
    assert "rms-forgets-hold" in err  # the known names are listed


def test_zoo_list_bugs_prints_each_with_depth_and_invariant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_cli(capsys, "list", "--bugs", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    for bug in ZOO:
        assert rows[bug.name]["depth"] == bug.depth
        assert rows[bug.name]["invariant"] == bug.invariant
        assert rows[bug.name]["witness"] == str(witness_path(bug.name))
    code, out, _ = run_cli(capsys, "list", "--bugs")
    assert code == 0
    assert "cm-takeover-frees-checkpointing" in out


def test_zoo_resume_keeps_the_bugs_of_the_stored_scenario(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Cut short before the violation, the run resumes with its bug on and is caught."""
    raw = json.loads(witness_path("cm-restart-from-zero").read_text(encoding="utf-8"))
    raw["bugs"] = ["cm-restart-from-zero"]
    path = tmp_path / "restart.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    db = tmp_path / "restart.db"
    code, _, _ = run_cli(capsys, "run", str(path), "--until", "25m", "--out", str(db))
    assert code == 0  # the machine fails at 30 min
    code, out, err = run_cli(capsys, "resume", str(db), "--until", "1h")
    assert code == 1, out + err
    assert "progress" in out + err
