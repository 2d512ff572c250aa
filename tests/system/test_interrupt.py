"""A run that ends early still leaves a readable run database.

Whether it dies of an exception or is stopped by Ctrl-C, the database keeps
every event up to that point, ends with a `run`/`end` event and says how the
run ended; the command exits 130 on Ctrl-C, without a traceback.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator.cli import main as cli
from emulator.registry import builtin_scenarios
from emulator.run.events import named
from emulator.run.runner import execute, plan_run
from emulator.run.scenario import load_scenario_file
from emulator.units import MIN, H

LEASE_PATH = builtin_scenarios()["leader-lease"]


def mastemu() -> list[str]:
    """The installed `mastemu` script of this interpreter, else `python -m`."""
    script = Path(sys.executable).with_name("mastemu")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "emulator.cli.main"]


class Boom(RuntimeError):
    """Raised by a kernel event planted in the middle of a run."""


def test_interrupt_by_exception_keeps_the_events_up_to_it(
    tmp_path: Path, lease_trace, read_run
) -> None:
    scenario, text = load_scenario_file(LEASE_PATH)
    plan = plan_run(scenario, text, str(LEASE_PATH))
    db = tmp_path / "failed.db"

    def boom() -> None:
        raise Boom("injected at 30 min")

    with pytest.raises(Boom, match="injected at 30 min"):
        asyncio.run(execute(plan, seed=1, out=db, on_kernel=lambda k: k.at(30 * MIN, boom)))

    meta, rows = read_run(db)
    assert meta.status == "failed"
    assert meta.end_t_us == 30 * MIN
    assert meta.events == len(rows)
    assert meta.trace_hash is not None
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    *body, end = rows
    assert (end.kind, end.type, named(end).status, end.t_us) == ("run", "end", "failed", 30 * MIN)
    # Exactly the clean run's events before 30 min (the planted kernel event
    # runs first at its instant), and nothing after.
    _, clean = lease_trace
    assert body == [r for r in clean if r.t_us < 30 * MIN]
    assert max(r.t_us for r in body) > 29 * MIN


def test_interrupt_by_exception_is_reported_by_check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An offline check over a failed run reads it like any other run."""
    scenario, text = load_scenario_file(LEASE_PATH)
    plan = plan_run(scenario, text, str(LEASE_PATH))
    db = tmp_path / "failed.db"

    def boom() -> None:
        raise Boom("stop")

    with pytest.raises(Boom):
        asyncio.run(execute(plan, seed=1, out=db, on_kernel=lambda k: k.at(2 * MIN, boom)))
    assert cli.main(["check", str(db)]) == 0
    # The verdict line; what the run exercised (`sometimes:`) may follow it.
    assert "against lease-safety: 0 violation(s), 0 actor error(s)\n" in capsys.readouterr().out


@pytest.mark.parametrize(
    "mode",
    [
        # Virtual mode, flat out, on a scenario far too long to finish.
        pytest.param([], id="virtual"),
        # Scaled mode: the kernel mostly waits for wall time when Ctrl-C comes.
        pytest.param(["--speed", "20"], id="scaled"),
    ],
)
def test_interrupt_by_ctrl_c_exits_130_and_keeps_the_run(
    tmp_path: Path, read_run, hash_of, mode: list[str]
) -> None:
    long_run = tmp_path / "long-lease.toml"
    text = LEASE_PATH.read_text(encoding="utf-8")
    assert 'duration = "6h"\n' in text
    long_run.write_text(text.replace('duration = "6h"\n', 'duration = "2000h"\n', 1))
    db = tmp_path / "interrupted.db"
    proc = subprocess.Popen(
        [*mastemu(), "run", str(long_run), "--out", str(db), *mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed just before the run starts
        assert first.startswith("scenario: leader-lease")
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    out = first + rest
    assert "        status: interrupted" in out.splitlines()

    meta, rows = read_run(db)
    assert meta.status == "interrupted"
    assert meta.trace_hash == hash_of(out)
    assert 0 < meta.end_t_us < 2000 * H
    assert meta.events == len(rows) > 0
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    end = rows[-1]
    assert (end.kind, end.type, named(end).status) == ("run", "end", "interrupted")
    assert end.t_us == meta.end_t_us
    assert rows[0].kind == "run"
    assert rows[0].type == "start"


def test_ctrl_c_during_the_setup_ends_the_run_interrupted(tmp_path: Path, read_run) -> None:
    # A long setup (meta-scale's world) is where an impatient Ctrl-C lands; it once
    # left the database saying "running" and printed no summary. The setup now
    # finishes, and the run stops once the event loop reads the signal (virtual
    # time runs on meanwhile, as for a press mid-run) and ends `interrupted`.
    scenario, text = load_scenario_file(LEASE_PATH)
    plan = plan_run(scenario, text, str(LEASE_PATH))
    db = tmp_path / "setup.db"

    def press(_: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)

    result = asyncio.run(execute(plan, seed=1, out=db, handle_signals=True, on_setup=press))
    assert result.status == "interrupted"
    meta, rows = read_run(db)
    assert meta.status == "interrupted" and meta.end_t_us < 6 * H
    assert (rows[-1].kind, rows[-1].type, named(rows[-1]).status) == ("run", "end", "interrupted")
