"""migration: a service whose store answers after its lease ran out acts no more.

The `lake` story of `tests/support/stories.py` (a 10 TB copy from
`lake` to `east`, about 800 s) with the service's store slowed to 45 s a
call from 3 min to 9 min in: each renewal takes effect at once, but its
answer comes back after the 30 s lease it renewed has run out. Acting then
(persisting progress, starting or pacing flows) is acting without a lease.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.mast.migration import MigrationService
from emulator.run.events import named
from emulator.units import MIN
from tests.support.broken import broken_system
from tests.support.dsl import copies, run
from tests.support.stories import BIG_BYTES, lake_story
from tests.support.trace import events_of

SLOW = [{"action": "slow-store", "at": "3m", "target": "migration/0", "duration": "6m",
         "latency": "45s"}]  # fmt: skip


def unleased_acts(events: list[Any]) -> list[tuple[int, str]]:
    """(t, what) of every act of the service while its last lease had expired."""
    until = 0
    out = []
    for e in events:
        if e.kind == "store" and e.type == "lease.acquire":
            acquired = named(e)
            if acquired.result and acquired.role == "migration":
                until = acquired.result["expires_at_us"]
        acts = (e.kind == "flow" and e.type in ("start", "cap")) or (
            e.kind == "store" and e.type == "migration.progress"
        )
        if acts and e.src.startswith("migration/") and e.t_us >= until:
            out.append((e.t_us, e.type))
    return out


class LapsedService(MigrationService):
    """Takes itself for the leader whenever `acquire` handed back a lease, however late."""

    @property
    def leading(self) -> bool:
        return self.fence is not None


def test_a_service_answered_after_its_lease_ran_out_does_not_act(tmp_path: Path) -> None:
    raw = lake_story(migration={"tick": "1m"})
    raw["faults"] = SLOW
    result, events = run(raw, tmp_path)
    assert result.status == "ok" and result.violations == []
    assert unleased_acts(events) == []
    # It stopped its flow, and resumed the copy from its persisted bytes once it led again.
    starts = [e.nbytes for e in events_of(events, "flow", "start")]
    assert starts[0] == BIG_BYTES and len(starts) == 2 and 0 < starts[1] < BIG_BYTES
    assert copies(result)[0][3:6] == (BIG_BYTES, BIG_BYTES, "done")


def test_a_service_acting_on_a_lapsed_lease_is_seen(tmp_path: Path) -> None:
    raw = lake_story(migration={"tick": "1m"})
    raw["faults"] = SLOW
    raw["system"]["kind"] = broken_system("mast-lapsed-migration", migration=LapsedService)
    _, events = run(raw, tmp_path)
    acts = unleased_acts(events)
    assert acts and all(3 * MIN <= t <= 10 * MIN for t, _ in acts)
