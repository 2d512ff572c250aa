"""compare: `--out DIR` holds everything it writes, names are checked before any run, progress.

A user comparing policies runs `mastemu compare` again and again; an earlier
comparison's databases must never be replaced silently, a typo in the last
policy name must not cost the runs before it, and a long comparison says
how far it got.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from tests.support.cli import run_cli

# Six one-to-four-GPU jobs on one 4-GPU machine: each run takes well under a second.
SCENARIO = {
    "name": "tiny",
    "duration": "4h",
    "seed": 3,
    "system": {
        "kind": "cluster",
        "policy": "fifo",
        "machines": 1,
        "gpus_per_machine": 4,
        "machines_per_rack": 1,
        "workload": {
            "generator": "philly",
            "philly": {
                "arrivals": {"rate_per_s": 1 / 60, "num_jobs": 6},
                "gpu_counts": [1, 2, 4],
                "gpu_weights": [1, 1, 1],
            },
        },
    },
}


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding only the scenario file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.json").write_text(msgspec.json.encode(SCENARIO).decode())
    return tmp_path


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_compare_out_writes_only_under_its_folder(
    cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "compare", "tiny.json", "--policies", "fifo,srtf", "--out", "cmp", "--json"
    )
    assert code == 0, err
    assert _files(cwd) == {"tiny.json", "cmp/fifo.db", "cmp/srtf.db"}
    assert [r["policy"] for r in json.loads(out)["runs"]] == ["fifo", "srtf"]
    # One line per finished run, in order, naming its database.
    progress = [line for line in err.splitlines() if line.startswith("[")]
    assert len(progress) == 2
    assert progress[0].startswith("[1/2] fifo: ok") and "cmp/fifo.db" in progress[0]
    assert progress[1].startswith("[2/2] srtf: ok") and "cmp/srtf.db" in progress[1]


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        # Unknown last: fifo and srtf would have run first.
        ("fifo,srtf,tiresias-lass", "(policy tiresias-lass): system.policy: unknown cluster"),
        ("nosuch,fifo", "(policy nosuch): system.policy: unknown cluster policy 'nosuch'"),
        ("fifo,srtf,fifo", "--policies: names fifo more than once"),
        (",", "--policies: name at least one policy"),
    ],
)
def test_a_bad_policy_list_exits_2_before_any_run(
    cwd: Path, capsys: pytest.CaptureFixture[str], policies: str, message: str
) -> None:
    code, _, err = run_cli(capsys, "compare", "tiny.json", "--policies", policies)
    assert code == 2 and message in err
    assert "trace-hash" not in err
    assert _files(cwd) == {"tiny.json"} and not (cwd / "runs").exists()


def test_the_default_folder_is_new_for_every_compare(
    cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(capsys, "compare", "tiny.json", "--policies", "fifo")[0] == 0
    first = cwd / "runs" / "compare-tiny-3" / "fifo.db"
    before = first.read_bytes()
    code, _, err = run_cli(capsys, "compare", "tiny.json", "--policies", "fifo", "--seed", "3")
    assert code == 0 and "runs/compare-tiny-3-2" in err
    assert first.read_bytes() == before
    assert _files(cwd) == {
        "tiny.json",
        "runs/compare-tiny-3/fifo.db",
        "runs/compare-tiny-3-2/fifo.db",
    }


def test_a_non_empty_out_folder_needs_force_and_keeps_what_is_not_ours(
    cwd: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (cwd / "cmp").mkdir()
    (cwd / "cmp" / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "compare", "tiny.json", "--policies", "fifo", "--out", "cmp")
    assert code == 2 and "cmp: is not empty" in err and "--force" in err
    assert _files(cwd) == {"tiny.json", "cmp/notes.txt"}
    for _ in range(2):  # the second time replaces the first run's database
        code, _, err = run_cli(
            capsys, "compare", "tiny.json", "--policies", "fifo", "--out", "cmp", "--force"
        )
        assert code == 0, err
    assert _files(cwd) == {"tiny.json", "cmp/notes.txt", "cmp/fifo.db"}
    assert (cwd / "cmp" / "notes.txt").read_text() == "mine"


def test_out_must_be_a_folder(cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (cwd / "file").write_text("x")
    code, _, err = run_cli(capsys, "compare", "tiny.json", "--policies", "fifo", "--out", "file")
    assert code == 2 and "file: exists and is not a folder" in err
    code, _, err = run_cli(
        capsys, "compare", "tiny.json", "--policies", "fifo", "--out", "no/such/dir"
    )
    assert code == 2 and "does not exist" in err
    assert _files(cwd) == {"tiny.json", "file"}
