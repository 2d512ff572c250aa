"""The baselines Tiresias compares against (§5): YARN-CS, Best-effort, SRTF/SRSF and Gandiva.

- `fifo` — YARN's Capacity Scheduler as run in Microsoft's cluster
  (Tiresias §1, Table 2): jobs start in arrival order, non-preemptively,
  and only on the fewest machines that can hold them; the head job waits
  for such machines and blocks every job behind it (head-of-line blocking).
- `best-effort` — YARN-CS without head-of-line blocking (§5.3): a later
  job that fits starts in front of a blocked earlier one; same strict
  consolidation.
- `srtf` — the oracle of §5: preemptive shortest remaining time first on
  the trace's duration, `duration_us × (1 − progress)`; with
  `remaining="service"` it is SRSF (§3.2.1, Fig. 7), remaining time × GPUs.
- `gandiva` — Gandiva's time slicing (OSDI'18) as Tiresias characterises
  it: when jobs wait for GPUs, running jobs take turns by suspend/resume
  on a fixed quantum. Modelled as: every job that has run `quantum_s`
  since it last started is a candidate, and waiting jobs (longest waiting
  first) preempt candidates, longest running first, when that makes them
  fit; a preempted job rejoins the back of the wait queue. Out of scope:
  Gandiva's GPU sharing by packing several jobs on one GPU, its
  introspective migration, and its grow-shrink. The 60-s default quantum
  is our assumption, not a number from either paper.

`consolidate` picks the placement: True is the strict fewest-machines rule
(the baselines' production setting), False any free GPUs, tightest first;
a run with `placement = "count"` ignores it (any free GPUs). SRTF follows
two more of the run's conventions: `srtf_remaining` (what remaining time
counts down) and `equal_rank = "reallocate"` (see `remaining` and
`Srtf.decide`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import msgspec

from actors.policies.cluster.api import (
    AcceptsEveryOffer,
    ClusterView,
    Decision,
    JobView,
    RemainingClock,
    Slot,
)
from actors.policies.cluster.placement import Placement
from actors.policies.cluster.tiresias.placement import (
    Placer,
    anywhere,
    consolidated,
    reallocate_pass,
    run_pass,
)
from emulator.units import US_PER_S

__all__ = [
    "BestEffort",
    "Fifo",
    "FifoParams",
    "Gandiva",
    "GandivaParams",
    "GandivaState",
    "Srtf",
    "SrtfParams",
]


def _placer(consolidate: bool) -> Placer:
    def placer(machines: tuple[Slot, ...], job: JobView) -> Placement | None:
        return (consolidated if consolidate else anywhere)(machines, job.gpus)

    return placer


class FifoParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """YARN-CS / Best-effort: strict consolidation by default."""

    consolidate: bool = True


class SrtfParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`remaining`: "time" is SRTF, "service" (time × GPUs) is SRSF."""

    remaining: Literal["time", "service"] = "time"
    consolidate: bool = False


class GandivaParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`quantum_s`: how long a job runs before waiting jobs may take its GPUs."""

    quantum_s: float = 60.0
    consolidate: bool = False

    def __post_init__(self) -> None:
        if not self.quantum_s > 0:
            raise ValueError(f"gandiva.quantum_s must be > 0, got {self.quantum_s}")


class GandivaState(msgspec.Struct, frozen=True, kw_only=True):
    """When each running job's current time slice began."""

    slice_start_us: dict[str, int] = msgspec.field(default_factory=dict)


def _arrival(job: JobView) -> tuple[int, str]:
    return (job.submit_us, job.job_id)


class Fifo(AcceptsEveryOffer):
    """YARN-CS: arrival order, head-of-line blocking, no preemption."""

    name: ClassVar[str] = "fifo"
    Params: ClassVar[type] = FifoParams
    _blocking: ClassVar[bool] = True

    def initial_state(self, params: FifoParams) -> None:
        del params

    def decide(self, view: ClusterView, state: None, params: FifoParams) -> tuple[Decision, None]:
        order = sorted(view.jobs, key=_arrival)
        done = run_pass(
            view,
            order,
            _placer(params.consolidate),
            may_preempt=False,
            stop_at_blocked=self._blocking,
        )
        return Decision(start=done.start), state


