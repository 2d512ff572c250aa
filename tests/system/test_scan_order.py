"""A GMS-scan pass begins at an RMS with the first of its messages to arrive.

The GMS sends ScanStart to every RMS and then, at the same instant, the
pass's first auctions; the network's jitter may deliver an auction first.
An RMS that began the pass only on ScanStart answered such an auction from
the last pass's negative cache (and views not yet brought up to date), then
emptied the cache the pass had begun to fill. Workloads arriving over half
an hour, two regions, a pass every 5 minutes: on seed SEED some auction
reaches an RMS ahead of its pass's ScanStart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.mast import rms
from actors.mast.messages import AuctionOpen
from emulator.trace import TraceEvent
from tests.support.dsl import job, run, scenario, workload

SEED = 1


def _passes() -> dict[str, Any]:
    raw = scenario(
        [workload(f"W{i}", "hi", i * 90_000_000, job(gpus=8)) for i in range(20)],
        duration="30m",
    )
    raw["system"]["scan_interval"] = "5m"
    return raw


def _pass_of(event: TraceEvent) -> tuple[int, int]:
    """The pass of a ScanStart or AuctionOpen delivered, or of an `rms.pass` decision."""
    fields = event.payload["msg"] if event.kind == "deliver" else event.payload
    return (fields["gms_epoch"], fields["scan"])


def _early_auctions(events: list[TraceEvent]) -> int:
    """Auctions delivered to an RMS before the ScanStart of their pass."""
    started: dict[str, set[tuple[int, int]]] = {}
    early = 0
    for e in events:
        if e.kind != "deliver" or not e.dst.startswith("rms/"):
            continue
        if e.type == "ScanStart":
            started.setdefault(e.dst, set()).add(_pass_of(e))
        elif e.type == "AuctionOpen" and _pass_of(e) not in started.get(e.dst, set()):
            early += 1
    return early


def _answered_before_their_pass(events: list[TraceEvent]) -> list[str]:
    """Auctions an RMS handled without having begun their pass first (the story has no faults:
    every auction reaches a leader)."""
    begun: dict[str, tuple[int, int]] = {}
    out = []
    for i, e in enumerate(events):
        if e.kind == "decision" and e.type == "rms.pass":
            begun[e.src] = max(begun.get(e.src, (-1, -1)), _pass_of(e))
        elif e.kind == "deliver" and e.type == "AuctionOpen" and e.dst.startswith("rms/"):
            wanted = _pass_of(e)
            if begun.get(e.dst, (-1, -1)) >= wanted:
                continue  # begun already
            after = events[i + 1] if i + 1 < len(events) else None
            if after is None or after.type != "rms.pass" or _pass_of(after) != wanted:
                out.append(f"{e.dst}: auction {e.payload['msg']['auction_id']} of pass {wanted}")
    return out


def test_an_auction_that_overtakes_its_scan_start_begins_the_pass(tmp_path: Path) -> None:
    result, events = run(_passes(), tmp_path, SEED)
    assert result.violations == []
    assert _early_auctions(events) > 0  # the premise: the network reordered some
    assert _answered_before_their_pass(events) == []
    begun = [e for e in events if e.kind == "decision" and e.type == "rms.pass"]
    starts = [e for e in events if e.kind == "deliver" and e.type == "ScanStart"]
    assert len(begun) == len(starts)  # once per pass and RMS, whichever came first


def test_an_rms_that_waits_for_scan_start_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def auction(self: rms.RegionalScheduler, msg: AuctionOpen) -> None:
        self.reply(self._bid(msg))  # the pass begins on ScanStart only

    handlers = {**rms.RegionalScheduler._handlers, AuctionOpen: (auction, False)}
    monkeypatch.setattr(rms.RegionalScheduler, "_handlers", handlers)
    _, events = run(_passes(), tmp_path, SEED)
    assert _answered_before_their_pass(events) != []
