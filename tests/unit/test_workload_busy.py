"""workload: busy periods of the generator (`GeneratorParams.busy`), a thinned Poisson process."""

from __future__ import annotations

import random
import re

import msgspec
import pytest

from actors.mast.workload.arrivals import BusyWindow, busy_factor, poisson_times
from actors.mast.workload.generator import GeneratorParams, generate
from actors.mast.workload.tenants import make_tenants
from actors.mast.world import preset
from emulator.units import US_PER_S, H

HOUR_S = H / US_PER_S  # the generator's windows are in seconds


def window(start_h: float, end_h: float, factor: float) -> BusyWindow:
    return BusyWindow(start_s=start_h * HOUR_S, end_s=end_h * HOUR_S, factor=factor)


OVERLAPPING = (window(1, 2, 3.0), window(1.5, 2.5, 2.0))


@pytest.mark.parametrize(
    ("t_h", "factor"),
    [
        (0.0, 1.0),  # before any window
        (1.0, 3.0),  # a window includes its start
        (1.5, 6.0),  # overlapping windows multiply: 3 · 2
        (2.0, 2.0),  # … and excludes its end: only the second is left
        (2.5, 1.0),
        (9.0, 1.0),
    ],
)
def test_busy_factor(t_h: float, factor: float) -> None:
    assert busy_factor(OVERLAPPING, t_h * HOUR_S) == factor


def _homogeneous(rng: random.Random, rate: float, span: float) -> list[float]:
    """The generator's arrival process as it was before busy periods existed."""
    times, t = [], rng.expovariate(rate)
    while t < span:
        times.append(t)
        t += rng.expovariate(rate)
    return times


def test_without_windows_the_draws_are_unchanged() -> None:
    # Same times from the same seed, and the stream is left in the same state, so
    # existing scenarios generate (and hash) exactly as before.
    a, b = random.Random(7), random.Random(7)
    assert poisson_times(a, 0.01, 20 * HOUR_S, 10_000) == _homogeneous(b, 0.01, 20 * HOUR_S)
    assert a.random() == b.random()
    assert GeneratorParams().busy == ()


@pytest.mark.parametrize(
    ("windows", "expected"),
    [
        # Base rate 100/h over 10 h. A 3x window over hours 2–4: inside 2·300 = 600
        # expected, outside 8·100 = 800.
        ((window(2, 4, 3.0),), {"inside": 600, "outside": 800}),
        # A quiet window (factor 0) empties hours 2–4; 800 outside.
        ((window(2, 4, 0.0),), {"inside": 0, "outside": 800}),
        # Factor 1 changes nothing in expectation: 200 inside, 800 outside.
        ((window(2, 4, 1.0),), {"inside": 200, "outside": 800}),
    ],
)
def test_windows_scale_the_arrival_rate(windows, expected) -> None:
    times = poisson_times(random.Random(3), 100 / HOUR_S, 10 * HOUR_S, 100_000, windows)
    inside = sum(2 * HOUR_S <= t < 4 * HOUR_S for t in times)
    counts = {"inside": inside, "outside": len(times) - inside}
    for key, mean in expected.items():
        # Poisson counts: within 4 standard deviations (sqrt of the mean).
        assert abs(counts[key] - mean) <= 4 * mean**0.5, (key, counts)
    assert times == sorted(times)


def test_generate_concentrates_submissions_in_the_window() -> None:
    world = preset("small")
    rng = random.Random(1)
    tenants = make_tenants(12, rng, world)
    base = GeneratorParams(workloads_per_day=2_400.0)  # 100 an hour
    busy = msgspec.structs.replace(base, busy=(window(2, 4, 4.0),))
    span = 8 * H
    plain, _ = generate(base, random.Random(5), tenants=tenants, world=world, span_us=span)
    loaded, _ = generate(busy, random.Random(5), tenants=tenants, world=world, span_us=span)

    def in_window(ws: list) -> int:
        return sum(2 * H <= w.submit_at_us < 4 * H for w in ws)

    # Expected in hours 2–4: 200 without the window, 800 with it; 600 elsewhere in both.
    assert abs(in_window(plain) - 200) <= 4 * 200**0.5
    assert abs(in_window(loaded) - 800) <= 4 * 800**0.5
    assert abs(len(loaded) - in_window(loaded) - 600) <= 4 * 600**0.5


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"start_s": 10, "end_s": 10, "factor": 2}, "ends (10.0) before it starts (10.0)"),
        ({"start_s": 0, "end_s": 10, "factor": -1}, "Expected `float` >= 0.0"),
        ({"start_s": -5, "end_s": 10, "factor": 2}, "Expected `float` >= 0.0"),
    ],
)
def test_bad_windows_are_rejected(raw, message) -> None:
    with pytest.raises(msgspec.ValidationError, match=re.escape(message)):
        msgspec.convert({"busy": [raw]}, GeneratorParams)
