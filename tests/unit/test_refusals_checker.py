"""The refusals checker on hand-written histories of CM decisions.

`r` is a refusal of one of the workload's plans (`cm.reject`), `s` a start of
one of its jobs (`cm.agent-start`); the checker flags a streak of
`REFUSALS_MAX` refusals of one workload with no start in between, once.
"""

from __future__ import annotations

import pytest

from actors.checks.refusals import REFUSALS_MAX, RefusalChecker
from emulator.trace import TraceEvent
from emulator.units import S


def run(history: list[tuple[str, str]]) -> list[str]:
    checker = RefusalChecker()
    found: list[str] = []
    for seq, (what, workload) in enumerate(history, 1):
        if what == "r":
            payload = {"workload": workload, "job": "j", "why": "machine m has 0 GPUs free"}
            found += checker.observe(
                TraceEvent(seq, seq * S, "decision", "cm", "", "cm.reject", payload)
            )
        else:
            payload = {"workload": workload, "job": "j", "attempt": 1, "progress_us": 0}
            event = TraceEvent(seq, seq * S, "decision", "cm", "", "cm.agent-start", payload)
            found += checker.observe(event)
    return found + checker.finish()


N = REFUSALS_MAX
CASES = [
    # (name, history, workloads flagged)
    ("one short of the bound", [("r", "w")] * (N - 1), []),
    ("the bound", [("r", "w")] * N, ["w"]),
    ("reported once per streak", [("r", "w")] * (3 * N), ["w"]),
    ("a start ends the streak", [("r", "w")] * (N - 1) + [("s", "w")] + [("r", "w")] * (N - 1), []),
    ("a new streak is reported again", ([("r", "w")] * N + [("s", "w")]) * 2, ["w", "w"]),
    (
        "another workload's start does not end it",
        [("r", "w")] * (N - 1) + [("s", "v"), ("r", "w")],
        ["w"],
    ),
    ("two workloads counted apart", [("r", "w"), ("r", "v")] * (N - 1), []),
    ("a start with no refusal before", [("s", "w")], []),
]


@pytest.mark.parametrize(("history", "flagged"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_streak_of_refusals_is_flagged_once(
    history: list[tuple[str, str]], flagged: list[str]
) -> None:
    found = run(history)
    assert [f.split(":")[0].removeprefix("workload ") for f in found] == flagged
    for message in found:
        assert f"{REFUSALS_MAX} plans refused in a row since" in message
        assert "machine m has 0 GPUs free" in message
