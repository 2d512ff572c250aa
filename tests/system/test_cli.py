"""The `mastemu` command as a user drives it: help, list, schema, run, replay,
export, check, and their exit codes on bad input.

Commands run in-process through `emulator.cli.main.main` (capsys sees their
output); one full `leader-lease` run is shared by the whole session
(`lease_run` in conftest). The lease story itself is asserted at the end,
from the run database.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from emulator.run.events import named
from emulator.run.stepper import PROMPT
from emulator.units import MIN, H, S, parse_duration_us
from tests.support.chrome import spans as chrome_spans
from tests.support.cli import run_cli
from tests.support.trace import store_events

COMMANDS = ["list", "run", "replay", "export", "check", "schema", "bench"]


def line_time_us(line: str) -> int:
    """The emulated time in the first column of a `replay` line."""
    return parse_duration_us(line.split()[0])


def line_seq(line: str) -> int:
    return int(line.split()[1].removeprefix("#"))


# ---- help, list, schema ------------------------------------------------------
def test_cli_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize("command", COMMANDS)
def test_cli_help_of_every_command_exits_0(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0
    assert out.startswith(f"usage: mastemu {command}")


def test_cli_without_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys)
    assert code == 2
    assert "usage:" in err


def test_cli_list_shows_leader_lease_with_its_length(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    line = next(li for li in out.splitlines() if li.startswith("leader-lease "))
    assert "6h00m00.000s" in line
    assert "Two candidates" in line


def test_cli_schema_is_a_json_schema_of_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    defs = schema["$defs"]
    assert schema["$ref"] == "#/$defs/Scenario"
    scenario = defs["Scenario"]
    assert {"name", "duration"} <= set(scenario["required"])
    # A scenario gives a world, or names a system that brings its own.
    assert {"world", "system"} <= set(scenario["properties"])
    assert scenario["additionalProperties"] is False
    faults = scenario["properties"]["faults"]["items"]
    assert faults["discriminator"]["propertyName"] == "action"
    assert faults["discriminator"]["mapping"]["pause"] == "#/$defs/PauseFault"
    # Duration defaults are shown in seconds, the unit of a bare number in a scenario.
    assert defs["NemesisSpec"]["properties"]["start"]["default"] == 600
    assert defs["KernelSpec"]["properties"]["restart_delay"]["default"] == 1


def test_cli_schema_accepts_leader_lease_and_rejects_unknown_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import tomllib

    from emulator.registry import builtin_scenarios

    schema = json.loads(run_cli(capsys, "schema")[1])
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    doc = tomllib.loads(builtin_scenarios()["leader-lease"].read_text(encoding="utf-8"))
    assert list(validator.iter_errors(doc)) == []
    doc["network"]["bogus"] = 1
    assert list(validator.iter_errors(doc)) != []


def test_cli_schema_out_writes_the_same_schema(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, printed, _ = run_cli(capsys, "schema")
    target = tmp_path / "scenario.schema.json"
    code, out, _ = run_cli(capsys, "schema", "--out", str(target))
    assert code == 0
    assert out == ""
    assert json.loads(target.read_text(encoding="utf-8")) == json.loads(printed)


def test_cli_schema_out_to_a_missing_folder_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "no-such-dir" / "s.json"
    code, _, err = run_cli(capsys, "schema", "--out", str(target))
    assert code == 2
    assert str(target) in err


# ---- run -----------------------------------------------------------------------
def test_cli_run_leader_lease_prints_a_summary_and_the_trace_hash(lease_run) -> None:
    assert lease_run.code == 0
    lines = lease_run.stdout.splitlines()
    assert lines[0] == f"scenario: leader-lease  seed: 1  out: {lease_run.db}"
    summary = {
        key.strip(): value.strip() for key, _, value in (li.partition(":") for li in lines[1:-1])
    }
    assert summary["status"] == "ok"
    assert summary["emulated"] == "6h00m00.000s"
    assert summary["actor crashes"] == "1 (0 on a bug of the actor's own)"
    assert summary["violations"] == "0"
    assert summary["fault windows"] == "3"
    assert summary["run database"] == str(lease_run.db)
    for key in ("events", "deliveries", "wall time"):
        assert key in summary
    # What to run next, each with this run's database.
    assert f"next: mastemu report {lease_run.db}" in lease_run.stdout
    for command in ("check", "export"):
        assert f"mastemu {command} {lease_run.db}" in lease_run.stdout
    assert "VIOLATION" not in lease_run.stdout
    assert re.fullmatch(r"trace-hash: [0-9a-f]{32}", lines[-1])


def test_cli_run_records_the_printed_hash_in_the_database(lease_run, lease_trace) -> None:
    meta, rows = lease_trace
    assert meta.status == "ok"
    assert meta.trace_hash == lease_run.trace_hash
    assert meta.scenario_name == "leader-lease"
    assert meta.seed == 1
    assert meta.end_t_us == 6 * H
    assert meta.events == len(rows)
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))


def test_cli_run_default_out_is_runs_name_seed_db(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "run", "leader-lease", "--seed", "7", "--until", "1m")
    assert code == 0
    expected = Path("runs") / "leader-lease-7.db"
    assert out.splitlines()[0] == f"scenario: leader-lease  seed: 7  out: {expected}"
    assert (tmp_path / expected).is_file()


def test_cli_run_until_stops_early(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = run_cli(
        capsys, "run", "leader-lease", "--until", "90s", "--out", str(tmp_path / "r.db")
    )
    assert code == 0
    assert "      emulated: 1m30.000s" in out.splitlines()


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--until", "soon"), ("--until", "-5m"), ("--speed", "0"), ("--seed", "-1"), ("--seed", "x")],
)
def test_cli_run_rejects_bad_flags_with_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, value: str
) -> None:
    out = tmp_path / "r.db"
    code, _, err = run_cli(capsys, "run", "leader-lease", flag, value, "--out", str(out))
    assert code == 2
    assert f"argument {flag}" in err
    assert not out.exists()


def test_cli_run_until_far_beyond_any_float_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 10**400 hours overflows float → int: a usage error, not an OverflowError.
    code, _, err = run_cli(capsys, "run", "leader-lease", "--until", "1" + "0" * 400 + "h")
    assert code == 2
    assert "argument --until: too large" in err


def test_cli_run_refuses_to_replace_a_file_that_is_not_a_run_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    precious = tmp_path / "notes.toml"
    precious.write_text("keep me\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "run", "leader-lease", "--until", "1s", "--out", str(precious))
    assert code == 2
    assert "not a mastemu run database" in err
    assert precious.read_text(encoding="utf-8") == "keep me\n"


def test_cli_run_replaces_an_old_run_database_only_with_force(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, read_run
) -> None:
    out = tmp_path / "r.db"
    assert run_cli(capsys, "run", "leader-lease", "--until", "2m", "--out", str(out))[0] == 0
    code, _, err = run_cli(capsys, "run", "leader-lease", "--until", "1m", "--out", str(out))
    assert code == 2
    assert "a run database exists (a run of leader-lease, seed 1, ok)" in err
    assert "--force" in err
    assert read_run(out)[0].end_t_us == 2 * MIN
    argv = ("run", "leader-lease", "--until", "1m", "--out", str(out), "--force")
    assert run_cli(capsys, *argv)[0] == 0
    meta, rows = read_run(out)
    assert meta.end_t_us == 1 * MIN
    assert max(r.t_us for r in rows) == 1 * MIN


def test_cli_run_out_that_is_a_directory_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run_cli(capsys, "run", "leader-lease", "--until", "1s", "--out", str(tmp_path))
    assert code == 2
    assert "is a folder" in err


# ---- replay ----------------------------------------------------------------------
def test_cli_replay_grep_shows_leadership_decisions_in_time_order(
    capsys: pytest.CaptureFixture[str], lease_run
) -> None:
    code, out, _ = run_cli(capsys, "replay", str(lease_run.db), "--grep", "lease.leader")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) >= 2
    assert all("lease.leader" in li for li in lines)
    times = [line_time_us(li) for li in lines]
    assert times == sorted(times)
    assert [line_seq(li) for li in lines] == sorted(line_seq(li) for li in lines)
    # The initial election, then the takeover after the crash at 1 h.
    assert times[0] == 0
    assert '"epoch":1' in lines[0]
    assert "demo/us-east" in lines[0]
    after_crash = [li for li, t in zip(lines, times, strict=True) if H <= t <= H + 15 * S]
    assert len(after_crash) == 1
    assert '"epoch":2' in after_crash[0]
    assert "demo/eu-west" in after_crash[0]


def test_cli_replay_from_to_restricts_the_window(
    capsys: pytest.CaptureFixture[str], lease_run
) -> None:
    code, out, _ = run_cli(capsys, "replay", str(lease_run.db), "--from", "59m", "--to", "1h2m")
    assert code == 0
    lines = out.splitlines()
    assert lines
    times = [line_time_us(li) for li in lines]
    assert min(times) >= 59 * MIN
    assert max(times) < 62 * MIN
    assert times == sorted(times)
    # The crash at 1 h lies inside the window.
    assert any(" crash " in li and "demo/us-east" in li for li in lines)


def test_cli_replay_window_and_grep_combine(capsys: pytest.CaptureFixture[str], lease_run) -> None:
    _, out, _ = run_cli(
        capsys, "replay", str(lease_run.db), "--grep", "lease.leader", "--from", "30m", "--to", "2h"
    )
    lines = out.splitlines()
    assert len(lines) == 1
    assert '"epoch":2' in lines[0]


def test_cli_replay_from_after_to_exits_2(capsys: pytest.CaptureFixture[str], lease_run) -> None:
    code, _, err = run_cli(capsys, "replay", str(lease_run.db), "--from", "2h", "--to", "1h")
    assert code == 2
    assert "--from" in err


def test_cli_replay_step_prints_one_event_per_enter_and_stops_at_eof(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, lease_run
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("\n" * 3))
    code, out, _ = run_cli(capsys, "replay", str(lease_run.db), "--step")
    assert code == 0
    # The first event is shown at once, each Enter shows one more, EOF stops
    # (keys and the status line: tests/system/test_view_replay_step.py).
    assert out.count(PROMPT) == 4
    assert all(len(line) <= 100 for line in out.splitlines())


# ---- export ------------------------------------------------------------------------
def test_cli_export_jsonl_is_one_event_object_per_line(
    capsys: pytest.CaptureFixture[str], lease_run, lease_trace
) -> None:
    meta, _ = lease_trace
    code, out, _ = run_cli(capsys, "export", str(lease_run.db), "--format", "jsonl")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == meta.events
    for row in rows:
        assert set(row) == {"seq", "t_us", "kind", "src", "dst", "type", "payload"}
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    assert rows[0]["kind"] == "run"
    assert rows[0]["type"] == "start"
    assert rows[0]["payload"] == {"scenario": "leader-lease", "seed": 1}
    assert rows[-1]["kind"] == "run"
    assert rows[-1]["type"] == "end"
    assert rows[-1]["payload"] == "ok"
    times = [r["t_us"] for r in rows]
    assert times == sorted(times)


def test_cli_export_out_writes_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lease_run
) -> None:
    target = tmp_path / "trace.jsonl"
    code, out, _ = run_cli(capsys, "export", str(lease_run.db), "--out", str(target))
    assert code == 0
    assert out == ""
    first = json.loads(target.read_text(encoding="utf-8").splitlines()[0])
    assert first["seq"] == 1


def test_cli_export_chrome_has_tracks_flows_and_fault_windows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lease_run
) -> None:
    target = tmp_path / "trace.json"
    code, _, _ = run_cli(
        capsys, "export", str(lease_run.db), "--format", "chrome", "--out", str(target)
    )
    assert code == 0
    events = json.loads(target.read_text(encoding="utf-8"))["traceEvents"]
    tracks = {e["args"]["name"]: e["tid"] for e in events if e.get("name") == "thread_name"}
    assert {"faults", "demo/us-east", "demo/eu-west", "client/ap-south"} <= set(tracks)
    # Every message is an arrow: a flow start on the sender's track, a flow
    # end with the same id on the receiver's, no earlier than the send.
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts
    assert set(starts) == set(ends)
    for flow_id, start in starts.items():
        assert ends[flow_id]["ts"] >= start["ts"]
    requests = [e for e in starts.values() if e["name"] == "Request"]
    assert requests
    assert {e["tid"] for e in requests} == {tracks["client/ap-south"]}
    # Fault windows are slices on the faults track.
    windows = {
        (s.name.split()[0], s.ts, s.dur)
        for s in chrome_spans(events)
        if s.cat == "fault" and s.tid == tracks["faults"]
    }
    assert ("partition", 3 * H, 30 * MIN) in windows
    assert ("crash", 1 * H, 20 * MIN) in windows
    assert ("pause", 5 * H, 15 * S) in windows
    assert len(windows) == 3


def test_cli_export_chrome_closes_link_rule_and_node_windows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = tmp_path / "faulty.toml"
    scenario.write_text(
        """
