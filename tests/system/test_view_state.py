"""The state at any instant, folded from the trace (issue 18, item 2).

timeline: every built-in scenario folded to its end gives exactly the
store's tables; folded to an instant T it gives the tables of the same run
stopped at T; the player's recording replays to the same leaders.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from actors.mast.timeline.recording import record, state_at
from actors.mast.timeline.state import STORE_KEYS
from emulator.registry import VIEWERS, builtin_scenarios, load_plugins
from emulator.testing import run_scenario
from emulator.units import MIN as M
from emulator.units import US_PER_S

load_plugins()

# The meta-* scenarios take minutes; every other one is folded.
SCENARIOS = sorted(n for n in builtin_scenarios() if not n.startswith("meta-"))
# Long enough for every failover scenario's fault (gms-failover's crash is at
# 46m10s), short enough to keep the whole table at a few seconds a scenario.
UNTIL_US = 90 * M
# Shockwave's solver rounds make its minutes the dearest (9.6 s of CPU to 90
# min, 1.5 s to 30); it has no fault to wait for.
UNTIL_OF = {"shockwave-fairness": 30 * M}


def store_tables(db: Path) -> dict[str, list[dict[str, Any]]]:
    """The run database's tables as `SELECT *` gives them, by primary key."""
    out: dict[str, list[dict[str, Any]]] = {}
    with closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        for table, cols in STORE_KEYS.items():
            rows = conn.execute(f"SELECT * FROM {table} ORDER BY {', '.join(cols)}")
            out[table] = [dict(r) for r in rows]
    return out


@pytest.mark.parametrize("name", SCENARIOS)
def test_timeline_folds_every_builtin_scenario_to_the_store_s_final_tables(
    name: str, tmp_path: Path
) -> None:
    run = run_scenario(name, until=UNTIL_OF.get(name, UNTIL_US), out_dir=tmp_path)
    state = asyncio.run(state_at(run.db))
    folded = state.store_tables()
    expected = store_tables(run.db)
    for table in STORE_KEYS:
        assert folded[table] == expected[table], f"{name}: table {table} differs at the end"
    assert sum(len(rows) for rows in expected.values()) > 0, f"{name}: nothing to compare"
    # Machines: the cluster each is in (RAS moves them) and its health.
    with closing(sqlite3.connect(run.db)) as conn:
        machines = {
            h: (c, bool(ok))
            for h, c, ok in conn.execute("SELECT host, cluster, healthy FROM machines")
        }
    assert {h: (m["cluster"], m["healthy"]) for h, m in state.table("machines").items()} == machines


def test_timeline_state_at_t_is_the_store_of_the_same_run_stopped_at_t(tmp_path: Path) -> None:
    # Same scenario and seed: the stopped run's events are the longer run's
    # events before T (T falls between events: no event is at an odd µs).
    t_us = 47 * M + 123
    whole = run_scenario("gms-failover", until=UNTIL_US, out_dir=tmp_path / "whole")
    stopped = run_scenario("gms-failover", until=t_us, out_dir=tmp_path / "stopped")
    folded = asyncio.run(state_at(whole.db, t_us))
    assert folded.store_tables() == store_tables(stopped.db)
    # The crash at 46m10s: the follower leads the GMS at epoch 2 by 47m.
    assert folded.leaders()["gms"] == ("gms/1", 2)
    assert asyncio.run(state_at(whole.db, 46 * M)).leaders()["gms"] == ("gms/0", 1)


def test_timeline_run_state_at_answers_any_instant_through_the_registered_viewer(
    tmp_path: Path,
) -> None:
    run = run_scenario("gms-failover", until=50 * M, out_dir=tmp_path)
    early = run.state_at(10 * US_PER_S)
    assert {r["role"]: r["epoch"] for r in early["leases"]}["gms"] == 1
    late = run.state_at(50 * M - 1)
    assert {r["role"]: r["holder"] for r in late["leases"]}["gms"] == "gms/1"
    viewer = VIEWERS["mast"]
    at_end = asyncio.run(viewer.state_tables(run.db, None))
    assert at_end == store_tables(run.db)


def test_timeline_recording_replays_to_the_same_state_as_the_fold(tmp_path: Path) -> None:
    run = run_scenario("gms-failover", until=UNTIL_US, out_dir=tmp_path)
    rec = asyncio.run(record(run.db, snapshot_every=50))
    # Replay the page's way: the last snapshot, then every later step's changes.
    at, tables = rec.snapshots[-1]
    view = {t: dict(rows) for t, rows in tables.items()}
    for delta in rec.deltas[at + 1 :]:
        for table, key, fields in delta:
            if fields is None:
                del view[table][key]
            else:
                view[table][key] = {**view[table].get(key, {}), **fields}
    folded = asyncio.run(state_at(run.db))
    assert {r: (v["holder"], v["epoch"]) for r, v in view["leases"].items()} == {
        r: (v["holder"], v["epoch"]) for r, v in folded.table("leases").items()
    }
    assert {k: w["state"] for k, w in view["workloads"].items()} == {
        k: w["state"] for k, w in folded.table("workloads").items()
    }
    assert len(view["allocations"]) == len(folded.table("allocations"))
    assert [w[2] for w in rec.windows] == ["crash gms/0"]


def test_timeline_folds_a_trace_of_level_decisions_alike(tmp_path: Path) -> None:
    # Without message traffic the store writes are all still there.
    run = run_scenario("gms-failover", out_dir=tmp_path, overrides={"trace.level": "decisions"})
    assert asyncio.run(state_at(run.db)).store_tables() == store_tables(run.db)
