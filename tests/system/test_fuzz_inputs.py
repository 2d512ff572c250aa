"""Fuzz: every built-in scenario mutated, every command on damaged run databases.

A mutated scenario (`tests/support/mutate.py`: keys removed, renamed or
added, values of the wrong type, zero, negative or huge, structures
wrapped or nested 500 deep, the text given a BOM, made an array or cut
short) must either be refused, exit 2 with `error: FILE: …` and no
traceback, or run cleanly (exit 0, or 3 when cut short) to one emulated
minute within a wall-clock bound. A damaged run database (cut short, a
page overwritten or zeroed, its WAL deleted) must be refused the same way
by every command that reads or continues a run (report, check, replay,
export, resume), or be read cleanly if the damage left it whole.

Counts: the default run mutates each built-in scenario `MUTANTS` times and
damages `DAMAGED` databases; the `slow` variants do 50 per scenario (1,000
for the 20 built-ins) and 100. The default run's cases are seeded (the
same cases every time, different for each scenario); the slow run explores.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import signal
import time
import tomllib
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from emulator.cli import main as cli
from emulator.errors import InputError
from emulator.registry import builtin_scenarios, load_plugins
from emulator.run.runner import plan_run
from emulator.run.scenario import resolve_scenario
from store import StoreError
from store.verify import verify_run
from tests.support.cli import run_cli
from tests.support.mutate import damage, damage_plan, mutated_scenario
from tests.system.test_resume import copy_db, kill_in_child, one_hour

MUTANTS = 5
MUTANTS_SLOW = 50
DAMAGED = 20
DAMAGED_SLOW = 100
# Wall-clock bound of one command on one mutated scenario: far above a clean
# run to one emulated minute (under a second; ~20 s for the meta-* worlds).
BOUND_S = 90
# Worlds whose setup alone takes seconds: the default run plans their mutants
# (all of the validation) without running them; the slow run runs them too.
HEAVY = frozenset({"meta-day", "meta-scale", "meta-week", "meta-chaos"})
NOISE = ("Traceback", "Event loop is closed", "Task was destroyed", "was never awaited")
SCENARIOS = sorted(builtin_scenarios())

load_plugins()


class Hang(KeyboardInterrupt):
    """The wall-clock bound passed (a KeyboardInterrupt, so asyncio lets it out at once)."""


@contextlib.contextmanager
def bounded(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise Hang

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def _fixed(name: str, explore: bool) -> Callable[[Any], Any]:
    """The default run's cases are fixed, seeded by `name` (so each scenario gets cases of
    its own, not hypothesis' simplest ones first everywhere); the slow run explores."""
    return (lambda test: test) if explore else seed(zlib.crc32(name.encode()))


def _raw(name: str) -> dict[str, Any]:
    return tomllib.loads(builtin_scenarios()[name].read_text(encoding="utf-8"))


def _check_mutant(
    name: str, what: str, text: str, folder: Path, capsys: pytest.CaptureFixture[str], run: bool
) -> int:
    """One mutant: refused with its file named, or a clean run; returns the exit code."""
    path = folder / "mutant.json"
    path.write_text(text, encoding="utf-8")
    started = time.monotonic()
    if not run:
        # Everything `run` checks before it builds the world, in process.
        try:
            scenario, raw_text, source = resolve_scenario(str(path))
            plan_run(scenario, raw_text, source)
        except InputError as error:
            assert error.source == str(path), (name, what, str(error))
            return 2
        return 0
    argv = ["run", str(path), "--until", "1m", "--out", str(folder / "m.db"), "--force"]
    with bounded(BOUND_S):
        code, out, err = run_cli(capsys, *argv, "--no-progress")
    elapsed = time.monotonic() - started
    assert code != 130, f"{name}: {what}: no answer within {BOUND_S}s"
    assert not any(noise in err for noise in NOISE), (name, what, err)
    if code == 2:
        assert err.startswith(f"error: {path}"), (name, what, err)
    else:
        assert code in (0, 3), (name, what, code, out[-2000:], err[-2000:])
    assert elapsed < BOUND_S
    return code


