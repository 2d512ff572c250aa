"""The contract between cluster-level scheduling policies and the machinery that runs them.

A cluster policy (Tiresias, Dally, Shockwave, the baselines) sees one GPU
cluster as a frozen `ClusterView`: its machines, and every job that is
waiting or running with what it has attained so far. It answers with a
`Decision`: which running jobs to preempt (they checkpoint and go back to
the wait queue), which waiting jobs to start and on which GPUs, and when it
wants to be asked again even if nothing happens (the end of a Tiresias
queue's threshold, the next Shockwave round). A stateful policy takes its
state in and returns the next one, so a run replays exactly from the trace.

A start is an *offer*: the job's agent may turn it down (Dally's delay
scheduling) through `ClusterPolicy.accepts`, a pure function of the offer,
the job and the time; the offer's `note` carries what the agent needs to
decide (Dally's delay timers), so the agent holds no policy state.

Time is integer microseconds of emulated time. A job's `gpus` is its gang
size: it runs on exactly that many GPUs or not at all. Tiers of a placement
are `machine` (one host), `rack` (one rack) and `network` (several racks).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Protocol

import msgspec

Tier = Literal["machine", "rack", "network"]
BatchMode = Literal["static", "accordion", "gns"]
# What a finish-time-fairness contention factor counts per GPU: the jobs
# present, the GPUs they ask for, or the jobs of the whole trace (one factor
# for every job, as Gavel's and Shockwave's simulator computes it); see
# actors/cluster/metrics.py.
ContentionCount = Literal["jobs", "gpus", "trace"]
# How a job's gang finds GPUs: by the policy's own placement rules
# (consolidation, tiers) or anywhere enough GPUs are free (the Tiresias
# simulator's `--scheme count`). Semantics.placement sets it.
PlacementRule = Literal["topology", "count"]
# Tiresias-G's index: the paper's (and mastemu's) or the Tiresias simulator's.
GittinsVariant = Literal["paper", "tiresias-sim"]
# What a ranking policy (SRTF, Tiresias-G) does at equal rank: keep running
# jobs where they are, or re-sort by (rank, earliest submit) and reallocate
# every GPU in that order.
EqualRank = Literal["keep", "reallocate"]
# What SRTF's remaining time counts down: the job's work left (progress) or
# its duration minus the time it has held GPUs (the Tiresias simulator's).
RemainingClock = Literal["work", "held"]

__all__ = [
    "BatchMode",
    "ClusterPolicy",
    "ClusterView",
    "ContentionCount",
    "Decision",
    "EqualRank",
    "GittinsVariant",
    "JobView",
    "PlacementRule",
    "Regime",
    "RemainingClock",
    "Schedule",
    "Slot",
    "Start",
    "Tier",
    "TraceJob",
    "contention_now",
]


class _Frozen(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the Structs here (subclasses repeat `kw_only=True`: msgspec does not inherit it)."""


class Regime(_Frozen, kw_only=True):
    """A stretch of a job's work, [start, end) as progress fractions, at one batch size.

    `batch_scale` multiplies the job's initial batch size; `throughput` is
    progress speed relative to the initial batch size (epochs per second).
    """

    start: float
    end: float
    batch_scale: int
    throughput: float


# A job's batch-size schedule: one of the named modes (perf_model's regimes)
# or its own regimes, covering progress 0..1 (a peer's per-job pattern).
Schedule = BatchMode | tuple[Regime, ...]


class TraceJob(_Frozen, kw_only=True):
    """One job of a cluster trace, as generators and trace importers produce it.

    `duration_us` is the job's run time alone on a consolidated placement,
    without preemption, at its initial batch size (what Tiresias's trace
    calls `duration`); the performance model stretches it when the
    placement is spread or the batch size changes. `iterations` is the
    declared total (Dally's I_total-expected); `weight` is a priority weight
    (Shockwave traces). `batch_size` is the initial batch size the trace
    names (0: none, Shockwave Table 2's by model); `regimes`, when not
    empty, is the job's own batch-size schedule and replaces its mode's
    (a peer simulator's per-job pattern, `actors/cluster/batch_sizes.py`).
    `user` is who submitted it, when the trace says (no policy uses it).
    """

    job_id: str
    submit_us: int
    gpus: int
    model: str
    duration_us: int
    iterations: int = 0
    mode: BatchMode = "static"
    weight: float = 1.0
    batch_size: int = 0
    regimes: tuple[Regime, ...] = ()
    user: str = ""

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"job {self.job_id}: gpus must be >= 1, got {self.gpus}")
        if self.duration_us <= 0:
            raise ValueError(f"job {self.job_id}: duration must be > 0")
        if self.submit_us < 0:
            raise ValueError(f"job {self.job_id}: submit time must be >= 0")
        if self.batch_size < 0:
            raise ValueError(f"job {self.job_id}: batch size must be >= 0")
        if self.regimes and (self.regimes[0].start != 0.0 or self.regimes[-1].end != 1.0):
            raise ValueError(f"job {self.job_id}: regimes must cover progress 0..1")

    @property
    def schedule(self) -> Schedule:
        """The job's batch-size schedule: its own regimes, else its mode."""
        return self.regimes or self.mode


