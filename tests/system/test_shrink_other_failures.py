"""shrink: a run that failed without a violation is cut down as a violating one is.

Two deliberately broken components fail a run no invariant flags: a cluster
scheduler that forgets a job whose agent missed its offer (the work stalls:
`liveness`), and an RMS that raises at every scan start (`actor-error`).
Each run carries faults beside the point; shrinking must remove them and
keep the one that matters, and the reproducer must fail the same way.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from emulator.registry import builtin_scenarios, load_plugins
from emulator.run.shrink import run_text
from tests.support.broken import (
    STALLING,
    IdleAfterTimeoutScheduler,
    RaisingRMS,
    broken_cluster,
    broken_system,
)
from tests.support.cli import run_cli
from tests.support.explore import search

load_plugins()

# Two more pauses of the job's agent, long after the one across its first offer:
# by then the job either ran (no live agent: the fault is skipped) or is stuck.
NOISE = """
[[faults]]
at = "1h"
action = "pause"
target = "a live cluster-job-agent"
duration = "30s"

[[faults]]
at = "90m"
action = "pause"
target = "a live cluster-job-agent"
duration = "10s"
"""


def test_a_stalled_run_keeps_only_the_pause_across_the_offer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kind = broken_cluster("test-shrink-idle", scheduler=IdleAfterTimeoutScheduler)
    path = tmp_path / "idle.toml"
    path.write_text(STALLING.format(kind=kind) + NOISE)
    db = tmp_path / "idle.db"
    code, out, _ = run_cli(capsys, "run", str(path), "--out", str(db))
    # No violation, no actor error: the job left unfinished cuts the run short (3).
    assert code == 3 and "liveness: 1 workload(s) stuck" in out

    minimal = tmp_path / "idle.min.toml"
    code, out, _ = run_cli(capsys, "shrink", str(db), "--out", str(minimal))
    assert code == 0, out
    assert "fails with liveness (stuck PENDING)" in out
    assert "faults: 3 before, 1 after" in out
    written = tomllib.loads(minimal.read_text())
    assert [(f["at"], f["duration"]) for f in written["faults"]] == [("0s", "30s")]
    assert run_text(minimal.read_text(), str(minimal), 1, tmp_path) == {"liveness": "stuck PENDING"}

    # The real scheduler decides again when an offer times out: nothing failed.
    path.write_text(STALLING.format(kind="cluster") + NOISE)
    run_cli(capsys, "run", str(path), "--out", str(tmp_path / "ok.db"))
    code, out, _ = run_cli(capsys, "shrink", str(tmp_path / "ok.db"))
    assert code == 1 and "failed no other way: nothing to shrink" in out


def test_an_actor_error_is_shrunk_to_no_fault_and_named_as_the_failure(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kind = broken_system("test-shrink-raising", rms=RaisingRMS)
    text = builtin_scenarios()["quickstart"].read_text()
    text = text.replace('kind = "mast"', f'kind = "{kind}"', 1).replace('"6h"', '"20m"')
    text += """
[[faults]]
at = "1m"
action = "pause"
target = "leader of gms"
duration = "5s"
"""
    path = tmp_path / "raising.toml"
    path.write_text(text)
    db = tmp_path / "raising.db"
    code, _, _ = run_cli(capsys, "run", str(path), "--out", str(db))
    assert code == 1

    # Asking for a failure the run did not have names the ones it had.
    code, _, err = run_cli(capsys, "shrink", str(db), "--invariant", "liveness")
    assert code == 2 and "actor-error" in err

    minimal = tmp_path / "raising.min.toml"
    code, out, _ = run_cli(capsys, "shrink", str(db), "--out", str(minimal))
    assert code == 0, out
    assert "fails with actor-error (RuntimeError in rms)" in out
    assert tomllib.loads(minimal.read_text()).get("faults", []) == []
    code, out, _ = run_cli(capsys, "run", str(minimal), "--out", str(tmp_path / "again.db"))
    assert code == 1 and "RuntimeError" in out


def test_explore_writes_a_minimal_reproducer_of_a_stalled_run(tmp_path: Path) -> None:
    kind = broken_cluster("test-shrink-explore-idle", scheduler=IdleAfterTimeoutScheduler)
    path = tmp_path / "idle.toml"
    path.write_text(STALLING.format(kind=kind) + NOISE)
    (failure,) = search(path, tmp_path / "ex", seed=1, runs=1, first=True).failures
    assert failure.signature == ("liveness", "stuck PENDING")
    assert failure.minimal is not None
    written = tomllib.loads(Path(failure.minimal).read_text())
    assert [f["at"] for f in written["faults"]] == ["0s"]
