"""Empirical distributions given by a few percentiles, as papers report them.

A paper (MAST's among them) often gives its statistics as p50/p90/p99 only.
To sample from them we add a p0 and a p100 anchor and interpolate the
inverse CDF log-linearly between neighbouring points: between (q1, v1) and
(q2, v2) the value at q is `v1 · (v2/v1) ** ((q - q1) / (q2 - q1))`.
Log-linear suits quantities that span orders of magnitude (20 minutes to 66
hours) and keeps every reported percentile exact: `quantile(0.5)` of the
GPU-duration distribution is 20 minutes to the last bit, and a monotone
rounding of a sample (whole GPUs, whole machines) keeps the reported
percentiles too.

Shared machinery: every cluster manager draws the container setup time from
one (`actors.common.cm.setup`), and MAST's workload statistics are given so.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PercentileDistribution:
    """Inverse-CDF sampler through `(quantile, value)` points, log-linear in between.

    The points must start at quantile 0 and end at quantile 1, with strictly
    increasing quantiles and positive, non-decreasing values.
    """

    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        pts = self.points
        if len(pts) < 2:
            raise ValueError("a percentile distribution needs at least the p0 and p100 points")
        if pts[0][0] != 0.0 or pts[-1][0] != 1.0:
            raise ValueError(f"points must run from quantile 0 to quantile 1, got {pts!r}")
        for (q1, v1), (q2, v2) in itertools.pairwise(pts):
            if not q1 < q2:
                raise ValueError(f"quantiles must increase strictly: {q1} then {q2}")
            if not (0.0 < v1 <= v2 and math.isfinite(v2)):
                raise ValueError(f"values must be positive, finite, non-decreasing: {v1} then {v2}")

    def quantile(self, q: float) -> float:
        """The value below which a fraction `q` of samples fall (`q` in [0, 1])."""
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q}")
        pts = self.points
        i = bisect.bisect_right([p[0] for p in pts], q) - 1
        if i >= len(pts) - 1:
            return pts[-1][1]
        (q1, v1), (q2, v2) = pts[i], pts[i + 1]
        if q == q1:  # exact at every anchor, no floating-point detour
            return v1
        return v1 * (v2 / v1) ** ((q - q1) / (q2 - q1))

    def sample(self, rng: random.Random) -> float:
        """One draw: the quantile at a uniform random level (one `rng.random()` call)."""
        return self.quantile(rng.random())


def percentiles(
    p0: float, p50: float, p90: float, p99: float, p100: float
) -> PercentileDistribution:
    """The common case: the paper's p50/p90/p99 between our p0/p100 anchors."""
    return PercentileDistribution(((0.0, p0), (0.5, p50), (0.9, p90), (0.99, p99), (1.0, p100)))
