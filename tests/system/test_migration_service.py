"""Migration service stories: on-demand copies, partitions and crashes mid-copy, the daily cap.

World: `east` and `west` have A100 machines; `lake` has only CPU machines and
storage, and is the home of the 10 TB table `big`. A GPU workload reading
`big` can run nowhere until the data moves: every region with A100s lacks
it, so the GMS puts it in WAITING_DATA and asks the migration service, which
copies `big` to the A100 region needing the fewest bytes (a tie between east
and west at the same supply: east, by name). WAN: 100 Gb/s between regions,
12.5 GB/s, so 10 TB take 800 s when nothing else runs.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actors.mast.report.reporter import MastReporter
from emulator.trace import TraceEvent
from emulator.units import MIN, US_PER_S, H
from tests.support.broken import CapBlindService, RoomBlindService, broken_system
from tests.support.dsl import caught_offline, copies, run, states
from tests.support.stories import BIG_BYTES, TB, lake_story
from tests.support.trace import decisions, events_of, store_events

COPY_S = BIG_BYTES / 12.5e9  # 800 s at the full pair bandwidth


def flow_starts(events: list[TraceEvent]) -> list[int]:
    """The bytes of every WAN flow started, in order."""
    return [e.nbytes for e in events_of(events, "flow", "start")]


def test_a_workload_whose_data_is_nowhere_near_its_gpus_waits_for_an_on_demand_copy(
    tmp_path: Path,
) -> None:
    result, events = run(lake_story(), tmp_path)
    assert result.violations == []
    (none,) = [d for d in decisions(events, "auction.none") if d["workload"] == "W"][:1]
    assert none["state"] == "WAITING_DATA"
    (asked,) = decisions(events, "migration.on-demand")[:1]
    assert asked == {"workload": "W", "region": "east", "bytes": BIG_BYTES}
    assert copies(result) == [
        ("big", "lake", "east", BIG_BYTES, BIG_BYTES, "done", "on-demand", "W")
    ]
    # The copy is one flow of all 10 TB; W starts in east only after the last byte.
    assert flow_starts(events) == [BIG_BYTES]
    (ready,) = store_events(events, "migration.done")
    start = store_events(events, "fleet.start", "W")[0]
    assert start.t_us > ready.t_us >= COPY_S * US_PER_S
    assert states(result)["W"] == ("DONE", 0)
    # Fig. 6: W, the only workload, waits from its first scan until the copy is
    # ready (~800 s): the first 5-minute buckets are all waiting, the last none.
    report = asyncio.run(MastReporter().report(result.out))
    share = report["series"]["waiting_for_data_share"]
    assert report["waiting_for_data_rate"] == 1.0
    assert max(share) == pytest.approx(1.0) and share[-1] == 0.0
    waited_s = sum(share) * report["series"]["bucket_s"]
    assert 0.9 * COPY_S < waited_s < start.t_us / 1e6


def test_a_partition_mid_copy_pauses_it_and_it_resumes_where_it_stopped(tmp_path: Path) -> None:
    raw = lake_story()
    # The copy starts within the first GMS pass (~10 s); cut lake-east 5 min in, for 30 min.
    raw["faults"] = [
        {"action": "partition", "at": "5m", "regions": ["lake", "east"], "duration": "30m"}
    ]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    first, second = flow_starts(events)
    assert first == BIG_BYTES and 0 < second < BIG_BYTES  # resumed with only what was missing
    (ready,) = store_events(events, "migration.done")
    assert ready.t_us >= 35 * MIN + (COPY_S - 5 * 60) * US_PER_S * 0.99
    with sqlite3.connect(result.out) as c:
        moved = c.execute("SELECT sum(bytes) FROM migration_days").fetchone()[0]
    assert moved == BIG_BYTES  # the bytes add up: nothing copied twice, nothing lost
    assert states(result)["W"] == ("DONE", 0)


def test_a_crashed_service_resumes_its_copies_from_their_persisted_progress(
    tmp_path: Path,
) -> None:
    raw = lake_story(migration={"tick": "1m"})
    raw["faults"] = [
        {"action": "crash", "at": "8m", "target": "migration/0", "restart_after": "2m"}
    ]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    first, second = flow_starts(events)
    assert first == BIG_BYTES and 0 < second < BIG_BYTES
    assert copies(result)[0][3:6] == (BIG_BYTES, BIG_BYTES, "done")
    assert states(result)["W"] == ("DONE", 0)


def test_the_daily_cap_holds_and_a_big_copy_finishes_the_next_day(tmp_path: Path) -> None:
    raw = lake_story(duration="30h", migration={"daily_cap_bytes": 6 * TB})
    # 30 hours with no failover: leases renewed every 100 s and a pass every 10
    # minutes instead of every 10 s and every minute cost a tenth of the run.
    raw["system"].update(lease={"ttl": "5m", "renew_every": "100s"}, scan_interval="10m")
    result, events = run(raw, tmp_path)
    assert result.violations == []
    with sqlite3.connect(result.out) as c:
        days = c.execute("SELECT day, bytes FROM migration_days ORDER BY day").fetchall()
    assert days == [(0, 6 * TB), (1, 4 * TB)]
    (ready,) = store_events(events, "migration.done")
    assert ready.t_us >= 24 * H
    assert states(result)["W"] == ("DONE", 0)


# ---- broken components are caught (invariant 9) ---------------------------------------------
def test_a_service_that_ignores_the_daily_cap_is_caught_online_and_offline(
    tmp_path: Path,
) -> None:
    kind = broken_system("mast-cap-blind", migration=CapBlindService)
    raw = lake_story(duration="2h", migration={"daily_cap_bytes": 6 * TB})
    raw["system"]["kind"] = kind
    raw["invariants"]["enabled"].append("migration-cap")
    result, _ = run(raw, tmp_path)
    assert any(v[2] == "migration-cap" and "over the" in v[3] for v in result.violations)
    assert caught_offline(result.out, "migration-cap")


def test_a_copy_into_a_full_region_is_caught_online_and_offline(tmp_path: Path) -> None:
    # east can store 1 TB, west 100 TB: the right service copies `big` to west.
    def story(kind: str) -> dict[str, Any]:
        raw = lake_story(duration="1h")
        raw["system"]["kind"] = kind
        for r in raw["system"]["world_model"]["regions"]:
            r["storage_pb"] = {"east": 0.001, "west": 0.1, "lake": 1.0}[r["name"]]
        return raw

    result, events = run(story("mast"), tmp_path / "ok")
    assert result.violations == []
    assert decisions(events, "migration.on-demand")[0]["region"] == "west"
    kind = broken_system("mast-room-blind", migration=RoomBlindService)
    result, _ = run(story(kind), tmp_path / "broken")
    assert any(v[2] == "storage" and "over its" in v[3] for v in result.violations)
    assert caught_offline(result.out, "storage")
