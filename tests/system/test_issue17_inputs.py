"""What an adversarial probe found (issue 17), each now an exit 2 naming the file and key path.

Every case is a built-in scenario with one edit, run for one emulated minute:
inputs that livelocked or hung (a zero scan interval, a million tenants),
were accepted although wrong (a heal before its faults, a jitter of 500%,
a lease renewed less often than it expires), or ended in a traceback (an
unknown home region, 500 nested tables). Then the command line's own
cases, and the surface a person meets: --version, --json, help on every
option, a killed run's status.
"""

from __future__ import annotations

import argparse
import copy
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from emulator.cli.main import build_parser
from emulator.registry import builtin_scenarios
from tests.support.cli import run_cli

Edit = Callable[[dict[str, Any]], None]


def _set(*path: str, value: Any) -> Edit:
    def edit(raw: dict[str, Any]) -> None:
        node = raw
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return edit


def _lease_renewed_late(raw: dict[str, Any]) -> None:
    for actor in raw["actors"]:
        actor["params"].update(renew_every="30s", lease_ttl="10s")


def _neg_quota(raw: dict[str, Any]) -> None:
    raw["system"]["tenant_list"][0]["cpu_quota"] = -30774


def _nested(depth: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth):
        value = {"x": value}
    return value


CASES: list[tuple[str, str, Edit, str, str]] = [
    # (id, scenario, edit, key path, message)
    (
        "scan-0s",
        "quickstart",
        _set("system", "scan_interval", value="0s"),
        "system.scan_interval",
        "must be at least 1s",
    ),
    (
        "scan-1us",
        "quickstart",
        _set("system", "scan_interval", value="1us"),
        "system.scan_interval",
        "must be at least 1s",
    ),
    (
        "tenants-1e6",
        "quickstart",
        _set("system", "tenants", value=1_000_000),
        "system.tenants",
        "<= 10000",
    ),
    (
        "home-mars",
        "quickstart",
        _set("system", "manual_homes", value={"region": "mars", "share": 0.5}),
        "system.manual_homes.region",
        "unknown region 'mars'",
    ),
    (
        "load-0",
        "quickstart",
        _set("system", "load", value=0),
        "system.load",
        "> 0.0",
    ),
    (
        "kind-3",
        "quickstart",
        _set("system", "kind", value=3),
        "system.kind",
        "expected the name of a system",
    ),
    (
        "name-escapes",
        "quickstart",
        _set("name", value="../../escaped"),
        "name",
        "cannot name a run database",
    ),
    (
        "heal-before-start",
        "chaos",
        _set("nemesis", "heal_at", value="1m"),
        "nemesis.heal_at",
        "before nemesis.start",
    ),
    (
        "jitter-5",
        "leader-lease",
        _set("network", "jitter_fraction", value=5),
        "network.jitter_fraction",
        "<= 1.0",
    ),
    (
        "renew-after-ttl",
        "leader-lease",
        _lease_renewed_late,
        "actors[0].params.renew_every",
        "must be shorter than lease_ttl",
    ),
    (
        # Found by the fuzz test: the CMs' quota policy died on it, run after run.
        "negative-quota",
        "region-outage",
        _neg_quota,
        "system.tenant_list[0].cpu_quota",
        ">= 0",
    ),
    (
        "nested-500",
        "quickstart",
        _set("system", "workload", value=_nested(500)),
        "system.workload.x.x",
        "nested more than 64 levels deep",
    ),
]


@pytest.mark.parametrize(
    ("scenario", "edit", "key_path", "message"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_a_bad_input_found_by_the_probe_exits_2_naming_its_key_path(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scenario: str,
    edit: Edit,
    key_path: str,
    message: str,
) -> None:
    raw = copy.deepcopy(tomllib.loads(builtin_scenarios()[scenario].read_text(encoding="utf-8")))
    edit(raw)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    db = tmp_path / "s.db"
    code, _, err = run_cli(capsys, "run", str(path), "--until", "1m", "--out", str(db))
    assert code == 2
    assert err.startswith(f"error: {path}: {key_path}") and message in err, err
    assert not db.exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "a scenario is a table of keys (a JSON object), not an array"),
        ('{"name": "x", "duration": NaN}', "not valid JSON"),
    ],
)
def test_a_json_file_that_is_no_scenario_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "s.json"
    path.write_text(text, encoding="utf-8")
    code, _, err = run_cli(capsys, "run", str(path))
    assert code == 2 and err.startswith(f"error: {path}: ") and message in err, err


