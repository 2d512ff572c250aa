"""A crash is a failure: an actor that dies on an exception of its own fails the run.

An injected fault (a crash, a pause) is part of the scenario; an exception
raised by an actor's own code is a bug (docs/design.md §11). The run's status
becomes `error`, `run` exits 1 naming the first such crash with its trace
position and the command that reproduces it, `check` fails on it offline,
`sweep` counts the seed as an internal error, and only a scenario that lists
the exception type under `[invariants] tolerate_errors` may pass over it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from emulator.actor import Actor, on
from emulator.registry import load_plugins, register_actor
from emulator.run.replay import check
from emulator.run.runner import execute, plan_run
from emulator.run.scenario import convert_scenario
from emulator.units import S
from tests.support.cli import run_cli

load_plugins()


class _Tick(msgspec.Struct, frozen=True, tag=True):
    n: int


class TickerParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    fail_at_tick: int = 3


class FailingTicker(Actor):
    """Ticks every second and raises on its `fail_at_tick`-th tick: a bug of its own."""

    kind = "test-failing-ticker"
    Params = TickerParams

    async def on_start(self) -> None:
        self.set_timer(S, _Tick(1))

    @on(_Tick)
    def tick(self, msg: _Tick) -> None:
        if msg.n == self.params.fail_at_tick:
            raise ZeroDivisionError(f"tick {msg.n} divided by nothing")
        self.set_timer(S, _Tick(msg.n + 1))


register_actor(FailingTicker)


def scenario(tolerate: list[str] | None = None, fail_at_tick: int = 3) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "failing-ticker",
        "duration": "1m",
        "seed": 1,
        "world": {"regions": [{"name": "r", "machines": 0, "racks": 1, "fault_domains": 1}]},
        "actors": [
            {
                "kind": FailingTicker.kind,
                "address": "ticker/0",
                "host": "r/ctl0",
                "params": {"fail_at_tick": fail_at_tick},
            }
        ],
    }
    if tolerate is not None:
        raw["invariants"] = {"tolerate_errors": tolerate}
    return raw


def write(tmp_path: Path, raw: dict[str, Any], name: str = "ticker.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def test_an_actor_raising_in_a_handler_ends_the_run_in_error_with_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, scenario())
    code, out, _ = run_cli(capsys, "run", str(path), "--out", str(tmp_path / "t.db"))
    assert code == 1
    assert "status: error" in out
    first = next(line for line in out.splitlines() if line.startswith("ACTOR ERROR"))
    # The first crash: its trace position and time, the actor, the exception and its message.
    assert first.startswith("ACTOR ERROR at #")
    assert "(3.000s): ticker/0 died on ZeroDivisionError: tick 3 divided by nothing" in first
    assert f"reproduce: mastemu run {path} --seed 1" in out


def test_the_run_result_and_the_database_say_error(tmp_path: Path) -> None:
    raw = scenario()
    plan = plan_run(convert_scenario(raw, "t"), json.dumps(raw), "t")
    result = asyncio.run(execute(plan, seed=1, out=tmp_path / "t.db"))
    assert result.status == "error" and result.failed and not result.violations
    # The actor restarts after each crash and fails again on its third tick.
    assert [e.t_us for e in result.actor_errors][:2] == [3 * S, 7 * S]
    assert {(e.address, e.error) for e in result.actor_errors} == {
        ("ticker/0", "ZeroDivisionError")
    }
    out = []
    code = asyncio.run(check(result.out, out=_Lines(out)))
    text = "".join(out)
    assert code == 1 and "ACTOR ERROR at #" in text and "ZeroDivisionError" in text
    assert f"{len(result.actor_errors)} actor error(s)" in text


def test_a_scenario_may_tolerate_a_named_exception_and_still_sees_it_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, scenario(tolerate=["ZeroDivisionError"]))
    code, out, _ = run_cli(capsys, "run", str(path), "--out", str(tmp_path / "t.db"))
    assert code == 0 and "status: ok" in out
    assert "actor error (tolerated) at #" in out
    # Tolerating another exception type tolerates nothing of this one.
    other = write(tmp_path, scenario(tolerate=["KeyError"]), "other.json")
    code, out, _ = run_cli(capsys, "run", str(other), "--out", str(tmp_path / "o.db"))
    assert code == 1 and "status: error" in out


def test_a_clean_actor_is_not_an_error(tmp_path: Path) -> None:
    raw = scenario(fail_at_tick=10_000)  # never reached in a minute
    plan = plan_run(convert_scenario(raw, "t"), json.dumps(raw), "t")
    result = asyncio.run(execute(plan, seed=1, out=tmp_path / "t.db"))
    assert (result.status, result.actor_errors) == ("ok", [])


def test_sweep_counts_a_seed_whose_actor_errored_as_an_internal_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, scenario())
    code, out, _ = run_cli(
        capsys, "sweep", str(path), "--seeds", "1-2", "--jobs", "1",
        "--keep-dir", str(tmp_path / "kept"), "--json",
    )  # fmt: skip
    report = json.loads(out)
    assert code == 1
    assert [r["status"] for r in report["runs"]] == ["internal-error", "internal-error"]
    failure = report["failures"][0]
    assert (failure["seed"], failure["invariant"]) == (1, "internal-error")
    assert "ticker/0: ZeroDivisionError: tick 3 divided by nothing" in failure["message"]
    assert failure["command"] == f"mastemu run {path} --seed 1"


class _Lines:
    """A text sink that keeps what is written (for `check`'s `out`)."""

    def __init__(self, into: list[str]) -> None:
        self.into = into

    def write(self, text: str) -> int:
        self.into.append(text)
        return len(text)
