"""Ctrl-C stops every long command at the first press: exit 130, no traceback, no asyncio noise.

`run` has its own test (`test_interrupt.py`). Here: `resume`, `replay --step`
(waiting for Enter), `compare` and `sweep`, each sent one SIGINT while it
works. A database a command was writing stays whole (`store/verify.py`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.verify import verify_run
from tests.support.builtin import raw_builtin
from tests.support.cli import run_cli
from tests.system.test_interrupt import mastemu

# What an unclean asyncio shutdown prints.
# How long a command may take to say it is under way (a loaded machine, a cold start).
READY_S = 60
NOISE = ("Traceback", "Event loop is closed", "Task was destroyed", "was never awaited")


def _interrupt_once(
    argv: list[str], cwd: Path, ready: str, settle_s: float
) -> tuple[int, str, float]:
    """Start `mastemu ARGV`, wait for `ready` in its output, settle, send one SIGINT.

    Returns the exit code, the output and the wall seconds from the press to the
    exit. The SIGINT goes to the command's process only, as `kill -INT` sends
    it: a terminal's Ctrl-C would reach its worker processes too. The output is
    read as it comes, not by lines: a prompt waits without a newline.
    """
    proc = subprocess.Popen(
        [*mastemu(), *argv],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    seen = b""
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + READY_S
        while ready.encode() not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {ready!r} within {READY_S}s: {seen.decode(errors='replace')}"
            readable, _, _ = select.select([fd], [], [], left)
            if readable:
                chunk = os.read(fd, 65536)
                assert chunk, f"ended before {ready!r}: {seen.decode(errors='replace')}"
                seen += chunk
        time.sleep(settle_s)
        pressed = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=60)  # no second press
        except subprocess.TimeoutExpired:
            # Say what it printed before it hung: a flake must be readable from CI's log.
            proc.kill()
            rest, _ = proc.communicate()
            printed = (seen + rest).decode(errors="replace")
            raise AssertionError(f"still running 60 s after one SIGINT: {printed}") from None
        stopped_s = time.monotonic() - pressed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, (seen + rest).decode(errors="replace"), stopped_s


def _day_long_sweep(folder: Path) -> list[str]:
    """A sweep of quickstart made a day long: each seed runs for about a minute of wall time."""
    raw = raw_builtin("quickstart")
    raw["duration"] = "24h"
    (folder / "day.json").write_text(json.dumps(raw))
    return ["sweep", "day.json", "--seeds", "1-8", "--jobs", "2"]


@pytest.fixture
def short_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A quickstart run of 10 emulated minutes: something to resume and replay."""
    db = tmp_path / "q.db"
    argv = ("run", "quickstart", "--until", "10m", "--out", str(db), "--no-progress")
    assert run_cli(capsys, *argv)[0] == 0
    return db


def test_resume_stops_at_the_first_ctrl_c_and_leaves_the_run_whole(short_run: Path) -> None:
    # Scaled: 6 h at 600x is 36 s of wall time, so the run is surely still going.
    argv = ["resume", str(short_run), "--until", "6h", "--speed", "600", "--no-progress"]
    code, out, _ = _interrupt_once(argv, short_run.parent, "resuming:", 1.0)
    assert code == 130, out
    assert not any(noise in out for noise in NOISE), out
    assert "status: interrupted" in out
    verify_run(short_run)


def test_replay_step_stops_at_the_first_ctrl_c_while_waiting_for_enter(short_run: Path) -> None:
    code, out, _ = _interrupt_once(
        ["replay", str(short_run), "--step"], short_run.parent, "quit", 0.3
    )
    assert code == 130 and "interrupted" in out
    assert not any(noise in out for noise in NOISE), out


def test_compare_stops_at_the_first_ctrl_c_without_starting_the_next_run(tmp_path: Path) -> None:
    argv = ["compare", "quickstart", "--policies", "mast,federated", "--out", "cmp"]
    code, out, _ = _interrupt_once(argv, tmp_path, "compare:", 0.5)
    assert code == 130, out
    assert not any(noise in out for noise in NOISE), out
    assert "[2/2]" not in out and not (tmp_path / "cmp" / "federated.db").exists()
    verify_run(tmp_path / "cmp" / "mast.db")


def test_sweep_stops_at_the_first_ctrl_c(tmp_path: Path) -> None:
    # Each run in flight at the press had about a minute of wall time left.
    code, out, stopped_s = _interrupt_once(_day_long_sweep(tmp_path), tmp_path, "sweep:", 3.0)
    assert code == 130 and "interrupted" in out, out
    assert not any(noise in out for noise in NOISE), out
    # Its workers, which the signal did not reach, are ended rather than waited for
    # (under a second here; before, the press waited for both runs to end).
    assert stopped_s < 15, (stopped_s, out)


def test_run_stops_at_the_first_ctrl_c_while_it_builds_a_large_world(tmp_path: Path) -> None:
    # meta-day's setup (50k GPUs, a day of workloads) takes seconds before the first event.
    argv = ["run", "meta-day", "--out", "m.db", "--no-progress"]
    started = time.monotonic()
    code, out, _ = _interrupt_once(argv, tmp_path, "scenario:", 1.0)
    assert code == 130 and "interrupted" in out, out
    assert not any(noise in out for noise in NOISE), out
    assert time.monotonic() - started < READY_S


def test_the_workers_of_a_killed_sweep_end_with_it(tmp_path: Path) -> None:
    # SIGKILL leaves no time to end anything: the workers end themselves (Linux).
    if not sys.platform.startswith("linux"):
        pytest.skip("workers follow their parent's death on Linux only")
    argv = _day_long_sweep(tmp_path)
    proc = subprocess.Popen([*mastemu(), *argv], cwd=tmp_path, stdout=subprocess.DEVNULL)
    workers: list[str] = []
    try:
        deadline = time.monotonic() + READY_S
        while len(workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            found = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
            workers = found.stdout.split()
        assert len(workers) == 2, workers
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while (left := [w for w in workers if _alive(int(w))]) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:  # do not leave them running past the test
        os.kill(int(pid), signal.SIGKILL)
    assert left == [], "workers outlived their sweep"


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