def _fuzz_scenario(
    name: str, examples: int, explore: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _raw(name)
    run = explore or name not in HEAVY
    codes: list[int] = []

    @_fixed(name, explore)
    @_settings(examples)
    @given(st.data())
    def mutant(data: st.DataObject) -> None:
        what, text = data.draw(mutated_scenario(raw), label="mutation")
        codes.append(_check_mutant(name, what, text, tmp_path, capsys, run))

    mutant()
    assert len(codes) == examples  # every case was checked (none filtered away)


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_mutated_builtin_scenario_is_refused_with_its_file_named_or_runs_cleanly(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fuzz_scenario(name, MUTANTS, False, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENARIOS)
def test_a_thousand_mutated_scenarios_are_refused_or_run_cleanly(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fuzz_scenario(name, MUTANTS_SLOW, True, tmp_path, capsys)


# ---- damaged run databases ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def whole_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two undamaged runs: one that finished at 20 emulated minutes, one killed there (a WAL)."""
    folder = tmp_path_factory.mktemp("whole")
    scenario = one_hour(folder)
    finished = folder / "finished.db"
    code = run_cli_plain("run", str(scenario), "--until", "20m", "--out", str(finished))
    assert code == 0
    killed = folder / "killed.db"
    kill_in_child(["run", str(scenario), "--out", str(killed)], "20m")
    assert Path(f"{killed}-wal").exists()
    return {"finished": finished, "killed": killed}


def run_cli_plain(*argv: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return cli.main([*argv, "--no-progress"])


def _commands(db: Path, folder: Path) -> list[list[str]]:
    # resume last: it is the one command that writes.
    return [
        ["report", str(db), "--json"],
        ["check", str(db), "--json"],
        ["replay", str(db), "--grep", "no event has this text"],
        ["export", str(db), "--out", str(folder / "trace.jsonl")],
        ["resume", str(db), "--no-progress"],
    ]


def _fuzz_damage(
    examples: int,
    explore: bool,
    whole_runs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    refused = 0
    checked = 0

    @_fixed("damaged", explore)
    @_settings(examples)
    @given(st.data())
    def damaged(data: st.DataObject) -> None:
        nonlocal refused, checked
        source = data.draw(st.sampled_from(sorted(whole_runs)), label="run")
        db = tmp_path / "damaged.db"
        for suffix in ("", "-wal", "-shm", "-lock"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        copy_db(whole_runs[source], db)
        plan = data.draw(damage_plan(db.stat().st_size), label="damage")
        what = damage(db, plan)
        try:
            verify_run(db)
            whole = True
        except StoreError:
            whole = False
        for argv in _commands(db, tmp_path):
            with bounded(BOUND_S):
                code, _, err = run_cli(capsys, *argv)
            assert code != 130, (source, what, argv, "no answer")
            assert not any(noise in err for noise in NOISE), (source, what, argv, err)
            if code == 2:
                assert err.startswith(f"error: {db}"), (source, what, argv, err)
            else:
                # Read (or continued) only if the damage left the run whole.
                assert whole and code in (0, 1, 3), (source, what, argv, code, err)
            refused += code == 2
        checked += 1

    damaged()
    assert checked == examples
    assert refused > 0  # the damage was seen at least somewhere


def test_damaged_run_databases_are_refused_cleanly_by_every_command(
    whole_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fuzz_damage(DAMAGED, False, whole_runs, tmp_path, capsys)


@pytest.mark.slow
def test_a_hundred_damaged_run_databases_are_refused_cleanly(
    whole_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fuzz_damage(DAMAGED_SLOW, True, whole_runs, tmp_path, capsys)


def test_the_damages_are_seen(
    whole_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each kind of damage at a place that matters is refused by every command, saying why."""
    cases = [
        ("finished", ("truncate", 8192, 0), "damaged"),
        ("finished", ("overwrite-page", 0, 7), "not an SQLite database"),
        ("finished", ("zero-page", 3, 0), "damaged"),
    ]
    for source, plan, message in cases:
        db = tmp_path / f"{source}-{plan[0]}-{plan[1]}.db"
        copy_db(whole_runs[source], db)
        damage(db, plan)
        for argv in _commands(db, tmp_path):
            code, _, err = run_cli(capsys, *argv)
            assert code == 2 and err.startswith(f"error: {db}: ") and message in err, (
                plan,
                argv,
                err,
            )


def test_a_killed_run_whose_wal_is_deleted_is_read_as_what_its_file_holds(
    whole_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without its WAL a killed run loses the commits the WAL held: the file alone is an
    earlier state, whole or not a run at all, and every command says which."""
    db = tmp_path / "nowal.db"
    shutil.copyfile(whole_runs["killed"], db)
    codes = [run_cli(capsys, *argv)[0] for argv in _commands(db, tmp_path)]
    assert set(codes) <= {0, 1, 2, 3}