def test_a_toml_file_with_a_byte_order_mark_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = builtin_scenarios()["leader-lease"].read_text(encoding="utf-8")
    path = tmp_path / "bom.toml"
    path.write_text("\ufeff" + text, encoding="utf-8")
    code, _, err = run_cli(capsys, "run", str(path), "--until", "1m", "--out", str(tmp_path / "b"))
    assert code == 0, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "leader-lease", "--until", "0"], "--until: must be later than 0"),
        (["run", "leader-lease", "--until", "-5m"], "--until: must not be negative"),
        (["compare", "quickstart", "--policies", "mast,mast"], "names mast more than once"),
        (["schema", "--out", "no/such/schema.json"], "folder no/such does not exist"),
    ],
)
def test_a_bad_argument_exits_2_saying_why(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and message in err, err
    assert list(tmp_path.iterdir()) == []


def test_until_takes_a_plain_number_of_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.db"
    code, out, _ = run_cli(capsys, "run", "leader-lease", "--until", "30", "--out", str(db))
    assert code == 0 and "emulated: 30.000s" in out


def test_report_html_into_an_existing_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lease_run: Any
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine", encoding="utf-8")
    code, _, err = run_cli(capsys, "report", str(lease_run.db), "--html", str(taken))
    assert code == 2 and f"{taken}: exists and is not a folder" in err
    assert taken.read_text(encoding="utf-8") == "mine"


# ---- the surface a person meets -------------------------------------------------------------
def test_version_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.startswith("mastemu ")


def test_list_json_names_every_builtin_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "list", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["name"] for r in rows] == list(builtin_scenarios())
    assert all(r["duration_s"] > 0 and isinstance(r["description"], str) for r in rows)


def test_check_json_is_one_object_with_the_verdicts(
    capsys: pytest.CaptureFixture[str], lease_run: Any
) -> None:
    code, out, _ = run_cli(capsys, "check", str(lease_run.db), "--json")
    result = json.loads(out)
    assert code == 0
    assert result["violations"] == [] and result["reproduce"] is None
    assert result["events"] > 0 and "lease-safety" in result["checkers"]


def _options(parser: argparse.ArgumentParser, where: str = "mastemu") -> list[tuple[str, Any]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.extend(_options(sub, f"{where} {name}"))
        elif not isinstance(action, argparse._HelpAction):
            found.append((f"{where} {'/'.join(action.option_strings) or action.dest}", action))
    return found


def test_every_option_and_argument_has_help_text() -> None:
    missing = [name for name, action in _options(build_parser()) if not action.help]
    assert missing == []


def test_report_of_a_killed_run_says_killed_not_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.system.test_resume import kill_in_child, one_hour

    db = tmp_path / "killed.db"
    kill_in_child(["run", str(one_hour(tmp_path)), "--out", str(db)], "10m")
    code, out, _ = run_cli(capsys, "report", str(db), "--json")
    assert code == 0
    assert json.loads(out)["status"] == "killed before it finished (`mastemu resume` continues it)"


@pytest.mark.parametrize(("cost", "refused"), [("4m59s", False), ("5m", True), ("1h", True)])
def test_a_checkpoint_as_long_as_the_stop_timeout_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cost: str, refused: bool
) -> None:
    # The CM frees a stopping victim's machines at its stop timeout (5 minutes):
    # a checkpoint that takes as long would be cut short and the preemption
    # invariant would flag the run with no bug in it.
    argv = ["run", "quickstart", "--set", f'system.checkpoint_cost="{cost}"', "--until", "1m"]
    code, _, err = run_cli(capsys, *argv, "--out", str(tmp_path / "q.db"))
    assert (code == 2) is refused, err
    if refused:
        assert "system.checkpoint_cost: must be shorter than the cluster manager's stop" in err
