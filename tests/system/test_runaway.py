"""A campaign's run that handles far more events than its campaign's first: a runaway.

Against a CM that refuses every plan for a while, a scheduler that decides again at
once re-sends its plan every network round trip (explore met it in dally-cm-failover:
the run, and the campaign, never ended). explore stops such a run at its event cap and
reports it as a failure of its own.
"""

from __future__ import annotations

import tomllib
from concurrent.futures import Future
from pathlib import Path

from emulator.run.explore import run_schedule
from emulator.run.failures import INTERNAL_ERROR
from emulator.run.runaway import EVENTS_FACTOR, EVENTS_FLOOR, RUNAWAY, events_cap
from emulator.run.sweep import SeedRun, in_order, run_seed
from tests.support.broken import SMALL_CLUSTER, HastyScheduler, RefusingCM, broken_cluster


def raw() -> dict[str, object]:
    kind = broken_cluster("test-hasty", scheduler=HastyScheduler, cm=RefusingCM)
    return tomllib.loads(SMALL_CLUSTER.format(kind=kind))


def test_a_run_past_its_event_cap_is_stopped_and_is_a_failure(tmp_path: Path) -> None:
    free = run_schedule(raw(), None, 1, (), tmp_path / "free.db")
    # Refused for 2 s (RefusingCM), re-sent at once: thousands of round trips.
    assert free.failure is None and free.events > 15_000
    capped = run_schedule(raw(), None, 1, (), tmp_path / "capped.db", events_max=10_000)
    assert capped.status == RUNAWAY
    assert capped.failure == (RUNAWAY, "over 10,000 events")
    # Stopped at the first check past the cap (the kernel calls it every 2,000 events).
    assert 10_000 < capped.events <= 12_000 < free.events


def test_the_cap_is_many_first_runs_and_never_small() -> None:
    assert events_cap(10) == EVENTS_FLOOR
    assert events_cap(EVENTS_FLOOR) == EVENTS_FACTOR * EVENTS_FLOOR


def test_a_sweep_fails_a_seed_past_the_cap_its_first_seed_set(tmp_path: Path) -> None:
    kind = broken_cluster("test-hasty", scheduler=HastyScheduler, cm=RefusingCM)
    scenario = tmp_path / "hasty.toml"
    scenario.write_text(SMALL_CLUSTER.format(kind=kind))
    ran = run_seed(str(scenario), 1, str(tmp_path), events_max=10_000)
    assert ran.status == INTERNAL_ERROR and ran.error is not None
    assert ran.error.startswith("runaway: over 10,000 events by ")
    # The first seed runs alone, uncapped; clean, its events set the cap of the others.
    submitted: list[tuple[int, int | None]] = []

    def submit(seed: int, cap: int | None) -> Future[SeedRun]:
        submitted.append((seed, cap))
        done: Future[SeedRun] = Future()
        done.set_result(SeedRun(seed, "ok", events=30_000))
        return done

    runs = list(in_order(submit, lambda run: run, range(1, 4), 2))
    assert [r.seed for r in runs] == [1, 2, 3]
    assert submitted == [(1, None), (2, events_cap(30_000)), (3, events_cap(30_000))]
