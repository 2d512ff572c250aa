"""A campaign's run: what `sweep` and `explore` both watch while a seed runs.

Both judge a run by more than its invariants: the liveness watch (work that
never ran after the final heal) and the runaway cap (a livelock) see the run
as it goes, and each campaign adds its own observer of the kernel (a
sometimes tally, explore's coverage features). One place sets these up, so
the two campaigns cannot come to watch different things.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from emulator.kernel import Kernel
from emulator.liveness import LivenessWatch
from emulator.run.runaway import EventCap
from emulator.run.runner import RunPlan, RunResult, execute


@dataclass(frozen=True)
class WatchedRun:
    result: RunResult
    cap: EventCap
    watch: LivenessWatch

    @property
    def runaway(self) -> bool:
        return self.cap.tripped_at_us is not None


def run_watched(
    plan: RunPlan,
    seed: int,
    out: Path,
    events_max: int | None,
    on_kernel: Callable[[Kernel], None],
) -> WatchedRun:
    """Run `plan` to its end, stopped past `events_max` events; `on_kernel` sees
    the kernel before the first event."""
    cap = EventCap(events_max)
    watch = LivenessWatch()
    result = asyncio.run(
        execute(
            plan,
            seed=seed,
            out=out,
            progress=cap.check,
            on_kernel=on_kernel,
            on_setup=watch.attach,
        )
    )
    return WatchedRun(result, cap, watch)
