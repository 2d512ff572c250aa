"""`refusals`: a workload's plans are not refused by its cluster without end.

A cluster manager refuses a plan (`cm.reject`) whose award is gone or whose
machines are no longer as the plan counted them: the RMS (or the cluster
scheduler) planned on a view of the cluster that had gone out of date. A
refusal tells it so, and its next plan for the workload should differ, or
wait for the machines. When the plans of one workload are refused
`REFUSALS_MAX` times in a row, none of its jobs starting in between, the
planner's view of the cluster does not converge: the run goes on, every
workload ends, and without this check it says `ok`. The case that made it
a check: seed 112 of `dally-cm-failover` under the faults of
`tests/system/test_refused_stand_in.py` refused the plans of one job 7,026
times in twelve emulated minutes (28,031 refusals in all), a job its
scheduler counted as stopped having started on the GPU they counted on.

Read from `cm.reject` and `cm.agent-start` decisions, which both systems'
CMs make; reported once per streak.
"""

from __future__ import annotations

from emulator.trace import TraceEvent
from emulator.units import format_us

# Far above what a lagging view costs: a plan refused because a victim's
# machines were still checkpointing is retried a handful of times at most.
REFUSALS_MAX = 100


class RefusalChecker:
    """Flags the workloads whose plans are refused `REFUSALS_MAX` times in a row."""

    name = "refusals"
    kinds = ("decision",)
    types = {"decision": frozenset({"cm.reject", "cm.agent-start"})}

    def __init__(self) -> None:
        # Workload -> (refusals in a row, the first one's time).
        self.streaks: dict[str, tuple[int, int]] = {}

    def observe(self, event: TraceEvent) -> list[str]:
        if event.type not in self.types["decision"]:
            return []  # a reader that ignores `types` feeds every decision
        workload = event.payload["workload"]
        if event.type == "cm.agent-start":
            self.streaks.pop(workload, None)
            return []
        count, since_us = self.streaks.get(workload, (0, event.t_us))
        count += 1
        self.streaks[workload] = (count, since_us)
        if count != REFUSALS_MAX:
            return []
        return [
            f"workload {workload}: {count} plans refused in a row since {format_us(since_us)}, "
            f"none of its jobs started (the last: {event.payload['why']})"
        ]

    def finish(self) -> list[str]:
        return []
