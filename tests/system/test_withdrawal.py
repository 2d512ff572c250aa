"""Owners give up on opportunistic work: a scenario's `patience`.

One region of 32 GPUs, all held by L for three hours. O (a tenant at the
lowest priority) and M (priority 5, within its quota) each want 8 of them
from 10 min on, and neither may preempt L. With an hour's patience O is
withdrawn at 70 min; M, within quota, waits and runs once L is done.
"""

from __future__ import annotations

import asyncio
import io
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from actors.checks.lost_workload import LostWorkloadChecker
from actors.common.client import RECHECK_US
from actors.mast.timeline.recording import state_at
from emulator.run.replay import check
from emulator.testing import run_scenario
from emulator.trace import TraceEvent
from emulator.units import MIN, H, S
from store.mast.queue import QUEUED
from store.mast.records import PRIORITY_LOWEST
from tests.support.dsl import crash, job, run, scenario, workload, workload_states
from tests.support.trace import decisions, store_call, store_events


def _story(patience: str | None, faults: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    raw = scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=3 * H)),
            workload("O", "op", 10 * MIN, job(gpus=8)),
            workload("M", "lo", 10 * MIN, job(gpus=8)),
        ],
        regions=("east",),
        duration="5h",
    )
    raw["system"]["tenant_list"].append(
        {"name": "op", "priority": 7, "gpu_quota": 10_000, "cpu_quota": 10_000}
    )
    if patience is not None:
        raw["system"]["patience"] = patience
    if faults:
        raw["faults"] = faults
    return raw


def _withdrawals(events: list[TraceEvent]) -> list[tuple[str, int]]:
    return [
        (e.fields["workload_id"], e.t_us)
        for e in store_events(events, "queue.transition")
        if e.result and e.fields["to_state"] == "WITHDRAWN"
    ]


def test_an_opportunistic_workload_is_withdrawn_after_its_owners_patience(
    tmp_path: Path,
) -> None:
    result, events = run(_story("1h"), tmp_path)
    assert result.violations == []
    assert _withdrawals(events) == [("O", 70 * MIN)]
    assert workload_states(result) == {"L": "DONE", "O": "WITHDRAWN", "M": "DONE"}


def test_a_withdrawal_replays_the_same_from_the_trace(tmp_path: Path) -> None:
    # The timeline's fold of the trace and `check`'s replay of the checkers see
    # the withdrawal as the store does (its end time included).
    result, _ = run(_story("1h"), tmp_path)
    folded = asyncio.run(state_at(result.out)).store_tables()["workloads"]
    with closing(sqlite3.connect(result.out)) as conn:
        conn.row_factory = sqlite3.Row
        stored = [dict(r) for r in conn.execute("SELECT * FROM workloads ORDER BY id")]
    assert folded == stored
    assert [w["finished_us"] for w in stored if w["state"] == "WITHDRAWN"] == [70 * MIN]
    assert asyncio.run(check(result.out, out=io.StringIO())) == 0


def test_without_patience_nothing_is_withdrawn(tmp_path: Path) -> None:
    result, events = run(_story(None), tmp_path)
    assert result.violations == []
    assert _withdrawals(events) == []
    assert workload_states(result)["O"] == "DONE"  # it ran once L was done


def test_a_client_restarted_after_a_deadline_withdraws_at_once(tmp_path: Path) -> None:
    # The client is down from 30 min to 2 h: O's deadline (70 min) passes meanwhile.
    result, events = run(_story("1h", [crash("client", "30m", restart_after="90m")]), tmp_path)
    assert result.violations == []
    [(wid, t_us)] = _withdrawals(events)
    assert wid == "O" and 2 * H <= t_us < 2 * H + MIN


