"""`resume` resumes what was asked: the run's own --until, an extension, and never a damaged run.

The runs are `quickstart` cut to one emulated hour (`test_resume.one_hour`).
A run started with `--until 20m` and killed at 10 minutes resumes to 20
minutes, not to the scenario's hour; a finished `--until 10m` run is left
alone by `resume` and extended by `resume --until 30m`. A database whose
trace was changed behind SQLite's back (its pages still whole) is refused,
saying what is wrong: a chunk whose bytes do not match the digest chain, a
chunk missing from the sequence.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from emulator.units import MIN
from store.verify import verify_run
from tests.support.cli import run_cli
from tests.system.test_resume import kill_in_child, one_hour, read


def test_a_killed_run_resumes_to_the_until_it_was_started_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "k.db"
    kill_in_child(["run", str(one_hour(tmp_path)), "--until", "20m", "--out", str(db)], "10m")
    code, out, err = run_cli(capsys, "resume", str(db), "--no-progress")
    assert code == 0, err
    assert "to 20m00.000s" in out
    meta = read(db)[0]
    assert (meta.status, meta.end_t_us, meta.until_us) == ("ok", 20 * MIN, 20 * MIN)


def test_a_finished_run_is_extended_by_resume_until(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "f.db"
    argv = ("run", str(one_hour(tmp_path)), "--until", "10m", "--out", str(db), "--no-progress")
    assert run_cli(capsys, *argv)[0] == 0
    # Without --until: nothing to do, and it says how to extend it.
    code, out, _ = run_cli(capsys, "resume", str(db), "--no-progress")
    assert code == 0 and "already finished" in out and "resume --until T" in out
    # Earlier than its end: nothing to do either.
    code, out, _ = run_cli(capsys, "resume", str(db), "--until", "5m", "--no-progress")
    assert code == 0 and "already finished" in out
    code, out, err = run_cli(capsys, "resume", str(db), "--until", "30m", "--no-progress")
    assert code == 0, err
    meta, _, rows = read(db)
    assert (meta.status, meta.end_t_us) == ("ok", 30 * MIN)
    assert max(r.t_us for r in rows) == 30 * MIN
    verify_run(db)
    assert run_cli(capsys, "check", str(db))[0] == 0


@pytest.fixture
def finished(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    db = tmp_path / "whole.db"
    argv = ("run", str(one_hour(tmp_path)), "--until", "10m", "--out", str(db), "--no-progress")
    assert run_cli(capsys, *argv)[0] == 0
    return db


def _edit(db: Path, sql: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql)
    conn.close()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            # One byte of the second chunk's events changed, the page still whole.
            "UPDATE trace_chunks SET events = CAST(substr(events, 1, 20) || x'00' || "
            "substr(events, 22) AS BLOB) WHERE first_seq = (SELECT min(first_seq) "
            "FROM trace_chunks WHERE first_seq > 1)",
            "do not match its digest",
        ),
        (
            "DELETE FROM trace_chunks WHERE first_seq = (SELECT min(first_seq) FROM trace_chunks "
            "WHERE first_seq > 1)",
            "the trace has a gap or an overlap",
        ),
        ("DELETE FROM run_meta", "no run metadata"),
    ],
    ids=["changed-chunk", "missing-chunk", "no-meta"],
)
def test_a_run_changed_behind_sqlites_back_is_refused_by_every_command(
    finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: str, message: str
) -> None:
    _edit(finished, sql)
    for argv in (
        ["resume", str(finished), "--until", "30m", "--no-progress"],
        ["report", str(finished)],
        ["check", str(finished)],
        ["replay", str(finished)],
        ["export", str(finished), "--out", str(tmp_path / "t.jsonl")],
    ):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2 and err.startswith(f"error: {finished}: ") and message in err, (argv, err)
