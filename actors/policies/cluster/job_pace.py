"""How much of its work a running job does in a stretch of time, under the performance model.

Work is measured as the reference engine measures it: µs of run time on a
consolidated placement at the job's initial batch size, so a job's total
work is its trace `duration_us`. Where the job runs sets a `slowdown` (the
placement tier's communication cost, `perf_model.slowdown`); how far it is
sets the batch-size regime, whose `throughput` speeds it up. One µs of
emulated time in a regime does `throughput / slowdown` µs of work.

One run's clock (`segments`, `work_at`, `finish_at`) is the one arithmetic
of the reference engine, the job agent (its progress and when it finishes)
and the cluster scheduler (a running job's progress in its policy's view):
a run that makes progress from `active_us` with `done_us` of work already
done goes through its regimes in order, each segment ending at the previous
end plus its work × cost rounded up to a whole µs, so the three agree to the
µs on when a job finishes and, at any instant, on its exact progress. What a
stop keeps is `saved_work`: whole µs of work, as a checkpoint stores it.
`run_time_us` and `work_after` are the continuous forms (no rounding per
segment), which the progress checker uses as a bound. All are pure.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from actors.policies.cluster import perf_model
from actors.policies.cluster.api import BatchMode

__all__ = [
    "Segment",
    "batch_scale_at",
    "ceil_us",
    "finish_at",
    "run_time_us",
    "saved_work",
    "segments",
    "work_after",
    "work_at",
]


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


def ceil_us(x: float) -> int:
    """`x` µs rounded up to a whole µs (float noise, 1e6 * 1.1 = 1100000.0000000002, is not)."""
    return max(0, math.ceil(x - 1e-6))


class Segment(NamedTuple):
    """A stretch of one run in one regime: from `start_us` to `end_us`, work `done`→`target`."""

    start_us: int
    end_us: int
    done: float
    target: float
    cost: float  # emulated µs per µs of work


def segments(
    done_us: float, active_us: int, duration_us: int, mode: BatchMode, slowdown: float
) -> list[Segment]:
    """The regime segments left of a run making progress from `active_us` with `done_us` done."""
    _check(duration_us, slowdown)
    out = []
    t, done = active_us, float(done_us)
    for r in perf_model.regimes(mode):
        target = r.end * duration_us
        if done >= target:
            continue
        cost = slowdown / r.throughput
        end = t + ceil_us((target - done) * cost)
        out.append(Segment(t, end, done, target, cost))
        t, done = end, target
    return out


def work_at(
    done_us: float,
    active_us: int,
    now_us: int,
    duration_us: int,
    mode: BatchMode,
    slowdown: float,
) -> float:
    """Work done at `now_us` by the run of `segments` (`done_us` before `active_us`)."""
    done = float(done_us)
    for seg in segments(done_us, active_us, duration_us, mode, slowdown):
        if now_us < seg.end_us:
            return min(seg.target, seg.done + max(0, now_us - seg.start_us) / seg.cost)
        done = seg.target
    return done


def finish_at(
    done_us: float, active_us: int, duration_us: int, mode: BatchMode, slowdown: float
) -> int:
    """When the run of `segments` has done all `duration_us` of its work."""
    left = segments(done_us, active_us, duration_us, mode, slowdown)
    return left[-1].end_us if left else active_us


def saved_work(work_us: float) -> int:
    """What a checkpoint of `work_us` of work keeps: whole µs, rounded down."""
    return math.floor(work_us)


def batch_scale_at(mode: BatchMode, work_us: float, duration_us: int) -> int:
    """The batch-size multiple of a job of `mode` with `work_us` of its work done.

    The regime is the first whose end lies beyond the work done (the last at
    the end), compared in µs of work as `segments` does, never as a fraction.
    """
    rs = perf_model.regimes(mode)
    for r in rs:
        if work_us < r.end * duration_us:
            return r.batch_scale
    return rs[-1].batch_scale