def test_work_within_quota_at_its_deadline_is_withdrawn_once_it_falls_over_quota(
    tmp_path: Path,
) -> None:
    """Judged once, at its deadline, such work waited forever at the lowest priority.

    L holds 24 of east's 32 GPUs for three hours. W (tenant q, quota 16 GPUs)
    wants 16 from 10 min on: within quota at its deadline (70 min), so kept.
    At 75 min R, also q's, takes the 8 free GPUs: W is over quota from then
    on, and the next look withdraws it.
    """
    raw = scenario(
        [
            workload("L", "lo", 0, job(gpus=24, work=3 * H)),
            workload("W", "q", 10 * MIN, job(gpus=16)),
            workload("R", "q", 75 * MIN, job(gpus=8, work=2 * H)),
        ],
        regions=("east",),
        duration="5h",
    )
    raw["system"]["tenant_list"].append(
        {"name": "q", "priority": 5, "gpu_quota": 16, "cpu_quota": 10_000}
    )
    raw["system"]["patience"] = "1h"
    result, events = run(raw, tmp_path)
    assert result.violations == []
    ((wid, t_us),) = _withdrawals(events)
    assert wid == "W" and 75 * MIN < t_us <= 75 * MIN + RECHECK_US + MIN
    assert workload_states(result) == {"L": "DONE", "W": "WITHDRAWN", "R": "DONE"}


def test_a_withdrawal_inside_an_open_auction_wins_and_the_bid_is_released(
    tmp_path: Path,
) -> None:
    # Alone in east, O fits at once. Passes run at 10 s past each minute and its
    # auction opens at 610 s; it is submitted 10 µs after the pass at 550 s (too
    # late for it), so its deadline (a minute later) falls between that
    # auction's opening and its award 20 µs after.
    raw = scenario([workload("O", "op", 550 * S + 10, job(gpus=8))], regions=("east",))
    raw["system"]["tenant_list"].append(
        {"name": "op", "priority": 7, "gpu_quota": 10_000, "cpu_quota": 10_000}
    )
    raw["system"]["patience"] = "1m"
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert [d["workload"] for d in decisions(events, "auction.lost-cas")] == ["O"]
    assert _withdrawals(events) == [("O", 610 * S + 10)]
    assert store_events(events, "fleet.start") == []  # nothing of O ever ran
    assert workload_states(result) == {"O": "WITHDRAWN"}


@pytest.mark.parametrize("seed", [1, 2])
def test_under_chaos_only_opportunistic_work_that_never_ran_is_withdrawn_and_only_late(
    seed: int, tmp_path: Path
) -> None:
    # The built-in chaos scenario (its nemesis crashes, pauses and cuts off actors,
    # the client included) with a patience of 10 min: whatever was withdrawn was
    # at the lowest priority, never ran, and had waited at least that long.
    done = run_scenario("chaos", seed=seed, out_dir=tmp_path, overrides={"system.patience": "10m"})
    assert done.result.status == "ok" and done.result.violations == []
    with closing(sqlite3.connect(done.result.out)) as conn:
        rows = conn.execute(
            "SELECT id, priority, started_us, submitted_us, finished_us FROM workloads "
            "WHERE state = 'WITHDRAWN'"
        ).fetchall()
        held = {w for (w,) in conn.execute("SELECT DISTINCT workload_id FROM jobs")}
    assert len(rows) >= 10
    for wid, priority, started_us, submitted_us, finished_us in rows:
        assert priority == PRIORITY_LOWEST and started_us is None, wid
        assert finished_us - submitted_us >= 10 * MIN, wid
        assert wid not in held, wid  # no job of it was ever placed
    withdrawn = {w for w, _ in _withdrawals(done.trace())}
    assert withdrawn == {w for w, *_ in rows}


def test_a_withdrawn_workload_awarded_again_is_caught() -> None:
    # A queue that let an award take a withdrawn workload would run work its owner gave up.
    checker = LostWorkloadChecker()
    spec = {"id": "O", "tenant": "op", "jobs": [{"name": "trainer"}]}
    story = [
        store_call(0, "queue.submit", spec, 7, 0),
        store_call(5, "queue.transition", "O", list(QUEUED), "WITHDRAWN", 5),
        store_call(9, "queue.award", {}, 9, "O", 3, "east"),
    ]
    found = [v for e in story for v in checker.observe(e)]
    assert found == ["O awarded from state WITHDRAWN"]
