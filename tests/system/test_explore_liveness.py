"""explore: a run whose work never runs after the final heal is a failure, as a violation is."""

from __future__ import annotations

from pathlib import Path

from emulator.registry import load_plugins
from tests.support.broken import STALLING, IdleAfterTimeoutScheduler, broken_cluster
from tests.support.explore import search

load_plugins()


def test_a_stalled_run_is_a_failure_written_once(tmp_path: Path) -> None:
    kind = broken_cluster("test-explore-idle", scheduler=IdleAfterTimeoutScheduler)
    path = tmp_path / "idle.toml"
    path.write_text(STALLING.format(kind=kind))
    out = search(path, tmp_path / "ex", seed=1, runs=3, first=True)
    (failure,) = out.failures
    assert failure.signature == ("liveness", "stuck PENDING")
    assert failure.run == 1  # the scenario's own schedule stalls already
    assert Path(failure.scenario).is_file()
    # The real scheduler: the same search finds nothing.
    path.write_text(STALLING.format(kind="cluster"))
    assert search(path, tmp_path / "ok", seed=1, runs=3).failures == []
