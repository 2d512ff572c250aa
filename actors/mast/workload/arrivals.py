"""Arrival times of workloads: a Poisson process, busier or quieter in windows.

Busy periods (`busy` of the generator's parameters): inside each
`BusyWindow` the arrival rate is multiplied by its `factor` (overlapping
windows multiply). The process is thinned (Lewis–Shedler): candidates are
drawn at the peak rate and each is kept with probability rate(t)/peak, which
gives an inhomogeneous Poisson process with that rate. The generator uses it
for first-time arrivals and for the phases of recurring templates (their
later re-submissions keep their phase). Without windows no extra random
draws are made, so a generator without `busy` produces exactly what it did
before.

Everything is a pure function of the `random.Random` passed in.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Annotated

import msgspec
from msgspec import Meta


class BusyWindow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Arrivals at `factor` times the base rate during [start_s, end_s) of the span."""

    start_s: Annotated[float, Meta(ge=0.0)]
    end_s: Annotated[float, Meta(gt=0.0)]
    factor: Annotated[float, Meta(ge=0.0, le=1_000.0)]

    def __post_init__(self) -> None:
        if not self.end_s > self.start_s:
            raise ValueError(f"busy window ends ({self.end_s}) before it starts ({self.start_s})")


def busy_factor(windows: Sequence[BusyWindow], t_s: float) -> float:
    """The arrival-rate multiplier at time `t_s` (1 outside every window)."""
    factor = 1.0
    for w in windows:
        if w.start_s <= t_s < w.end_s:
            factor *= w.factor
    return factor


def poisson_times(
    rng: random.Random,
    rate_per_s: float,
    span_s: float,
    limit: int,
    busy: Sequence[BusyWindow] = (),
) -> list[float]:
    """Arrival times in [0, span_s) of a Poisson process; at most `limit` of them.

    With `busy` windows the rate is `rate_per_s · busy_factor(t)`, by thinning
    a process at the peak rate (see the module docstring).
    """
    times: list[float] = []
    peak = 1.0
    if busy:
        edges = [0.0, *(w.start_s for w in busy), *(w.end_s for w in busy)]
        peak = max(busy_factor(busy, t) for t in edges)
    if rate_per_s <= 0.0 or peak <= 0.0:
        return times
    t = rng.expovariate(rate_per_s * peak)
    while t < span_s:
        if not busy or rng.random() * peak < busy_factor(busy, t):
            if len(times) >= limit:
                raise ValueError(f"more than {limit:,} workloads in the span; raise workloads_max")
            times.append(t)
        t += rng.expovariate(rate_per_s * peak)
    return times
