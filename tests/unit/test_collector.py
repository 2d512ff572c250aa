"""A run's collector thresholds hold while it runs and are put back after."""

from __future__ import annotations

import gc

import pytest

from emulator.run.collector import OLD, YOUNG, run_collector


def test_thresholds_while_running_and_restored_after() -> None:
    before = gc.get_threshold()
    with run_collector():
        assert gc.get_threshold()[0] == YOUNG and gc.get_threshold()[2] == OLD
    assert gc.get_threshold() == before


def test_restored_when_the_run_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), run_collector():
        raise RuntimeError("an actor's bug")
    assert gc.get_threshold() == before
