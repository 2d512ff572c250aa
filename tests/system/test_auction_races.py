"""auction: pipelined auctions race for the same machines, and nothing is promised twice.

The world of `tests/support/dsl.py` (regions east and west, one dynamic cluster
of 4 A100 machines, 32 GPUs, and 4 CPU machines each). With `[system]
auction.pipeline` above 1 the GMS opens several auctions together and awards
them in rank order; each RMS holds every bid's plan in its view (`rms.hold`)
until the award, the release or `hold_ttl` (`rms.unhold`), so its later bids
in the same batch see those machines taken. The `auction` checker judges
the holds; the `allocation` checker what the CMs actually started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.mast.gms import GlobalScheduler
from actors.mast.messages import Award
from actors.mast.rms import RegionalScheduler
from emulator.actor import on
from emulator.cli.main import main
from emulator.trace import TraceEvent
from emulator.units import MIN, S
from store.mast.queue import QUEUED
from tests.support.broken import broken_system
from tests.support.dsl import crash, job, preemption_story, run, scenario, states, workload
from tests.support.trace import decisions, started_once, store_events


class _LateAward(msgspec.Struct, frozen=True, tag=True):
    dst: str
    award: Award


EAST_ONLY = [{"name": "t", "size_bytes": 1, "home_region": "east"}]
BOTH = [{"name": "t", "size_bytes": 1, "home_region": "east", "replicas": ["west"]}]


def pipelined(raw: dict[str, Any], pipeline: int = 2, hold_ttl: str = "30s") -> dict[str, Any]:
    raw["system"]["auction"] = {"pipeline": pipeline, "hold_ttl": hold_ttl}
    return raw


def race_story(*, kind: str = "mast", pipeline: int = 2) -> dict[str, Any]:
    """A and B (24 GPUs each) and C (8) arrive together; their data is only in east (32 GPUs)."""
    return pipelined(
        scenario(
            [
                workload("A", "hi", 0, job(gpus=24, work=30 * MIN)),
                workload("B", "hi", 0, job(gpus=24, work=30 * MIN)),
                workload("C", "hi", 0, job(gpus=8, work=30 * MIN)),
            ],
            tables=EAST_ONLY,
            kind=kind,
            duration="2h",
        ),
        pipeline,
    )


def open_holds(events: list[TraceEvent]) -> dict[tuple[str, int], dict[str, Any]]:
    """Holds never ended by an `rms.unhold` ((RMS instance, auction) → the hold)."""
    held = {(e.src, e.payload["auction"]): e.payload for e in events if e.type == "rms.hold"}
    for e in events:
        if e.type == "rms.unhold":
            held.pop((e.src, e.payload["auction"]), None)
    return held


def one_held_the_other_waited(events: list[TraceEvent]) -> tuple[str, str]:
    """(first, other) of A and B: east held the first's plan, found no room for the
    other's (it waited, unschedulable), and no dispatch failed; no hold is left open."""
    first = next(d["workload"] for d in decisions(events, "auction.award") if d["workload"] != "C")
    other = "B" if first == "A" else "A"
    waited = [d for d in decisions(events, "auction.none") if d["workload"] == other]
    assert waited and "unschedulable" in waited[0]["reasons"]
    assert not decisions(events, "dispatch.failed")
    assert open_holds(events) == {}
    return first, other


def awarded(events: list[TraceEvent], wid: str) -> list[str]:
    return [d["winner"] for d in decisions(events, "auction.award") if d["workload"] == wid]


# ---- (a) two auctions in flight want the same machines --------------------------------------
@pytest.mark.parametrize("pipeline", [2, 3])
def test_auctions_in_flight_never_promise_one_machine_twice(tmp_path: Path, pipeline: int) -> None:
    result, events = run(race_story(pipeline=pipeline), tmp_path)
    assert result.violations == []
    # The first pass opened `pipeline` auctions at the same instant.
    opened = [e for e in store_events(events, "auction.open") if e.result]
    assert [e.t_us for e in opened[:pipeline]] == [10 * S] * pipeline
    # Among A and B, east held the plan of whichever bid came first and, seeing
    # only 8 GPUs left, could not place the other: one runs, the other waits.
    first, other = one_held_the_other_waited(events)
    assert started_once(events, "A", "B", "C") == {"A/trainer": 1, "B/trainer": 1, "C/trainer": 1}
    assert states(result) == {"A": ("DONE", 0), "B": ("DONE", 0), "C": ("DONE", 0)}
    first_end = next(e for e in store_events(events, "fleet.release", first))
    other_start = next(e for e in store_events(events, "fleet.start", other) if e.result)
    assert first_end.seq < other_start.seq  # the other waited for the first's machines


