"""MAST's workload statistics as distributions given by a few percentiles.

The MAST paper gives its workload statistics as p50/p90/p99 only; each
preset below adds a p0 and a p100 anchor and is sampled by log-linear
interpolation of the inverse CDF (`actors.common.percentiles`, which says
why that keeps every reported percentile exact). The anchors are our
choice, not the paper's; each preset says why. The container setup time
(MAST §5.5) is drawn by every cluster manager, so it is with them
(`actors.common.cm.setup`).
"""

from __future__ import annotations

import math

from actors.common.percentiles import percentiles

MINUTE_S = 60.0
HOUR_S = 3600.0
DAY_S = 86_400.0

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
