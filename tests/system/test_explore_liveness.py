"""explore: a stalled run, an actor dying on its own exception, or an exception of the
emulator itself fails as a violation does."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.registry import builtin_scenarios, load_plugins
from emulator.run import watched
from tests.support.broken import (
    STALLING,
    IdleAfterTimeoutScheduler,
    RaisingRMS,
    broken_cluster,
    broken_system,
)
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


def test_an_actor_that_dies_on_its_own_exception_is_a_failure(tmp_path: Path) -> None:
    kind = broken_system("test-explore-raising", rms=RaisingRMS)
    text = builtin_scenarios()["quickstart"].read_text()
    path = tmp_path / "raising.toml"
    path.write_text(text.replace('kind = "mast"', f'kind = "{kind}"', 1).replace('"6h"', '"20m"'))
    out = search(path, tmp_path / "ex", seed=1, runs=2, first=True)
    (failure,) = out.failures
    assert failure.signature == ("actor-error", "RuntimeError in rms")
    assert failure.run == 1 and Path(failure.scenario).is_file()


def test_an_exception_out_of_the_emulator_is_kept_without_a_reproducer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bug of the emulator's own (here: every run raises before it starts) is the
    # run's failure, kept once with its schedule; there is no finished run to
    # shrink, and the search must not die trying.
    async def broken_execute(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the emulator broke")

    monkeypatch.setattr(watched, "execute", broken_execute)
    text = builtin_scenarios()["quickstart"].read_text().replace('"6h"', '"20m"')
    path = tmp_path / "quick.toml"
    path.write_text(text)
    out = search(path, tmp_path / "ex", seed=1, runs=2)
    (failure,) = out.failures
    assert failure.signature == ("internal-error", "RuntimeError")
    assert failure.run == 1 and Path(failure.scenario).is_file() and failure.minimal is None
