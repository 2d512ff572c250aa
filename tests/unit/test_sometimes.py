"""Sometimes properties: detectors over hand-made events, the registry's rules, the catalogue."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from actors.checks.sometimes import (
    CLUSTER,
    FAILOVER_WINDOW_US,
    LEASES,
    MAST,
    ClusterDetector,
    ClusterPhase,
    LeaseDetector,
    MastDetector,
)
from emulator import sometimes
from emulator.registry import load_plugins
from emulator.sometimes import (
    Coverage,
    coverage_lines,
    merge,
    phase_tracker,
    register_sometimes,
    tally,
)
from emulator.trace import TraceEvent

load_plugins()


def decision(type_: str, **payload: Any) -> TraceEvent:
    return TraceEvent(0, 0, "decision", "x", "", type_, payload)


def store(type_: str, args: list[Any], result: Any = None) -> TraceEvent:
    return TraceEvent(0, 0, "store", "x", "", type_, [args, result])


def fault(type_: str) -> TraceEvent:
    return TraceEvent(0, 0, "fault", "", "", type_, {})


def found(detector: Any, events: Iterable[TraceEvent]) -> list[str]:
    return [name for event in events for name in detector.observe(event)]


GMS_2 = decision("lease.leader", role="gms", epoch=2)

MAST_CASES = [
    # (events, what they reach)
    ([store("auction.open", [None, 0, "w1"], 7), GMS_2], ["gms-failover-mid-auction"]),
    (
        [
            store("auction.open", [None, 0, "w1"], 7),
            store("auction.close", [7, 1, "won", "a"]),
            GMS_2,
        ],
        [],
    ),
    ([store("auction.open", [None, 0, "w1"], None), GMS_2], []),  # a fenced-off open: no auction
    (
        [store("auction.open", [None, 0, "w1"], 7), decision("lease.leader", role="gms", epoch=1)],
        [],
    ),
    (
        [
            store("auction.open", [None, 0, "w1"], 7),
            decision("lease.leader", role="rms/a", epoch=3),
        ],
        [],
    ),
    ([decision("rms.unhold", why="expired")], ["rms-hold-expired"]),
    ([decision("rms.unhold", why="awarded")], []),
    ([decision("cm.plan-taken-up", victims=2)], ["cm-takes-up-preemption"]),
    ([decision("cm.plan-taken-up", victims=0)], []),
    (
        [decision("gms.region-lost", region="b"), decision("auction.award", winner="b")],
        ["region-lost-and-back"],
    ),
    ([decision("gms.region-lost", region="b"), decision("auction.award", winner="c")], []),
    ([decision("auction.award", winner="b")], []),
    (  # back once: a second award to the same region is not a second return
        [decision("gms.region-lost", region="b")] + [decision("auction.award", winner="b")] * 2,
        ["region-lost-and-back"],
    ),
    (
        [decision("cm.reject", why="machine h1 still held by another cluster's job")],
        ["plan-refused-machine-taken"],
    ),
    (
        [decision("cm.reject", why="machine h1 has 2 GPUs free, plan needs 8")],
        ["plan-refused-machine-taken"],
    ),
    ([decision("cm.reject", why="the award is gone")], []),
    ([decision("auction.late", auction=1, region="a")], ["late-bid"]),
    ([decision("auction.lost-cas", auction=1)], ["award-lost-cas"]),
    ([decision("dispatch.failed", workload="w", why="x")], ["dispatch-failed"]),
    ([decision("agent.gang-timeout", workload="w", job="j")], ["gang-timeout"]),
    ([decision("rms.stale-end", workload="w", job="j", auction=3)], ["stale-end-dropped"]),
    (
        [decision("migration.on-demand", workload="w", region="a", bytes=1)],
        ["data-fetched-on-demand"],
    ),
    ([decision("migration.on-demand", workload="w", region=None, bytes=0)], []),
    (  # a copy in flight across a partition, progressing once it healed
        [
            store("migration.progress", [0, [[5, 10, "copying"]]]),
            fault("partition.start"),
            store("migration.progress", [1, [[5, 10, "copying"]]]),  # still cut off
            fault("partition.end"),
            store("migration.progress", [2, [[5, 20, "copying"]]]),
            store("migration.progress", [3, [[5, 30, "copying"]]]),  # counted once
        ],
        ["copy-resumed-after-partition"],
    ),
    (  # started after the partition began: not cut off by it
        [
            fault("partition.start"),
            store("migration.progress", [1, [[5, 10, "copying"]]]),
            fault("partition.end"),
            store("migration.progress", [2, [[5, 20, "copying"]]]),
        ],
        [],
    ),
    (  # finished before the partition: nothing to resume
        [
            store("migration.progress", [0, [[5, 10, "copying"]]]),
            store("migration.done", [1, 5, 0.0], ["t", "a", 10]),
            fault("partition.start"),
            fault("partition.end"),
            store("migration.progress", [2, [[5, 20, "copying"]]]),
        ],
        [],
    ),
]


@pytest.mark.parametrize(("events", "reached"), MAST_CASES)
def test_mast_detector(events: list[TraceEvent], reached: list[str]) -> None:
    assert found(MastDetector(), events) == reached
    assert set(reached) <= set(MAST)


@pytest.mark.parametrize(
    ("event", "reached"),
    [
        (decision("lease.leader", role="demo/leader", epoch=1), []),
        (decision("lease.leader", role="demo/leader", epoch=2), ["leader-failover"]),
        (decision("lease.lost", role="gms", epoch=4), ["leader-lost-lease"]),
        (store("lease.acquire", [], None), []),
    ],
)
def test_lease_detector(event: TraceEvent, reached: list[str]) -> None:
    assert found(LeaseDetector(), [event]) == reached
    assert set(reached) <= set(LEASES)


def granted(t: int, holder: str, epoch: int, ttl: int = 30) -> TraceEvent:
    lease = {"role": "r", "holder": holder, "epoch": epoch, "expires_at_us": t + ttl}
    return TraceEvent(0, t, "store", holder, "", "lease.acquire", [["r", holder, t, ttl], lease])


@pytest.mark.parametrize(
    ("events", "reached"),
    [
        ([granted(0, "a", 1), granted(10, "a", 1), granted(40, "a", 2)], ["leader-back-at-expiry"]),
        ([granted(0, "a", 1), granted(30, "b", 2)], []),  # another holder: a takeover
        ([granted(0, "a", 1), granted(31, "a", 2)], []),  # back a microsecond late
        ([granted(0, "a", 1), granted(29, "a", 1)], []),  # an ordinary renewal
    ],
)
def test_lease_detector_sees_a_holder_back_at_its_lease_expiry(
    events: list[TraceEvent], reached: list[str]
) -> None:
    assert found(LeaseDetector(), events) == reached


@pytest.mark.parametrize(
    ("event", "reached"),
    [
        (decision("cluster.plan-refused", job="j", why="x"), ["cluster-plan-refused"]),
        (decision("cluster.offer-declined", job="j"), ["cluster-offer-declined"]),
        (decision("cluster.rebuilt", jobs=3, epoch=2), ["cluster-scheduler-rebuilt"]),
        (decision("cluster.rebuilt", jobs=3, epoch=1), []),  # the first leader's build
        (decision("cluster.stale-end", job="j", auction=2), ["cluster-stale-end"]),
        (decision("cluster.started-unheard", job="j"), ["cluster-started-unheard"]),
        (decision("cluster.stop-unstarted", job="j"), ["cluster-stop-unstarted"]),
        (
            decision("cm.stop-before-plan", workload="w", job="j", auction=3),
            ["cluster-stop-before-plan"],
        ),
        (decision("cm.reject", workload="w", job="j", why="x"), []),
        (decision("cluster.job-done", job="j"), []),
    ],
)
def test_cluster_detector(event: TraceEvent, reached: list[str]) -> None:
    assert found(ClusterDetector(), [event]) == reached
    assert set(reached) <= set(CLUSTER)


# ---- the registry and the catalogue -------------------------------------------------
class Once:
    def __init__(self, name: str = "toy-state") -> None:
        self.name = name

    def observe(self, event: TraceEvent) -> Iterable[str]:
        return (self.name,) if event.type == "toy" else ()


@pytest.fixture
def toy_group() -> Iterable[str]:
    register_sometimes("toy", Once, {"toy-state": "a toy"}, systems=["toy-system"])
    yield "toy"
    sometimes.unregister_sometimes("toy")


def test_a_catalogue_counts_every_property_of_its_system_never_reached_ones_as_0(
    toy_group: str,
) -> None:
    events = [decision("toy"), decision("other"), decision("toy")]
    counts = tally(events, "toy-system")
    assert counts["toy-state"] == 2
    assert counts["leader-failover"] == 0  # the lease group reads every system's runs
    assert "gms-failover-mid-auction" not in counts  # MAST's only MAST's
    assert "toy-state" not in tally(events, "mast")


def test_a_detector_that_reports_outside_its_catalogue_is_an_error(toy_group: str) -> None:
    register_sometimes("toy", lambda: Once("undeclared"), {"toy-state": "a toy"}, ["toy-system"])
    with pytest.raises(ValueError, match="'undeclared', not in its catalogue"):
        tally([decision("toy")], "toy-system")


def test_two_groups_cannot_claim_one_name(toy_group: str) -> None:
    with pytest.raises(ValueError, match="already belong to 'toy'"):
        register_sometimes("other-toy", Once, {"toy-state": "mine too"})


def test_a_campaign_catalogue_counts_runs_and_occurrences_and_lists_the_never_reached() -> None:
    described = {"a": "state a", "b": "state b", "c": "state c"}
    cover = merge([{"a": 2, "b": 0}, {"a": 1, "b": 3}, {}], described)
    assert cover == {
        "a": Coverage("state a", runs=2, count=3),
        "b": Coverage("state b", runs=1, count=3),
        "c": Coverage("state c"),
    }
    lines = coverage_lines(cover, runs=3)
    assert lines[0] == "sometimes: 2 of 3 reached over 3 seeds"
    assert lines[-1].split() == ["c", "never", "reached", "state", "c"]


def at(t_us: int, event: TraceEvent) -> TraceEvent:
    return TraceEvent(event.seq, t_us, event.kind, event.src, event.dst, event.type, event.payload)


@pytest.mark.parametrize(
    ("events", "phase"),
    [
        ([], "calm"),
        ([store("queue.award", ["f", 0, "j", 3, "dc"], True)], "dispatching"),
        ([store("queue.award", ["f", 0, "j", 3, "dc"], False)], "calm"),  # lost its CAS
        (
            [
                store("queue.award", ["f", 0, "j", 3, "dc"], True),
                store("queue.transition", ["j", ["DISPATCHING"], "RUNNING", 1, 3], True),
            ],
            "calm",
        ),
        (
            [
                decision("cluster.decision", preempt=["v"], start=["j"]),
                store("fleet.state", ["f", 0, "v", "train", "CHECKPOINTING", 1], True),
            ],
            "checkpointing+preempting",
        ),
        (
            [
                decision("cluster.decision", preempt=["v"], start=[]),
                store("fleet.state", ["f", 0, "v", "train", "CHECKPOINTING", 1], True),
                store("fleet.release", ["f", 0, "v", "train", "STOPPED", 1], True),
            ],
            "calm",
        ),
        ([decision("lease.leader", role="rms/dc", epoch=2)], "failover"),
        ([decision("lease.leader", role="rms/dc", epoch=1)], "calm"),
        (  # a failover a minute and more ago is over
            [
                decision("lease.leader", role="rms/dc", epoch=2),
                at(FAILOVER_WINDOW_US + 1, decision("cluster.job-done", job="j")),
            ],
            "calm",
        ),
    ],
)
def test_cluster_phase(events: list[TraceEvent], phase: str) -> None:
    tracker = ClusterPhase()
    for event in events:
        tracker.observe(event)
    assert tracker.phase() == phase
    assert phase_tracker("cluster").__class__ is ClusterPhase