class Slot(_Frozen, kw_only=True):
    """One GPU machine: `gpus_free` of its `gpus_total` GPUs are not held by any job."""

    host: str
    rack: str
    gpus_total: int
    gpus_free: int
    gpu_type: str = "gpu"


class JobView(_Frozen, kw_only=True):
    """A job the cluster knows of, waiting (`placement == ()`) or running.

    Attained service is what Tiresias's 2D-LAS sorts on: GPUs × time run,
    summed over every run so far. `queued_since_us` is when the job last
    entered the wait queue (arrival or preemption); `first_start_us` is None
    until it first runs. `duration_us` is the oracle run time alone (for
    SRTF and finish-time fairness estimates); `progress` is the completed
    fraction of its work in 0..1. `slowdown` is the job's current iteration
    time over its consolidated iteration time (1.0 when consolidated or
    waiting), as the performance model gives it. `batch_size` is its
    current batch size and `initial_batch_size` the one it started with
    (0: Shockwave Table 2's for its model).
    """

    job_id: str
    gpus: int
    model: str
    submit_us: int
    queued_since_us: int
    duration_us: int
    first_start_us: int | None = None
    placement: tuple[tuple[str, int], ...] = ()
    attained_gpu_us: int = 0
    executed_us: int = 0
    progress: float = 0.0
    iterations: int = 0
    preemptions: int = 0
    slowdown: float = 1.0
    mode: BatchMode = "static"
    batch_size: int = 0
    weight: float = 1.0
    initial_batch_size: int = 0

    @property
    def running(self) -> bool:
        return bool(self.placement)


class ClusterView(_Frozen, kw_only=True):
    """The cluster at `now_us` as the scheduler saw it, and jobs finished since the last call.

    The run's conventions a policy must honour come with it (the scenario's
    `[system.semantics]`, see `actors/cluster/engine.py`'s Semantics):
    `ftf_contention`, so that policies aiming at finish-time fairness aim at
    the ρ the report will measure (`jobs_in_trace` is the trace's size, for
    `"trace"`); `placement`, `gittins`, `equal_rank` and `srtf_remaining`,
    the peer simulators' conventions the Tiresias policies and SRTF follow.
    """

    now_us: int
    machines: tuple[Slot, ...]
    jobs: tuple[JobView, ...]
    finished: tuple[JobView, ...] = ()
    round_us: int | None = None
    ftf_contention: ContentionCount = "jobs"
    jobs_in_trace: int = 0
    placement: PlacementRule = "topology"
    gittins: GittinsVariant = "paper"
    equal_rank: EqualRank = "keep"
    srtf_remaining: RemainingClock = "work"


def contention_now(view: ClusterView) -> float:
    """The view's contention factor before clamping: jobs (or GPUs they ask for) per GPU.

    With `ftf_contention = "trace"` it is the same at every instant: the
    trace's jobs over the cluster's GPUs.
    """
    total = sum(s.gpus_total for s in view.machines)
    if not total:
        return 1.0
    if view.ftf_contention == "trace":
        return view.jobs_in_trace / total
    asked = len(view.jobs) if view.ftf_contention == "jobs" else sum(j.gpus for j in view.jobs)
    return asked / total


class Start(_Frozen, kw_only=True):
    """An offer: run `job_id` on these (host, GPUs) pairs, at placement tier `tier`."""

    job_id: str
    placement: tuple[tuple[str, int], ...]
    tier: Tier
    note: tuple[tuple[str, float], ...] = ()


class Decision(_Frozen, kw_only=True):
    """What to do now: preemptions first (they free GPUs), then offers.

    An offer may only use GPUs that are free once the preemptions are done;
    `wake_at_us` asks for another call at that time if nothing else happens
    before (None: only on events).
    """

    preempt: tuple[str, ...] = ()
    start: tuple[Start, ...] = ()
    wake_at_us: int | None = None


class ClusterPolicy(Protocol):
    """A named cluster policy with validated parameters and explicit state.

    `name` is what a scenario's `policy = "…"` names; `Params` is a msgspec
    Struct whose defaults are the paper's; `initial_state` gives the state
    before the first call (any msgspec-encodable value, None for a stateless
    policy). `decide` must be pure: the same view, state and params give
    the same decision and next state.
    """

    name: ClassVar[str]
    Params: ClassVar[type[msgspec.Struct]]

    def initial_state(self, params: Any) -> Any: ...

    def decide(self, view: ClusterView, state: Any, params: Any) -> tuple[Decision, Any]: ...

    def accepts(self, offer: Start, job: JobView, now_us: int, params: Any) -> bool:
        """Whether the job's agent takes the offer (all but Dally: always)."""
        ...


class AcceptsEveryOffer:
    """Mixin for policies whose jobs take every offer (all but Dally)."""

    def accepts(self, offer: Start, job: JobView, now_us: int, params: Any) -> bool:
        del offer, job, now_us, params
        return True
