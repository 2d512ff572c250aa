"""The preemption checker (invariant 6) on hand-written traces.

A victim must save a checkpoint before its machines are released, unless it
lost a machine: to a failure, or to RAS moving the machine to another
cluster (MAST's scheduling never feeds back into RAS, so RAS may take a
victim's machine between the RMS's plan and the CM's preemption); or unless
its agent could not save one: it crashed, or it was paused after the stop
order (its CM frees a silent agent's machines after `stop_timeout`).
"""

from __future__ import annotations

from typing import Any

import pytest

from actors.checks.preemption import PreemptionChecker
from emulator.trace import TraceEvent

FENCE: dict[str, Any] = {"role": "cm/r/c1", "holder": "cm/r/c1/0", "epoch": 1}
VICTIM = ["v", "j"]


def run(*events: tuple[str, str, Any, Any]) -> list[str]:
    checker = PreemptionChecker()
    out: list[str] = []
    for seq, (kind, type_, payload, result) in enumerate(events):
        if kind in ("crash", "pause"):
            # The kernel's own events: `type_` is the actor, `payload` the field.
            out += checker.observe(TraceEvent(seq, seq, kind, "", type_, "", payload))
            continue
        body = payload if kind == "decision" else [payload, result]
        out += checker.observe(TraceEvent(seq, seq, kind, "x", "", type_, body))
    return out


def story(*middle: tuple[str, str, Any, Any]) -> list[str]:
    """v (priority 5) runs on m1; w (priority 0) preempts it; v is released."""
    return run(
        ("store", "fleet.start", [FENCE, 0, "v", "j", "r/c1", 5, [["m1", 8]], []], [1, 0]),
        ("store", "fleet.state", [FENCE, 1, "v", "j", "RUNNING"], True),
        ("decision", "rms.dispatch", {"workload": "w", "priority": 0, "victims": [VICTIM]}, None),
        *middle,
        ("store", "fleet.release", [FENCE, 9, "v", "j", "STOPPED"], True),
    )


def test_a_victim_released_without_a_checkpoint_is_caught() -> None:
    (violation,) = story()
    assert "v/j released its machines before saving a checkpoint" in violation


def test_a_victim_that_saved_its_checkpoint_is_fine() -> None:
    assert story(("store", "fleet.checkpoint", [5, "v", "j", 1, 3], True)) == []


def test_a_victim_whose_machine_ras_moved_away_is_not_flagged() -> None:
    moved = [FENCE, 5, [["m1", "r/c1", "r/non-ml"]], {"r/c1": 3}]
    assert story(("store", "fleet.membership", moved, True)) == []
    # A membership change that did not happen (fence lost) excuses nothing.
    assert len(story(("store", "fleet.membership", moved, False))) == 1
    # Nor does RAS adding a machine to the victim's cluster.
    added = [FENCE, 5, [["m1", None, "r/c1"]], {"r/c1": 3}]
    assert len(story(("store", "fleet.membership", added, True))) == 1


# The victim's attempt is its first: its agent is `agent/v/j/1`.
STOP = ("store", "fleet.state", [FENCE, 3, "v", "j", "CHECKPOINTING"], True)


def test_a_victim_whose_agent_crashed_is_not_flagged_another_agent_s_crash_is() -> None:
    assert story(STOP, ("crash", "agent/v/j/1", "fault #0", None)) == []
    assert story(("crash", "agent/v/j/1", "fault #0", None), STOP) == []
    assert len(story(STOP, ("crash", "agent/v/j/2", "fault #0", None))) == 1
    assert len(story(STOP, ("crash", "rms/r/0", "fault #0", None))) == 1


def test_a_victim_whose_agent_was_paused_after_the_stop_order_is_not_flagged() -> None:
    # Paused at t=4, after the order at t=3: its CM waited, then gave up on it.
    assert story(STOP, ("pause", "agent/v/j/1", 100, None)) == []
    # A pause over before the order (t=3 to t=4; the order at t=4) excuses nothing.
    late_stop = ("store", "fleet.state", [FENCE, 4, "v", "j", "CHECKPOINTING"], True)
    assert len(story(("pause", "agent/v/j/1", 1, None), late_stop)) == 1


def start(t: int, priority: int, cluster: str = "r/c1", attempt: int = 1) -> tuple[Any, ...]:
    gpus = [["m1", 8]]
    return ("store", "fleet.start", [FENCE, t, "v", "j", cluster, priority, gpus, []], [attempt, 0])


def dispatch(workload: str, priority: int, victims: list[list[str]], rms: str = "rms/r/0") -> Any:
    return (rms, {"workload": workload, "priority": priority, "victims": victims})