class HoldlessRMS(RegionalScheduler):
    """BROKEN: records its holds but keeps them out of its view (bids ignore them)."""

    def _hold(self, auction_id: int, only: str | None = None) -> None:
        pass

    def _unhold(self, auction_id: int, why: str) -> bool:
        if self.params.hold_ttl is None or auction_id not in self.tentative:
            return False
        self.decision(
            "rms.unhold", {"auction": auction_id, "region": self.params.region, "why": why}
        )
        return True


def test_an_rms_that_ignores_its_holds_is_caught_promising_twice(tmp_path: Path) -> None:
    kind = broken_system("mast-holdless-rms", rms=HoldlessRMS)
    result, events = run(race_story(kind=kind), tmp_path)
    assert any(v[2] == "auction" and "promised to auctions" in v[3] for v in result.violations)
    # Both were awarded to east on the same machines; the CM refused the second plan.
    assert awarded(events, "A")[0] == awarded(events, "B")[0] == "east"
    (refused,) = [d["workload"] for d in decisions(events, "dispatch.failed")]
    assert refused in ("A", "B")
    # The CM is the last line: nothing started twice, and the refused one ran later.
    assert started_once(events, "A", "B") == {"A/trainer": 1, "B/trainer": 1}


class LateAwardGMS(GlobalScheduler):
    """Sends every Award only once its scan pass is over: the pass's later
    auctions open first, as a jittery network may deliver them."""

    def send_reliably(self, dst: str, msg: Any) -> None:
        if isinstance(msg, Award):
            self.set_timer(1, _LateAward(dst=dst, award=msg))
        else:
            super().send_reliably(dst, msg)

    @on(_LateAward)
    def late_award(self, msg: _LateAward) -> None:
        super().send_reliably(msg.dst, msg.award)


def test_one_auction_at_a_time_never_promises_one_machine_twice(tmp_path: Path) -> None:
    # With one auction at a time the next AuctionOpen can still overtake the last
    # Award. East must hold the bid it made for the first of A and B, and find
    # only 8 GPUs for the other, as with pipelined auctions; before, its view knew
    # nothing of the plan and it promised the same machines again: the CM refused
    # the second dispatch, and the GMS had to auction that workload once more.
    kind = broken_system("mast-late-award", gms=LateAwardGMS)
    result, events = run(race_story(kind=kind, pipeline=1), tmp_path)
    assert result.violations == []
    one_held_the_other_waited(events)
    assert len(decisions(events, "rms.hold")) >= 3  # and the `auction` checker judges them
    assert states(result) == {"A": ("DONE", 0), "B": ("DONE", 0), "C": ("DONE", 0)}


# ---- (b) a late bid ----------------------------------------------------------------------------
def late_story(kind: str = "mast") -> dict[str, Any]:
    """W's data is in both regions, and every message between east (where the GMS
    leads) and west takes 5 s more for the first minute: west's bid for W comes
    after the 2 s deadline. X (all 32 of west's GPUs, data only in west) arrives
    at 15 s and is first auctioned at 70 s."""
    raw = pipelined(
        scenario(
            [
                workload("W", "hi", 0, job(gpus=8, work=30 * MIN)),
                workload("X", "hi", 15 * S, job(gpus=32, work=30 * MIN, tables=("tw",))),
            ],
            tables=[*BOTH, {"name": "tw", "size_bytes": 1, "home_region": "west"}],
            kind=kind,
            duration="1h30m",
        ),
        hold_ttl="10s",
    )
    delay = {"action": "delay", "at": "0s", "duration": "1m", "between": ["east", "west"]}
    raw["faults"] = [{**delay, "extra_ms": 5000.0}]
    return raw


def test_a_late_bid_is_ignored_and_its_hold_lapses(tmp_path: Path) -> None:
    result, events = run(late_story(), tmp_path)
    assert result.violations == []
    assert {"auction": 1, "region": "west"} in decisions(events, "auction.late")
    assert awarded(events, "W") == ["east"]
    # West held W's plan when the auction came, after it had closed; nothing
    # released it, so it lapsed `hold_ttl` later and X could have all of west.
    hold = next(e for e in events if e.type == "rms.hold" and e.payload["region"] == "west")
    unhold = next(e for e in events if e.type == "rms.unhold" and e.src == hold.src)
    assert unhold.payload == {"auction": 1, "region": "west", "why": "expired"}
    assert unhold.t_us - hold.t_us == 10 * S
    assert open_holds(events) == {}
    assert awarded(events, "X") == ["west"]
    assert started_once(events, "W", "X") == {"W/trainer": 1, "X/trainer": 1}
    assert states(result) == {"W": ("DONE", 0), "X": ("DONE", 0)}