name = "faulty"
duration = "30m"
[world]
regions = [{ name = "a", machines = 1, racks = 1 }, { name = "b", machines = 1, racks = 1 }]
[[actors]]
kind = "lease-candidate"
address = "c/a"
host = "a/ctl0"
params = { role = "r", peers = ["c/b"] }
[[actors]]
kind = "lease-candidate"
address = "c/b"
host = "b/ctl0"
params = { role = "r", peers = ["c/a"] }
[[faults]]
action = "loss"
at = "1m"
duration = "2m"
between = ["a", "b"]
probability = 0.5
[[faults]]
action = "delay"
at = "2m"
duration = "5m"
extra_ms = 100
[[faults]]
action = "down"
at = "10m"
node = "b/dc0/fd0"
duration = "1m"
[[faults]]
action = "duplicate"
at = "20m"
duration = "20m"
probability = 0.1
[[faults]]
action = "heal"
at = "25m"
""",
        encoding="utf-8",
    )
    db = tmp_path / "faulty.db"
    assert run_cli(capsys, "run", str(scenario), "--out", str(db))[0] == 0
    target = tmp_path / "trace.json"
    assert run_cli(capsys, "export", str(db), "--format", "chrome", "--out", str(target))[0] == 0
    events = json.loads(target.read_text(encoding="utf-8"))["traceEvents"]
    windows = sorted(
        (s.name.split()[0], s.ts, s.dur) for s in chrome_spans(events) if s.cat == "fault"
    )
    assert windows == [
        ("delay", 2 * MIN, 5 * MIN),
        ("down", 10 * MIN, 1 * MIN),
        ("duplicate", 20 * MIN, 5 * MIN),  # cut short by the heal at 25 min
        ("loss", 1 * MIN, 2 * MIN),
    ]


# ---- check, and commands on files that are not run databases ---------------------
def test_cli_check_clean_run_exits_0(
    capsys: pytest.CaptureFixture[str], lease_run, lease_trace
) -> None:
    meta, _ = lease_trace
    code, out, _ = run_cli(capsys, "check", str(lease_run.db))
    assert code == 0
    first, *rest = out.strip().splitlines()
    assert first == (
        f"checked {meta.events} events against lease-safety: 0 violation(s), 0 actor error(s)"
    )
    # Then what the run exercised: the lease demo's sometimes properties.
    assert rest[0] == "sometimes: 2 of 3 reached over 1 run"
    names = [line.split()[0] for line in rest[1:]]
    assert names == ["leader-failover", "leader-lost-lease", "leader-back-at-expiry"]
    assert "never reached" in rest[3]


@pytest.mark.parametrize("command", ["replay", "export", "check"])
def test_cli_reading_a_missing_run_database_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    missing = tmp_path / "nope.db"
    code, out, err = run_cli(capsys, command, str(missing))
    assert code == 2
    assert err == f"error: {missing}: no such run database\n"
    assert out == ""
    assert not missing.exists()


@pytest.mark.parametrize("command", ["replay", "export", "check"])
@pytest.mark.parametrize("content", [b"not a database\n", b""], ids=["text", "empty"])
def test_cli_reading_a_file_that_is_not_a_run_database_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, content: bytes
) -> None:
    bogus = tmp_path / "bogus.db"
    bogus.write_bytes(content)
    code, _, err = run_cli(capsys, command, str(bogus))
    assert code == 2
    assert err.startswith(f"error: {bogus}: ")


def test_cli_export_to_a_missing_folder_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lease_run
) -> None:
    target = tmp_path / "no-such-dir" / "t.json"
    code, _, err = run_cli(capsys, "export", str(lease_run.db), "--out", str(target))
    assert code == 2
    assert str(target) in err


# ---- the leader-lease story, read back from the run database -----------------------
def test_lease_story_leader_crash_at_1h_hands_over_to_the_other_candidate(lease_trace) -> None:
    _, rows = lease_trace
    decisions = [r for r in rows if r.kind == "decision" and r.type == "lease.leader"]
    assert (decisions[0].t_us, decisions[0].src, decisions[0].payload["epoch"]) == (
        0,
        "demo/us-east",
        1,
    )
    crash = next(r for r in rows if r.kind == "crash")
    assert (crash.t_us, crash.dst) == (1 * H, "demo/us-east")
    takeover = next(d for d in decisions if d.t_us >= crash.t_us)
    assert takeover.src == "demo/eu-west"
    assert takeover.payload == {"role": "demo/leader", "epoch": 2}
    # Within one lease TTL (10 s) plus a renewal period (3 s) of the crash.
    assert takeover.t_us - crash.t_us <= 15 * S


def test_lease_story_store_fences_off_the_paused_leaders_stale_write(lease_trace) -> None:
    _, rows = lease_trace
    pause = next(r for r in rows if r.kind == "pause")
    assert pause.t_us == 5 * H
    paused = pause.dst
    assert named(pause).duration_us == 15 * S
    refused = [e for e in store_events(rows, "lease.effect") if e.result is False]
    assert refused
    stale = refused[0]
    assert 5 * H <= stale.t_us <= 5 * H + 15 * S
    assert stale.src == paused
    epoch = stale.epoch
    assert (stale.role, stale.holder) == ("demo/leader", paused)
    # A newer epoch was granted to the other candidate during the pause.
    newer = [
        r
        for r in rows
        if r.kind == "decision"
        and r.type == "lease.leader"
        and r.src != paused
        and 5 * H <= r.t_us <= stale.t_us
    ]
    assert [d.payload["epoch"] for d in newer] == [epoch + 1]


def test_lease_story_run_is_ok_with_zero_violations(lease_trace) -> None:
    meta, rows = lease_trace
    assert meta.status == "ok"
    assert meta.violations == 0
    assert not [r for r in rows if r.kind == "violation"]


def test_cli_check_of_a_mast_run_in_a_fresh_process_uses_mast_checkers(tmp_path: Path) -> None:
    # A fresh process has not loaded the plugins that register MAST's checkers:
    # `check` must load them itself (it once failed with a KeyError here).
    import subprocess
    import sys

    from tests.support.dsl import job, run, scenario, workload

    result, _ = run(scenario([workload("W", "hi", 0, job(gpus=8))], duration="20m"), tmp_path)
    code = "import sys; from emulator.cli.main import main; sys.exit(main(['check', sys.argv[1]]))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(result.out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "allocation, gang, auction" in done.stdout and "0 violation(s)" in done.stdout
