"""Empirical distributions given by a few percentiles, as MAST reports them.

The MAST paper gives its workload statistics as p50/p90/p99 only. To sample
from them we add a p0 and a p100 anchor and interpolate the inverse CDF
log-linearly between neighbouring points: between (q1, v1) and (q2, v2) the
value at q is `v1 · (v2/v1) ** ((q - q1) / (q2 - q1))`. Log-linear suits
quantities that span orders of magnitude (20 minutes to 66 hours) and keeps
every reported percentile exact: `quantile(0.5)` of the GPU-duration
distribution is 20 minutes to the last bit, and a monotone rounding of a
sample (whole GPUs, whole machines) keeps the reported percentiles too.

The anchors are our choice, not the paper's; each preset below says why.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass

MINUTE_S = 60.0
HOUR_S = 3600.0
DAY_S = 86_400.0


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


# MAST §5.1: machines (GPU + CPU) per workload, p50/p90/p99 = 72/180/205.
# p0 = 1: the smallest workload is one GPU machine. p100 = 1,024: the largest
# workloads (LLM pre-training) are far beyond p99; the generator caps every
# draw at what one region can hold.
MACHINES_PER_WORKLOAD = percentiles(1, 72, 180, 205, 1_024)

# MAST §5.1: GPUs per GPU workload, p50/p90/p99 = 16/64/128. p0 = 1 (every
# training job holds at least one whole GPU, §2); p100 = 4,096, a stand-in
# for "tens of thousands" that the world caps anyway. Samples are rounded to
# valid counts by `round_gpus`.
GPUS_PER_GPU_WORKLOAD = percentiles(1, 16, 64, 128, 4_096)

# MAST §5.1: execution time until the next preemption, GPU workloads,
# p50/p90/p99 = 20 min / 6.7 h / 66 h. p0 = 1 min (shorter runs are tests,
# not training); p100 = 14 days.
GPU_DURATION_S = percentiles(1 * MINUTE_S, 20 * MINUTE_S, 6.7 * HOUR_S, 66 * HOUR_S, 14 * DAY_S)

# Same for CPU workloads, p50/p90/p99 = 38 min / 7.9 h / 38 h. p0 = 1 min;
# p100 = 7 days (the CPU tail is shorter than the GPU tail in the paper).
CPU_DURATION_S = percentiles(1 * MINUTE_S, 38 * MINUTE_S, 7.9 * HOUR_S, 38 * HOUR_S, 7 * DAY_S)

# MAST §5.5: acquiring and setting up a workload's containers,
# p50/p90/p99 = 150/278/449 s. p0 = 60 s (image pull and start of a warm
# host); p100 = 900 s ("10 minutes or longer" for massive LLM jobs).
SETUP_S = percentiles(60, 150, 278, 449, 900)

# MAST §2, Fig. 3: distinct workloads per data partition, p50/p90/p99 =
# 3/17/45. p0 = 1 (a table no workload reads is not in the figure); p100 =
# 150 for the very hottest tables.
WORKLOADS_PER_TABLE = percentiles(1, 3, 17, 45, 150)

# MAST §3.3: data-replication size, p50/p90/p99 = 565 MB / 103 GB / 7.5 TB,
# used as table sizes. p0 = 1 MB; p100 = 50 TB.
_MB, _GB, _TB = 1e6, 1e9, 1e12
TABLE_SIZE_BYTES = percentiles(1 * _MB, 565 * _MB, 103 * _GB, 7.5 * _TB, 50 * _TB)


def round_gpus(x: float) -> int:
    """The valid GPU count nearest to `x`: 1, 2, 4, 8, then multiples of 8.

    Below 8 the nearest power of two in log space; from 8 on the nearest
    multiple of 8. The rounding is monotone, so it keeps the percentiles.
    """
    if x < 8.0:
        return 2 ** min(3, max(0, round(math.log2(max(x, 1.0)))))
    return 8 * max(1, round(x / 8.0))


def floor_gpus(x: float) -> int:
    """The largest valid GPU count not above `x` (at least 1)."""
    if x < 8.0:
        return 2 ** max(0, math.floor(math.log2(max(x, 1.0))))
    return 8 * math.floor(x / 8.0)