class TimelessRMS(RegionalScheduler):
    """BROKEN: its holds never lapse."""

    def hold_expired(self, msg: Any) -> None:
        pass


def test_a_hold_that_never_lapses_keeps_its_machines_from_later_work(tmp_path: Path) -> None:
    result, events = run(late_story(broken_system("mast-timeless-rms", rms=TimelessRMS)), tmp_path)
    assert ("rms/west/0", 1) in open_holds(events)
    # West's 8 GPUs stay promised to a closed auction: X never fits there.
    assert awarded(events, "X") == []
    assert states(result)["X"][0] in QUEUED


# ---- (c) the winner's RMS leader dies between the award and the dispatch ---------------------
def test_a_winner_whose_rms_dies_after_the_award_runs_its_workload_once(tmp_path: Path) -> None:
    # The first pass's award to east is committed at 10.258268 s and reaches
    # rms/east/0 10 µs later: it dies in between. Its holds die with it; the
    # resent award finds no plan at the successor, which also reports the
    # dispatch failed from the store (one of the two reports moves the workload).
    raw = race_story()
    raw["faults"] = [crash("leader of rms/east", "10.25827s")]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    first = decisions(events, "auction.award")[0]["workload"]
    crashed = next(e for e in events if e.kind == "crash")
    assert crashed.dst == "rms/east/0"
    assert not [e for e in store_events(events, "fleet.start", first) if e.t_us < crashed.t_us]
    assert [d["workload"] for d in decisions(events, "dispatch.failed")] == [first]
    assert {src for src, _ in open_holds(events)} <= {"rms/east/0"}
    assert started_once(events, "A", "B", "C") == {"A/trainer": 1, "B/trainer": 1, "C/trainer": 1}
    assert states(result) == {"A": ("DONE", 0), "B": ("DONE", 0), "C": ("DONE", 0)}


# ---- (d) a machine of the plan fails between the bid and the execution -------------------------
def test_a_plan_made_stale_by_a_machine_failure_is_refused_and_placed_again(
    tmp_path: Path,
) -> None:
    # At 1 h H's plan takes m0 and m1 from L and waits for L's checkpoint; m0
    # fails at 60m20s. The plan is never executed on it: the dispatch fails, H
    # is placed again (m1, m2) and runs once. L, 32 GPUs, no longer fits east.
    raw = pipelined(preemption_story(duration="3h"))
    raw["faults"] = [{"action": "down", "at": "60m20s", "node": "east/dc0/fd0/r0/m0"}]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    holds = [d for d in decisions(events, "rms.hold") if d["workload"] == "H"]
    assert [h for h, _ in holds[0]["gpus"]] == ["east/dc0/fd0/r0/m0", "east/dc0/fd0/r0/m1"]
    assert [d["workload"] for d in decisions(events, "dispatch.failed")] == ["H"]
    # Refused as the machine fails, not at the RMS's 15-minute dispatch timeout.
    (refusal,) = [e for e in events if e.type == "cm.reject" and e.payload["workload"] == "H"]
    assert refusal.t_us == (60 * 60 + 20) * S
    (start,) = [e for e in store_events(events, "fleet.start", "H") if e.result]
    assert "east/dc0/fd0/r0/m0" not in [h for h, _ in start.gpus]
    assert states(result) == {"L": ("WAITING", 0), "H": ("DONE", 0)}


# ---- the key -----------------------------------------------------------------------------------
def test_a_bad_pipeline_names_its_key_path(tmp_path: Path, capsys: Any) -> None:
    for auction, path in [
        ({"pipeline": 0}, "system.auction.pipeline"),
        ({"pipeline": 2, "hold_ttl": "1s"}, "system.auction.hold_ttl"),
    ]:
        raw = scenario([workload("W", "hi", 0, job(gpus=8))], duration="10m")
        raw["system"]["auction"] = auction
        (tmp_path / "s.json").write_text(msgspec.json.encode(raw).decode())
        assert main(["run", str(tmp_path / "s.json"), "--out", str(tmp_path / "r.db")]) == 2
        assert path in capsys.readouterr().err