def ranks(*events: Any) -> list[str]:
    """Run store events and RMS dispatches (`dispatch`: their sender matters)."""
    checker = PreemptionChecker()
    out: list[str] = []
    for seq, event in enumerate(events):
        if len(event) == 2:
            src, payload = event
            decision = TraceEvent(seq, seq, "decision", src, "", "rms.dispatch", payload)
            out += checker.observe(decision)
        else:
            kind, type_, payload, result = event
            out += checker.observe(TraceEvent(seq, seq, kind, "x", "", type_, [payload, result]))
    return out


# v dispatched again at priority 7, in another region.
ELSEWHERE = dispatch("v", 7, [], "rms/q/0")
RELEASED = ("store", "fleet.release", [FENCE, 3, "v", "j", "STOPPED", 1], True)


@pytest.mark.parametrize(
    ("events", "violated"),
    [
        # v runs at priority 5 (0 is the highest): only a higher priority may take it.
        ([start(0, 5), dispatch("w", 4, [VICTIM])], False),
        ([start(0, 5), dispatch("w", 5, [VICTIM])], True),
        ([start(0, 5), dispatch("w", 6, [VICTIM])], True),
        # Its attempt ended; v was dispatched again at priority 7 (over its quota)
        # to a CM that is dark, so the victim is that reservation, not the old
        # attempt (cm-failover-preemption with us-east/c0 dark 70 min).
        ([start(0, 3), RELEASED, dispatch("v", 7, []), dispatch("w", 3, [VICTIM])], False),
        # ...and at priority 3 again: the same rule catches it.
        ([start(0, 3), RELEASED, dispatch("v", 3, []), dispatch("w", 3, [VICTIM])], True),
        # A release of an earlier attempt leaves the live one standing for the name.
        ([start(0, 3, attempt=2), RELEASED, dispatch("w", 3, [VICTIM])], True),
        # A dispatch in another region is not what this region's RMS holds.
        ([start(0, 3), RELEASED, ELSEWHERE, dispatch("w", 3, [VICTIM])], False),
        ([start(0, 3), ELSEWHERE, dispatch("w", 3, [VICTIM])], True),
        # The later of the live attempt and the region's dispatch stands for the name.
        ([dispatch("v", 7, []), start(1, 3), dispatch("w", 3, [VICTIM])], True),
        ([start(0, 3), dispatch("v", 7, []), dispatch("w", 3, [VICTIM])], False),
        # Nothing known of the victim here (its attempt runs in another region).
        ([start(0, 3, cluster="q/c0"), dispatch("w", 3, [VICTIM])], False),
    ],
)
def test_a_victim_has_the_priority_of_what_its_rms_holds_under_its_name(
    events: list[Any], violated: bool
) -> None:
    out = ranks(*events)
    assert bool(out) == violated, out
    assert all(v.startswith("w (priority ") and " preempts v/j of priority " in v for v in out)


def test_the_checker_forgets_an_attempt_once_released_but_not_the_next_one() -> None:
    # A week of meta-day starts ~100k workloads' jobs: the checker must hold what the
    # live attempts need, not every attempt of the run. An older attempt's late release
    # leaves the newer attempt's record (and its verdict) alone.
    checker = PreemptionChecker()

    def feed(seq: int, type_: str, args: list[Any], result: Any) -> list[str]:
        return checker.observe(TraceEvent(seq, seq, "store", "x", "", type_, [args, result]))

    for n in range(50):
        feed(2 * n, "fleet.start", [FENCE, n, f"w{n}", "j", "r/c1", 5, [["m1", 8]], []], [1, 0])
        feed(2 * n + 1, "fleet.release", [FENCE, n, f"w{n}", "j", "DONE", 1], True)
    assert (checker.hosts, checker.started_us, checker.attempt, checker.live) == ({}, {}, {}, {})
    start = [FENCE, 100, "v", "j", "r/c1", 5, [["m1", 8]], []]
    feed(100, "fleet.start", start, [1, 0])
    feed(101, "fleet.start", [*start[:1], 101, *start[2:]], [2, 0])
    feed(102, "fleet.release", [FENCE, 102, "v", "j", "STOPPED", 1], True)  # attempt 1, late
    assert checker.hosts == {("v", "j"): {"m1"}} and checker.attempt == {("v", "j"): 2}
    feed(103, "fleet.state", [FENCE, 103, "v", "j", "RUNNING"], True)
    decision = {"workload": "w", "priority": 0, "victims": [VICTIM]}
    checker.observe(TraceEvent(104, 104, "decision", "rms/r/0", "", "rms.dispatch", decision))
    (violation,) = feed(105, "fleet.release", [FENCE, 105, "v", "j", "STOPPED", 2], True)
    assert "v/j released its machines before saving a checkpoint" in violation
    assert checker.hosts == {}
