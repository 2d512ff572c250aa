"""A run database belongs to one run: a second writer is refused while the first runs.

`mastemu run quickstart --out a.db & mastemu run quickstart --out a.db`: the
second exits 2 naming the process that holds a.db, with or without --force,
and so does `resume a.db`; `report` says the run is in progress; when the
first ends, a.db holds its run whole (the hash it printed, every event).
The first run here is scaled (`--speed`) so that it is still running, for
seconds of wall time, whatever the machine's load.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from store.lock import lock_path
from store.verify import verify_run
from tests.support.cli import run_cli
from tests.system.test_interrupt import mastemu


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_second_run_into_a_database_in_use_exits_2_and_the_first_run_stays_whole(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    read_run,
    hash_of,
) -> None:
    monkeypatch.chdir(tmp_path)
    first = subprocess.Popen(
        # 30 emulated minutes at 300x: about 6 s of wall time.
        [*mastemu(), "run", "quickstart", "--out", "a.db", "--until", "30m", "--speed", "300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        _wait_for(lambda: lock_path(Path("a.db")).exists() and Path("a.db").exists())
        holder = f"in use by process {first.pid} (mastemu run quickstart --out a.db"
        for argv in (
            ("run", "quickstart", "--out", "a.db", "--no-progress"),
            ("run", "quickstart", "--out", "a.db", "--force", "--no-progress"),
            ("resume", "a.db", "--no-progress"),
        ):
            code, _, err = run_cli(capsys, *argv)
            assert code == 2 and holder in err, (argv, err)
        code, out, _ = run_cli(capsys, "report", "a.db", "--json")
        assert code == 0 and json.loads(out)["status"].startswith(f"running (process {first.pid}")
        stdout, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, stderr
    verify_run(Path("a.db"))
    meta, rows = read_run(Path("a.db"))
    assert (meta.status, meta.end_t_us) == ("ok", 30 * 60 * 1_000_000)
    assert meta.trace_hash == hash_of(stdout)
    assert meta.events == len(rows)
    assert not lock_path(Path("a.db")).exists()  # the holder removed it when done
    # Now nobody holds it: an existing run is still replaced only with --force.
    code, _, err = run_cli(capsys, "run", "quickstart", "--out", "a.db", "--until", "1m")
    assert code == 2 and "a run database exists (a run of quickstart, seed 1, ok)" in err
    assert read_run(Path("a.db"))[0].trace_hash == meta.trace_hash


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../../escaped", "name"),
        ("a/b", "name"),
        ("..", "name"),
    ],
)
def test_a_scenario_name_cannot_write_outside_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    path = work / "s.toml"
    path.write_text(f'name = "{name}"\nduration = "1m"\n')
    code, _, err = run_cli(capsys, "run", str(path), "--no-progress")
    assert code == 2 and f"{path}: {message}: " in err, err
    assert [p.name for p in tmp_path.rglob("*.db")] == []


def test_run_out_into_a_missing_folder_or_a_device_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(
        capsys, "run", "leader-lease", "--until", "1m", "--out", str(tmp_path / "no" / "a.db")
    )
    assert code == 2 and "does not exist; create it first" in err
    assert not (tmp_path / "no").exists()
    code, _, err = run_cli(capsys, "run", "leader-lease", "--until", "1m", "--out", "/dev/null")
    assert code == 2 and "/dev/null" in err
