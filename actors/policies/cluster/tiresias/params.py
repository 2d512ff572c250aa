"""Parameters and state of the Tiresias policies (actors/policies/cluster/tiresias/policy.py).

Defaults are the paper's testbed settings (Tiresias §5.2): K = 2 queues
split at 3200 GPU-seconds, PROMOTEKNOB disabled.
"""

from __future__ import annotations

import math

import msgspec

from actors.policies.cluster.gittins import distribution

__all__ = ["GittinsParams", "Reset", "TiresiasParams", "TiresiasState"]

# Restart point of a job at its last promotion: (attained GPU-µs, executed µs,
# waited µs, promotion time µs).
Reset = tuple[int, int, int, int]


class TiresiasParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Knobs of Discretized 2DAS; defaults are the paper's testbed settings (§5.2).

    `promote_knob` None is PROMOTEKNOB = ∞ (promotion off, as in the
    testbed). `pack_limit` is compared with the model's largest-tensor share
    (perf_model.skew): any value in (0.233, 0.610) splits the known models
    as Tiresias Fig. 3 / Table 6 do (VGG and AlexNet consolidated); the
    paper learns it with a classifier, we fix 0.5. `preempt` False never
    preempts: queues then only order who starts next. `fifo_preempts`: in a
    queue ordered FIFO by start time (all of LAS's, Gittins's last), may a
    waiting job preempt a running one of the same queue that started after
    it? Pseudocode 2 read literally says yes; the authors' simulator keeps
    a queue's running jobs first (no), and so do we by default. Queues
    ordered by Gittins index always may (§5.2.4: Tiresias-G re-sorts them
    at every event, hence its extra preemptions). `wake_min_s` is the
    least delay of a self-requested wake-up (threshold crossing,
    promotion): a job started on GPUs still being checkpointed accrues no
    service until they are free, and without a floor the policy would ask
    to be woken every µs until then. Ours, not the paper's.
    `crossing_slack_s`: a running job this near (in its own run time) to
    its queue's threshold counts as past it. The actors start a job an
    offer's round trip (a few ms) after the decision that started it, the
    reference engine at the decision; at the wake-up asked for at the
    crossing, the job was that much short in the actors, kept the index of a
    spent quantum, and could take a demoted job's GPUs (the differential
    tests found a trace where the two runs parted by 33% in average JCT).
    Also ours; 0 reads the thresholds exactly.
    """

    queue_thresholds_gpu_s: tuple[float, ...] = (3200.0,)
    promote_knob: float | None = None
    pack_limit: float = 0.5
    preempt: bool = True
    fifo_preempts: bool = False
    wake_min_s: float = 1.0
    crossing_slack_s: float = 0.01

    def __post_init__(self) -> None:
        for i, t in enumerate(self.queue_thresholds_gpu_s):
            if not (t > 0 and math.isfinite(t)):
                raise ValueError(f"tiresias.queue_thresholds_gpu_s[{i}] must be > 0, got {t}")
            prev = self.queue_thresholds_gpu_s[i - 1] if i else 0.0
            if i and t <= prev:
                raise ValueError(
                    f"tiresias.queue_thresholds_gpu_s[{i}] must be > "
                    f"queue_thresholds_gpu_s[{i - 1}] = {prev}, got {t}"
                )
        if self.promote_knob is not None and not self.promote_knob > 0:
            raise ValueError(f"tiresias.promote_knob must be > 0 or None, got {self.promote_knob}")
        if not self.pack_limit >= 0:
            raise ValueError(f"tiresias.pack_limit must be >= 0, got {self.pack_limit}")
        if not self.wake_min_s > 0:
            raise ValueError(f"tiresias.wake_min_s must be > 0, got {self.wake_min_s}")
        if not 0 <= self.crossing_slack_s <= self.wake_min_s:
            raise ValueError(
                "tiresias.crossing_slack_s must be between 0 and wake_min_s "
                f"({self.wake_min_s}), got {self.crossing_slack_s}"
            )


class GittinsParams(TiresiasParams, kw_only=True):
    """Tiresias-G: a service distribution in GPU-seconds, or learn it from finished jobs.

    `service_values_gpu_s` with `service_probs` (empty: equal weights) is
    the operator's distribution; if empty, the last `history_jobs_max`
    finished jobs' services are used.
    """

    service_values_gpu_s: tuple[float, ...] = ()
    service_probs: tuple[float, ...] = ()
    history_jobs_max: int = 1000

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.service_probs and not self.service_values_gpu_s:
            raise ValueError("tiresias.service_probs given without service_values_gpu_s")
        if self.service_values_gpu_s:
            distribution(self.service_values_gpu_s, self.service_probs or None)  # raises if bad
        if self.history_jobs_max < 1:
            raise ValueError(f"tiresias.history_jobs_max must be >= 1, got {self.history_jobs_max}")


class TiresiasState(msgspec.Struct, frozen=True, kw_only=True):
    """Restart points of promoted jobs, and finished jobs' services (Tiresias-G only).

    `resets[job_id]` = (attained GPU-µs, executed µs, waited µs, time µs)
    at the job's last promotion; a job without an entry counts from zero.
    """

    resets: dict[str, Reset] = msgspec.field(default_factory=dict)
    services_gpu_s: tuple[float, ...] = ()
