"""How much of its work a running job does in a stretch of time, under the performance model.

Work is measured as the reference engine measures it: µs of run time on a
consolidated placement at the job's initial batch size, so a job's total
work is its trace `duration_us`. Where the job runs sets a `slowdown` (the
placement tier's communication cost, `perf_model.slowdown`); how far it is
sets the batch-size regime, whose `throughput` speeds it up. One µs of
emulated time in a regime does `throughput / slowdown` µs of work.

The job agent uses these to know its progress and when it finishes; the
cluster scheduler uses them to estimate a running job's progress for its
policy. Both are pure: the same arguments give the same numbers.
"""

from __future__ import annotations

import math

from actors.policies.cluster import perf_model
from actors.policies.cluster.api import BatchMode

__all__ = ["run_time_us", "work_after"]


def _check(duration_us: int, slowdown: float) -> None:
    if duration_us <= 0:
        raise ValueError(f"duration_us must be > 0, got {duration_us}")
    if not slowdown >= 1.0:
        raise ValueError(f"slowdown must be >= 1.0, got {slowdown}")


def run_time_us(
    done_us: float, target_us: float, duration_us: int, mode: BatchMode, slowdown: float
) -> int:
    """Emulated µs to take the job's work from `done_us` to `target_us` (rounded up)."""
    _check(duration_us, slowdown)
    total = 0.0
    for r in perf_model.regimes(mode):
        lo, hi = max(done_us, r.start * duration_us), min(target_us, r.end * duration_us)
        if hi > lo:
            total += (hi - lo) * slowdown / r.throughput
    # Float noise (1e6 * 1.1 = 1100000.0000000002) must not cost a whole µs.
    return max(0, math.ceil(total - 1e-6))


def work_after(
    done_us: float, elapsed_us: int, duration_us: int, mode: BatchMode, slowdown: float
) -> float:
    """Work done after running `elapsed_us` from `done_us`, capped at `duration_us`."""
    _check(duration_us, slowdown)
    left = float(elapsed_us)
    done = float(done_us)
    for r in perf_model.regimes(mode):
        end = r.end * duration_us
        if done >= end or left <= 0:
            continue
        cost = slowdown / r.throughput  # emulated µs per µs of work
        step = min(end - done, left / cost)
        done += step
        left -= step * cost
    return min(float(duration_us), done)
