"""The arithmetic of a MAST report: rounding, summary statistics, step functions, buckets.

Pure functions over plain numbers, so the figures' definitions in
`actors.mast.report.figures` read as arithmetic and can be tested alone.
Percentiles interpolate linearly between order statistics (numpy's default).
Figures go through `rounded`, which also turns NaN into None: JSON has no NaN.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from emulator.units import US_PER_S


def rounded(x: float | None, digits: int = 6) -> float | None:
    """`x` rounded to `digits` decimals as a float; None for None and NaN (JSON has no NaN)."""
    return None if x is None or math.isnan(x) else round(float(x), digits)


def stats(values: Sequence[float], *keys: str) -> dict[str, float | int | None]:
    """avg / median / p95 (those named in `keys`) and count of `values` (None when empty)."""
    arr = np.asarray(values, dtype=float)
    out: dict[str, float | int | None] = {"count": len(arr)}
    for key in keys:
        if not len(arr):
            out[key] = None
        elif key == "avg":
            out[key] = rounded(arr.mean())
        else:
            q = {"median": 50, "p95": 95}[key]
            out[key] = rounded(np.percentile(arr, q))
    return out


def step_integral(
    steps: Sequence[tuple[int, float]], end_us: int, bucket_us: int
) -> tuple[float, list[float]]:
    """Integral over [0, end_us) of a step function (0 before its first step), and bucket means.

    `steps` are (time, value from then on) in time order; the value holds
    until the next step. Returns the integral (value·µs) and the mean value
    of each bucket [k·bucket_us, (k+1)·bucket_us) cut at `end_us`.
    """
    n = max(1, math.ceil(end_us / bucket_us)) if end_us > 0 else 0
    area = [0.0] * n
    total = 0.0
    bounds = [*steps, (end_us, 0.0)]
    for (t0, value), (t1, _) in itertools.pairwise(bounds):
        a, b = max(0, t0), min(end_us, t1)
        if b <= a or value == 0:
            continue
        total += value * (b - a)
        k = a // bucket_us
        while a < b:
            edge = min(b, (k + 1) * bucket_us)
            area[k] += value * (edge - a)
            a, k = edge, k + 1
    widths = [min(end_us, (k + 1) * bucket_us) - k * bucket_us for k in range(n)]
    return total, [area[k] / widths[k] for k in range(n)]


def bucket_means(
    samples: Iterable[tuple[int, float]], end_us: int, bucket_us: int
) -> tuple[list[float], list[float]]:
    """Mean of point samples per bucket; buckets without samples are left out."""
    sums: dict[int, list[float]] = {}
    for t_us, value in samples:
        acc = sums.setdefault(min(t_us, max(0, end_us - 1)) // bucket_us, [0.0, 0.0])
        acc[0] += value
        acc[1] += 1
    keys = sorted(sums)
    return [k * bucket_us / US_PER_S for k in keys], [
        rounded(sums[k][0] / sums[k][1]) for k in keys
    ]


def distribution(counts: Iterable[int]) -> dict[str, Any]:
    """Mean and histogram (count → how many) of small integer counts."""
    values = list(counts)
    hist = Counter(values)
    return {
        "avg": rounded(sum(values) / len(values)) if values else None,
        "histogram": {str(k): hist[k] for k in sorted(hist)},
    }


def cdf(values: Sequence[float], points: int) -> list[float]:
    """`points` evenly spaced quantiles (0 … 1) of `values`, for plotting a CDF."""
    if not values:
        return []
    return [
        rounded(v, 3) for v in np.quantile(np.asarray(values, float), np.linspace(0, 1, points))
    ]


def nice_bucket_us(end_us: int, buckets: int) -> int:
    """A round bucket width (a whole number of minutes) giving at most `buckets` buckets."""
    minutes = max(1, math.ceil(end_us / buckets / 60 / US_PER_S))
    return minutes * 60 * US_PER_S
