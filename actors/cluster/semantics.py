"""The simulator conventions a cluster-policy run follows, and the peer profiles that preset them.

Simulators in this field differ in conventions that move results by tens of
percent on one trace (docs/design.md §12). Each convention is a switch of
`Semantics` (`[system.semantics]` of a cluster scenario); the reference
engine (`actors/cluster/engine.py`) and the actor system (the scheduler,
`jobs.py`, the report) both read them, and policies see the ones they must
honour in their `ClusterView` (`view_fields`).

A profile presets every convention of one peer simulator at once:
`profile = "tiresias-sim"` (the Tiresias simulator, NSDI'19 artifact) or
`profile = "gavel-sim"` (Gavel's simulator as Shockwave's artifact runs it).
A switch given in the same table wins over its profile; a switch given by
neither takes the default below. The resolved values are what a run
records and its report lists (`PROFILES` says which profile sets what, and
the README's cluster section why).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from actors.policies.cluster import job_pace
from actors.policies.cluster.api import (
    ContentionCount,
    EqualRank,
    GittinsVariant,
    PlacementRule,
    RemainingClock,
    TraceJob,
)
from emulator.units import S

__all__ = ["DEFAULTS", "PROFILES", "Profile", "Semantics", "restart_overhead_us"]

Profile = Literal["none", "tiresias-sim", "gavel-sim"]

# What a switch is when neither the scenario nor its profile sets it: mastemu's
# own conventions (the papers' where they say, ours where they do not).
DEFAULTS: dict[str, Any] = {
    "scheduling": "event",
    "round_s": 120.0,
    "preemption_cost": True,
    "comm_model": True,
    "count_failed": True,
    "ftf_contention": "jobs",
    "placement": "topology",
    "gittins": "paper",
    "equal_rank": "keep",
    "srtf_remaining": "work",
    "percentiles": "linear",
    "batch_size": "model",
    "restart_overhead_s": 0.0,
    "one_gpu_servers": False,
}

PROFILES: dict[str, dict[str, Any]] = {
    "none": {},
    # SymbioticLab/Tiresias simulator/run_sim.py with `--scheme count`: one
    # decision per event, free preemption, GPUs counted not placed, SRTF on
    # duration − executed time, its Gittins index, every GPU reallocated in
    # (rank, submit) order, nearest-rank percentiles in its analyses.
    "tiresias-sim": {
        "scheduling": "event",
        "preemption_cost": False,
        "comm_model": False,
        "placement": "count",
        "gittins": "tiresias-sim",
        "equal_rank": "reallocate",
        "srtf_remaining": "held",
        "percentiles": "nearest-rank",
    },
    # Gavel's simulator as Shockwave's artifact runs it (scheduler/scheduler.py,
    # utils.py): 120 s rounds, a flat 20 s lost by every job that did not run
    # in the previous round instead of checkpoint/restore costs, batch sizes and
    # regime patterns from the trace's job types, one contention factor for the
    # whole trace, and its cluster spec of one-GPU servers.
    "gavel-sim": {
        "scheduling": "round",
        "round_s": 120.0,
        "preemption_cost": False,
        "comm_model": False,
        "restart_overhead_s": 20.0,
        "batch_size": "trace",
        "ftf_contention": "trace",
        "one_gpu_servers": True,
    },
}

# Put a limit on everything: an overhead longer than a day is a unit typo.
RESTART_OVERHEAD_S_MAX = 86_400.0


class Semantics(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The simulator conventions in force; reports state them (they move results by 25–75%).

    - `profile`: a peer simulator whose conventions the switches below
      default to (`PROFILES`); "none" is mastemu's own (`DEFAULTS`).
    - `scheduling` "event" | "round" with `round_s`: decide after every
      event, or only at round boundaries.
    - `preemption_cost`: a preempted job checkpoints and later restores
      (perf_model's costs); off, preemption is free.
    - `comm_model`: a gang spread over machines or racks runs slower
      (Dally Table I); off, placement costs nothing.
    - `count_failed`: jobs failed at arrival count in the averages as 0 s.
    - `ftf_contention` "jobs" | "gpus" | "trace": what finish-time
      fairness's contention factor N counts (actors/cluster/metrics.py).
    - `placement` "topology" | "count": policies place by their own rules
      (consolidation, tiers), or a job runs wherever enough GPUs are free.
    - `gittins` "paper" | "tiresias-sim": Tiresias-G's index (tiresias/).
    - `equal_rank` "keep" | "reallocate": at equal rank a running job keeps
      its GPUs, or SRTF and Tiresias-G re-sort by (rank, earliest submit)
      and reallocate every GPU in that order.
    - `srtf_remaining` "work" | "held": SRTF's remaining time is the work
      left, or duration minus the time the job has held GPUs.
    - `percentiles` "linear" | "nearest-rank": how reported percentiles
      pick between order statistics.
    - `batch_size` "model" | "trace": a job starts at Shockwave Table 2's
      batch size for its model with its mode's regimes, or at the batch
      size its trace names with the peer's per-job regime pattern
      (actors/cluster/batch_sizes.py).
    - `restart_overhead_s`: a run that starts without the job having run
      just before loses this long on its GPUs, not counted as busy time
      (Gavel's 20 s); with round scheduling a run that ends within its
      first round less 5 s is spared, as the peer spares it.
    - `one_gpu_servers`: the cluster's GPUs as that many one-GPU servers.
    - `control_latency` "default" | "zero": the actor system's control
      plane delivers at the instant of sending with "zero" (the engine has
      none); no profile sets it.

    Fields a scenario leaves out are filled at construction from the
    profile, then from `DEFAULTS`, so every instance holds concrete values.
    """

    profile: Profile = "none"
    scheduling: Literal["event", "round"] | UnsetType = UNSET
    round_s: float | UnsetType = UNSET
    preemption_cost: bool | UnsetType = UNSET
    comm_model: bool | UnsetType = UNSET
    count_failed: bool | UnsetType = UNSET
    ftf_contention: ContentionCount | UnsetType = UNSET
    placement: PlacementRule | UnsetType = UNSET
    gittins: GittinsVariant | UnsetType = UNSET
    equal_rank: EqualRank | UnsetType = UNSET
    srtf_remaining: RemainingClock | UnsetType = UNSET
    percentiles: Literal["linear", "nearest-rank"] | UnsetType = UNSET
    batch_size: Literal["model", "trace"] | UnsetType = UNSET
    restart_overhead_s: float | UnsetType = UNSET
    one_gpu_servers: bool | UnsetType = UNSET
    # The actor system's control plane: "zero" delivers every message at the
    # instant it is sent, so its decisions fall on the engine's instants (the
    # engine has no control plane: it always runs as if "zero").
    control_latency: Literal["default", "zero"] = "default"

    def __post_init__(self) -> None:
        preset = PROFILES[self.profile]
        for name, default in DEFAULTS.items():
            if getattr(self, name) is UNSET:
                msgspec.structs.force_setattr(self, name, preset.get(name, default))
        if not self.round_s > 0:  # type: ignore[operator]
            raise ValueError(f"semantics.round_s must be > 0, got {self.round_s}")
        overhead = self.restart_overhead_s
        if not 0 <= overhead <= RESTART_OVERHEAD_S_MAX:  # type: ignore[operator]
            raise ValueError(
                f"semantics.restart_overhead_s must be in 0..{RESTART_OVERHEAD_S_MAX:g}, "
                f"got {overhead}"
            )

    def view_fields(self) -> dict[str, Any]:
        """The conventions a policy must honour, as `ClusterView` keyword arguments."""
        return {
            "ftf_contention": self.ftf_contention,
            "placement": self.placement,
            "gittins": self.gittins,
            "equal_rank": self.equal_rank,
            "srtf_remaining": self.srtf_remaining,
        }

    def from_profile(self) -> dict[str, bool]:
        """Per switch, whether its value is the profile's preset (for the report)."""
        preset = PROFILES[self.profile]
        return {name: name in preset and getattr(self, name) == preset[name] for name in DEFAULTS}


# Gavel's simulator charges its restart overhead only to a round a job runs
# nearly in full (more than the round less this): a run about to end is spared.
ROUND_SLACK_S = 5.0


def restart_overhead_us(sem: Semantics, job: TraceJob, done_us: float, slowdown: float) -> int:
    """What a run of `job` starting with `done_us` of its work done loses to restarting.

    `Semantics.restart_overhead_s` (0: nothing); with round scheduling a run
    whose remaining work takes less than a round less ROUND_SLACK_S is
    spared, as Gavel's simulator spares it (it cuts the overhead from a
    round's progress only when the job ran more than that in the round).
    Both machineries charge it at the start of every run, the first one
    included: a job that did not run just before has to launch.
    """
    if not sem.restart_overhead_s:
        return 0
    if sem.scheduling == "round":
        d = job.duration_us
        left = job_pace.run_time_us(done_us, d, d, job.schedule, slowdown)
        if left < round((sem.round_s - ROUND_SLACK_S) * S):  # type: ignore[operator]
            return 0
    return round(sem.restart_overhead_s * S)  # type: ignore[operator]