class BestEffort(Fifo):
    """YARN-CS without head-of-line blocking: any later job that fits may start."""

    name: ClassVar[str] = "best-effort"
    _blocking: ClassVar[bool] = False


def remaining(job: JobView, params: SrtfParams, clock: RemainingClock = "work") -> float:
    """Oracle remaining time (µs) of the job's run alone, × GPUs for SRSF.

    `clock` is the run's `srtf_remaining` convention: "work" counts down the
    work left (progress, which placement slowdowns and batch-size speed-ups
    move), "held" the duration less the time the job has held GPUs (the
    Tiresias simulator's `duration − executed_time`).
    """
    if clock == "held":
        left = float(max(0, job.duration_us - job.executed_us))
    else:
        left = job.duration_us * (1.0 - job.progress)
    return left * job.gpus if params.remaining == "service" else left


class Srtf(AcceptsEveryOffer):
    """Preemptive shortest remaining time (or service) first, with perfect knowledge."""

    name: ClassVar[str] = "srtf"
    Params: ClassVar[type] = SrtfParams

    def initial_state(self, params: SrtfParams) -> None:
        del params

    def decide(self, view: ClusterView, state: None, params: SrtfParams) -> tuple[Decision, None]:
        clock = view.srtf_remaining
        if view.equal_rank == "reallocate":
            # The Tiresias simulator: by (remaining, earliest submit), every GPU handed out again.
            order = sorted(view.jobs, key=lambda j: (remaining(j, params, clock), *_arrival(j)))
            done = reallocate_pass(view, order, _placer(params.consolidate))
            return Decision(preempt=done.preempt, start=done.start), state
        # On a tie the running job goes first: swapping equals only costs a preemption.
        order = sorted(
            view.jobs, key=lambda j: (remaining(j, params, clock), not j.running, *_arrival(j))
        )
        done = run_pass(view, order, _placer(params.consolidate), may_preempt=True)
        # No wake-up needed: a running job's remaining work only shrinks, so a
        # waiting job can overtake it only on an arrival or a completion.
        return Decision(preempt=done.preempt, start=done.start), state


class Gandiva(AcceptsEveryOffer):
    """Time slicing: when jobs wait, running jobs past their quantum yield in turn."""

    name: ClassVar[str] = "gandiva"
    Params: ClassVar[type] = GandivaParams

    def initial_state(self, params: GandivaParams) -> GandivaState:
        del params
        return GandivaState()

    def decide(
        self, view: ClusterView, state: GandivaState, params: GandivaParams
    ) -> tuple[Decision, GandivaState]:
        now = view.now_us
        quantum_us = round(params.quantum_s * US_PER_S)
        running = [j for j in view.jobs if j.running]
        # A running job we never started (first call, or started elsewhere) begins its slice now.
        began = {j.job_id: state.slice_start_us.get(j.job_id, now) for j in running}
        expired = [j for j in running if now - began[j.job_id] >= quantum_us]
        # Order for the pass: jobs inside their slice (never preempted), then
        # waiting jobs longest waiting first, then expired jobs with the
        # longest running last, so it is the first to yield.
        current = [j for j in running if now - began[j.job_id] < quantum_us]
        waiting = sorted(
            (j for j in view.jobs if not j.running), key=lambda j: (j.queued_since_us, *_arrival(j))
        )
        expired.sort(key=lambda j: (-began[j.job_id], j.job_id))
        done = run_pass(
            view, [*current, *waiting, *expired], _placer(params.consolidate), may_preempt=True
        )
        stopped = set(done.preempt)
        slices = {k: v for k, v in began.items() if k not in stopped}
        slices.update((s.job_id, now) for s in done.start)
        started = {s.job_id for s in done.start}
        still_waiting = any(j.job_id not in started for j in waiting) or bool(stopped)
        ends = [t + quantum_us for t in slices.values() if t + quantum_us > now]
        wake = min(ends) if still_waiting and ends else None
        decision = Decision(preempt=done.preempt, start=done.start, wake_at_us=wake)
        return decision, GandivaState(slice_start_us=slices)
