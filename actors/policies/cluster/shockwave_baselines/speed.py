"""A job's speed and remaining work as the Shockwave §8.2 baselines see them: reactively.

These baselines (and the Gavel-derived policies of the Shockwave artifact
they come from) know a job's throughput only as measured now, at its
current batch size (Shockwave §2.2 calls them "reactive"). `speedup` is that
throughput over the job's throughput at its initial batch size (1.0 for a
static job, up to 1.7 after three GNS doublings: `perf_model`); the rest of
its work at that speed takes `remaining_now_s` of run time alone. A job
whose batch size will still grow finishes sooner than that, which
Shockwave's predictor foresees and these policies do not.
"""

from __future__ import annotations

from actors.policies.cluster.api import JobView
from actors.policies.cluster.shockwave import predictor as pred
from actors.policies.cluster.shockwave.ftf import batch_scale
from emulator.units import US_PER_S

__all__ = ["remaining_now_s", "speedup"]


def speedup(job: JobView) -> float:
    """The job's throughput at its current batch size over that at its initial batch size."""
    return pred.throughput(batch_scale(job))


def remaining_now_s(job: JobView) -> float:
    """Run time alone, in seconds, of the job's remaining work at its current speed."""
    return max(0.0, 1.0 - job.progress) * job.duration_us / US_PER_S / speedup(job)
