"""`mastemu replay RUN.db --step` in the terminal (issue 18, item 3).

replay: keys for the next event, decision, fault and violation and to quit;
a status line with leaders, queue and GPUs under each stop; every line fits
100 columns; the end of input stops.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from emulator.run.stepper import PROMPT
from emulator.testing import run_scenario
from tests.support.cli import run_cli


@pytest.fixture(scope="module")
def gms_failover(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_scenario("gms-failover", out_dir=tmp_path_factory.mktemp("step")).db


def step(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, db: Path, keys: str):
    monkeypatch.setattr("sys.stdin", io.StringIO(keys))
    code, out, _ = run_cli(capsys, "replay", str(db), "--step")
    assert code == 0
    assert all(len(line) <= 100 for line in out.splitlines()), out
    # What each stop showed: the event's line, then (if any) the status line.
    stops = [chunk.strip("\n").splitlines() for chunk in out.split(PROMPT)[:-1]]
    return out, stops


def test_replay_step_keys_go_to_the_next_fault_and_decision_and_q_quits(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, gms_failover: Path
) -> None:
    _, stops = step(capsys, monkeypatch, gms_failover, "f\nf\nf\nd\nq\nn\n")
    assert len(stops) == 5  # q stopped it: the last Enter was never read
    crash, status = stops[1]
    assert "crash.start" in crash and "46m10.100s" in crash
    # The GMS leader has just died: its lease has not run out yet.
    assert "gms gms/0@1" in status and "rms 3/3 led" in status and "GPUs " in status
    assert "crash" in stops[2][0] and "gms/0" in stops[2][0]
    restart, status = stops[3]
    assert "restart" in restart
    assert "gms gms/1@2" in status  # the follower took the lease meanwhile
    assert " decision " in stops[4][0]


def test_replay_step_without_violations_goes_to_the_end_and_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, gms_failover: Path
) -> None:
    out, stops = step(capsys, monkeypatch, gms_failover, "v\n")
    assert len(stops) == 1
    assert out.endswith("(end of the run)\n")


def test_replay_step_answers_an_unknown_key_with_the_keys(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, gms_failover: Path
) -> None:
    out, _ = step(capsys, monkeypatch, gms_failover, "x\n\n")
    assert "(unknown key 'x')" in out
