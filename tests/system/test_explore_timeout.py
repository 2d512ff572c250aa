"""explore's `timeout` arm: faults as long as the system's own timeouts.

The scenario is the witness of `gms-region-lost-ignores-cms` with its fault
removed: W runs in one region, nothing fails. The bug (the GMS gives a region
up once its RMS role alone has been dark for `region_lost_after`, 10 min)
needs a whole RMS role down for longer than that plus a lease and a scan: a
length no draw of the nemesis' two-minute mean reaches but by chance.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from emulator.registry import load_plugins
from emulator.run.explore.arms import GROUPS
from emulator.run.explore.space import system_timeouts
from emulator.run.scenario import CrashFault, PartitionFault, PauseFault
from emulator.units import MIN, MS, Duration, S
from tests.support.explore import calm_witness, one_run_explorer, search

load_plugins()

BUG = "gms-region-lost-ignores-cms"


def test_the_timeouts_are_the_systems_durations_that_fit_the_fault_span(tmp_path: Path) -> None:
    lease = {"ttl": "45s", "renew_every": "15s"}
    space = one_run_explorer(calm_witness(tmp_path, BUG, [], lease=lease), tmp_path)
    timeouts = set(space.space.timeouts)
    # The lease as the scenario sets it, the scan as the witness does, defaults too.
    assert {45 * S, 15 * S, MIN, 10 * MIN} <= timeouts
    assert 86_400 * S not in timeouts  # Tetris' day: past the span
    assert all(MS <= t <= space.space.end_us - space.space.start_us for t in timeouts)
    assert "timeout" in GROUPS["aim"]


def test_system_timeouts_reads_nested_settings_and_skips_what_is_not_a_duration() -> None:
    from actors.common.leadership import LeaseTiming

    assert system_timeouts(LeaseTiming(), 10**12) == (10 * S, 30 * S)
    assert system_timeouts(LeaseTiming(), 20 * S) == (10 * S,)
    assert system_timeouts({"ttl": 30 * S}, 10**12) == ()  # not a settings struct


def test_a_timed_fault_lasts_a_timeout_two_or_a_quarter_more_often_a_whole_role(
    tmp_path: Path,
) -> None:
    space = one_run_explorer(calm_witness(tmp_path, BUG, []), tmp_path).space
    rng = random.Random(3)
    ts = space.timeouts
    allowed = {a for a in ts} | {a + b for a in ts for b in ts}
    allowed |= {x + x // 4 for x in set(allowed)}
    lengths, targets = [], []
    for _ in range(400):
        crash = CrashFault(
            at=Duration(space.start_us), target="leader of rms/east", restart_after=Duration(S)
        )
        got = space.timed(crash, rng, ["rms/east"])
        length = int(got.restart_after)
        room = space.end_us - space.start_us
        assert length in allowed or length == room
        lengths.append(length)
        targets.append(got.target)
    assert set(ts) <= set(lengths)  # every timeout, exactly, sometimes
    assert targets.count("all of rms/east") > 100  # the role that acted, most often
    assert {t for t in targets if t.startswith("all of ")} - {"all of rms/east"}
    # Faults of other kinds get their length timed, never a target.
    cut = PartitionFault(at=Duration(MIN), regions=["east", "west"], duration=Duration(S))
    cut = space.timed(cut, rng)
    assert int(cut.duration) in allowed | {space.end_us - MIN}
    pause = space.timed(PauseFault(at=Duration(MIN), target="gms/0", duration=Duration(S)), rng)
    assert int(pause.duration) != S
    forever = CrashFault(at=Duration(MIN), target="gms/0")  # no restart: no length to time
    assert space.timed(forever, rng) == forever


def test_a_length_timed_arm_finds_the_region_lost_bug_that_aimed_and_random_faults_miss(
    tmp_path: Path,
) -> None:
    # Search seed 1 finds it in 9 runs, by the grid arm (seeds 2 to 6: in 87, 12, 53,
    # 27, 14 runs); before that arm, the timeout arm found it in 45 runs with seed 1,
    # 128 with seed 2 and 22 with seed 3.
    result = search(calm_witness(tmp_path, BUG, [BUG]), tmp_path / "found", 1, 120, first=True)
    (failure,) = result.failures
    assert failure.signature[0] == "auction"
    assert result.runs[-1].mutation in ("timeout", "grid")
    # What it needed, shrunk: the region's whole RMS role down for over ten minutes.
    assert failure.minimal is not None
    minimal = Path(failure.minimal).read_text()
    assert "all of rms/" in minimal


def test_without_the_bug_the_same_search_stays_clean(tmp_path: Path) -> None:
    # Search seed 3 times a fault's length to a timeout 3 times in 30 runs.
    result = search(calm_witness(tmp_path, BUG, []), tmp_path / "clean", 3, 30)
    assert result.failures == []
    assert any(r.mutation == "timeout" for r in result.runs)


def test_the_grid_arm_draws_only_the_kinds_of_fault_the_nemesis_may_use(tmp_path: Path) -> None:
    # Its dark spells are crashes and pauses: a nemesis of links only gets none of them.
    calm = calm_witness(tmp_path, BUG, [])
    assert any(r.mutation == "grid" for r in search(calm, tmp_path / "any", 3, 20).runs)
    raw = json.loads(calm.read_text())
    raw["nemesis"] = {"enabled": True, "actions": ["partition", "loss"]}
    links = tmp_path / "links.json"
    links.write_text(json.dumps(raw))
    runs = search(links, tmp_path / "links", 3, 20).runs
    assert not any(r.mutation == "grid" for r in runs)
