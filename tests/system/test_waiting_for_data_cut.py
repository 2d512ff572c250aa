"""gms: a region cut off from the GMS does not stop a workload from waiting for its data.

The `lake` story of `tests/support/stories.py`: W reads the 10 TB
table `big`, whose only copy is in `lake` (no GPUs); `east` and `west` have
the A100s. With the WAN between `east` (where the GMS leads) and `west` cut
for the first hour, `west` answers no auction: the regions that do answer
say `no_data` (east) and `no_hardware` (lake), so W waits for its data and
the migration service is asked for a copy at once, not after the cut.
"""

from __future__ import annotations

from pathlib import Path

from emulator.units import H
from tests.support.dsl import run, states
from tests.support.stories import lake_story
from tests.support.trace import decisions, store_events

CUT = [{"action": "partition", "at": "1s", "regions": ["east", "west"], "duration": "1h"}]


def test_a_region_that_does_not_answer_does_not_count_against_waiting_for_data(
    tmp_path: Path,
) -> None:
    raw = lake_story()
    raw["faults"] = CUT
    result, events = run(raw, tmp_path)
    assert result.violations == []
    first = next(d for d in decisions(events, "auction.none") if d["workload"] == "W")
    assert first["state"] == "WAITING_DATA" and first["reasons"] == ["no_data", "no_hardware"]
    (asked, *_) = decisions(events, "migration.on-demand")
    assert asked["workload"] == "W" and asked["region"] == "east"
    # The copy lands, and W runs, while west is still cut off.
    (ready,) = store_events(events, "migration.done")
    (start, *_) = store_events(events, "fleet.start", "W")
    assert ready.t_us < start.t_us < H
    assert states(result)["W"] == ("DONE", 0)
