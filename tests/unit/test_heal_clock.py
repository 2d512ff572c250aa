"""When the faults stopped (`emulator.liveness.HealClock`), from a history's fault events.

Liveness and `no-lost-workload` judge only what happened after the final
heal; a window scheduled to end after the run's end (a crash restarting
later) must hold the heal back past the end, so nothing is judged.
"""

from __future__ import annotations

from typing import Any

import pytest

from emulator.liveness import HealClock
from emulator.trace import TraceEvent

CRASH = ("crash.start", {"actor": "rms/us-east/0", "index": 0})


def fault(t_us: int, type_: str, payload: Any = None) -> TraceEvent:
    return TraceEvent(0, t_us, "fault", "", "", type_, payload)


def until(type_: str, end_us: int) -> tuple[str, dict[str, Any]]:
    return type_, {"actor": "a/0", "until_us": end_us}


CASES = [
    pytest.param([], 0, id="no-faults-heal-at-start"),
    pytest.param([(10, *CRASH), (40, "crash.end", {"actor": "a/0"})], 40, id="last-event"),
    pytest.param([(10, *until("crash.start", 900))], 900, id="restart-after-the-end"),
    pytest.param([(10, *CRASH)], 10, id="crash-never-restarting-holds-nothing-back"),
    pytest.param(
        [(10, *until("crash.start", 900)), (50, "final-heal.end", None)],
        50,
        id="final-heal-restarts-it",
    ),
    pytest.param(
        [(10, *until("pause.start", 900)), (50, "final-heal.end", None)],
        900,
        id="final-heal-wakes-no-pause",
    ),
    pytest.param(
        [(10, *until("partition.start", 70)), (20, *until("loss.start", 30))],
        70,
        id="latest-end-of-all-windows",
    ),
    pytest.param([(10, "down", {"until_us": 500}), (20, "up", None)], 500, id="node-down"),
    pytest.param(
        [(10, *until("crash.start", 30)), (30, "crash.end", {"actor": "a/0"}), (80, "up", None)],
        80,
        id="events-after-every-window",
    ),
]


@pytest.mark.parametrize(("events", "heal_us"), CASES)
def test_the_final_heal_is_the_latest_end_of_a_window_or_fault_event(
    events: list[tuple[int, str, Any]], heal_us: int
) -> None:
    clock = HealClock()
    for t_us, type_, payload in events:
        clock.observe(fault(t_us, type_, payload))
    assert clock.heal_us == heal_us
