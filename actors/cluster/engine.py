"""The reference single-cluster engine: runs a cluster policy over a job trace in emulated time.

A discrete-event loop over integer microseconds. Events are arrivals
(`TraceJob.submit_us`), the end of a job's work, and the policy's
`wake_at_us`. In `event`
scheduling the policy decides after every arrival, completion and requested
wake-up (all events at one instant are applied first, then one decision); in
`round` scheduling it decides only at multiples of `round_s` (a running job
keeps its lease unless preempted; `wake_at_us` is ignored).

What a decision does, in order: validate it whole (a preempt of a job not
running, an offer of a job not waiting, an offer over the GPUs free after the
preemptions, or a placement looser than its stated tier raises
`PolicyContractError` naming policy and job); preempt; ask `policy.accepts`
for each offer in order and start the accepted ones.

Performance: a running job does `1 / (duration × slowdown / throughput)` of
its work per µs, where `slowdown` comes from the placement tier (with
`comm_model`) and `throughput` from its batch-size regime (perf_model), by
the run clock the job agents use too (`job_pace.segments`: each regime's
stretch rounded up to a whole µs); a preempted job keeps its work in whole µs.
Preemption cost (with `preemption_cost`): a preempted job that made progress
checkpoints for `checkpoint_s(model)`, during which its GPUs stay held: the
policy already sees them as free (it may offer them in the same decision),
but a job started on them begins only when the checkpoint ends. The victim
is back in the wait queue at once but cannot begin before its own checkpoint
is written; its next run first spends `restore_s(model, gpus)` holding its
GPUs without progress. A job started on draining GPUs shows as running at
once, with `first_start_us` the instant it actually begins. For every
finished job, `finish - submit == queued_us + run_us + checkpoint_us`
(`run_us` includes restores).

A job wider than the whole cluster is failed at arrival. Ties are broken by
(time, kind, job_id); the same input gives the same result.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from actors.cluster.semantics import Semantics, restart_overhead_us
from actors.policies.cluster import job_pace, perf_model
from actors.policies.cluster.api import (
    ClusterPolicy,
    ClusterView,
    JobView,
    Slot,
    TraceJob,
)
from actors.policies.cluster.decision import check_decision
from actors.policies.cluster.placement import tier_of
from emulator.errors import ComponentBug, PolicyContractError
from emulator.units import S

__all__ = [
    "JobResult",
    "Semantics",
    "SimResult",
    "cluster_of",
    "simulate",
]

SAME_INSTANT_DECISIONS_MAX = 1_000  # wake-ups at one instant before we call it a livelock
IDLE_DECISIONS_MAX = 10_000  # decisions leaving an idle cluster idle before we stop


class JobResult(msgspec.Struct, frozen=True, kw_only=True):
    """One job's outcome. Times are µs; `exclusive_us` is its run time alone, consolidated."""

    job_id: str
    gpus: int
    model: str
    submit_us: int
    first_start_us: int | None
    finish_us: int | None
    preemptions: int
    comm_overhead_us: int
    failed: bool
    duration_us: int = 0
    mode: str = "static"
    exclusive_us: int = 0
    queued_us: int = 0
    run_us: int = 0
    checkpoint_us: int = 0
    restore_us: int = 0
    restart_overhead_us: int = 0  # of `restore_us`: Semantics.restart_overhead_s, not busy time


class SimResult(msgspec.Struct, frozen=True, kw_only=True):
    """A run: every job's result, the GPU-time held, and the conventions in force.

    `makespan_us` runs from the first submission to the last finish (or to
    `end_us` if a job is unfinished); `gpu_busy_us` is GPU-µs held by jobs
    running, restoring or checkpointing; `stalled` says the run stopped because
    the policy left an idle cluster idle for IDLE_DECISIONS_MAX decisions.
    """

    policy: str
    semantics: Semantics
    jobs: tuple[JobResult, ...]
    makespan_us: int
    end_us: int
    gpus_total: int
    gpu_busy_us: int
    decisions: int
    stalled: bool = False


DEFAULT_SEMANTICS = Semantics()


def cluster_of(
    machines: int, gpus_per_machine: int, machines_per_rack: int, gpu_type: str = "gpu"
) -> tuple[Slot, ...]:
    """An idle cluster: hosts m000, m001, … filled into racks r00, r01, … in order."""
    if machines < 1 or gpus_per_machine < 1 or machines_per_rack < 1:
        raise ValueError("cluster_of: machines, gpus_per_machine, machines_per_rack must be >= 1")
    return tuple(
        Slot(
            host=f"m{i:03d}",
            rack=f"r{i // machines_per_rack:02d}",
            gpus_total=gpus_per_machine,
            gpus_free=gpus_per_machine,
            gpu_type=gpu_type,
        )
        for i in range(machines)
    )


@dataclass(slots=True)
class _Job:
    t: TraceJob
    base_batch: int
    state: str = "pending"  # pending, waiting, running, done, failed
    ready_at: int = 0  # earliest begin of the next run (its checkpoint is written)
    queued_since: int = 0
    placement: tuple[tuple[str, int], ...] = ()
    slowdown: float = 1.0
    begin: int = 0  # holds its GPUs from here
    active: int = 0  # makes progress from here (after restore)
    done: float = 0.0  # work done at `active`, in µs of consolidated initial-batch run time
    version: int = 0
    first_start: int | None = None
    finish: int | None = None
    preemptions: int = 0
    executed: int = 0
    queued: int = 0
    run: int = 0
    ckpt: int = 0
    restore: int = 0
    comm: float = 0.0
    needs_restore: bool = False
    took: list[tuple[str, int, int]] = field(default_factory=list)  # `_Engine._take`
    overhead: int = 0  # of the current run: Semantics.restart_overhead_s
    overhead_total: int = 0
    view: JobView | None = None

    def work_at(self, now: int) -> float:
        if self.state != "running":
            return self.done
        t = self.t
        return job_pace.work_at(
            self.done, self.active, now, t.duration_us, t.schedule, self.slowdown
        )


def _exclusive_us(j: _Job) -> int:
    """Run time alone, consolidated: the engine's own arithmetic, segment by segment."""
    d = j.t.duration_us
    return job_pace.finish_at(0, 0, d, j.t.schedule, 1.0)


@dataclass(slots=True)
class _Engine:
    policy: Any
    params: Any
    sem: Semantics
    machines: tuple[Slot, ...]
    free: dict[str, int] = field(default_factory=dict)
    draining: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    slots: dict[str, Slot] = field(default_factory=dict)
    rack_of: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, _Job] = field(default_factory=dict)
    present: dict[str, _Job] = field(default_factory=dict)  # waiting or running, arrival order
    heap: list[tuple[int, int, str, int]] = field(default_factory=list)
    finished: list[JobView] = field(default_factory=list)
    gpu_busy: int = 0
    decisions: int = 0

    # --- GPUs --------------------------------------------------------------
    def _slot(self, host: str) -> Slot:
        s = self.slots[host]
        free = self.free[host] + sum(n for _, n in self.draining[host])
        if s.gpus_free != free:
            s = self.slots[host] = msgspec.structs.replace(s, gpus_free=free)
        return s

    def _take(self, host: str, n: int, now: int, took: list[tuple[str, int, int]]) -> int:
        """Allocate `n` GPUs on `host`; the time the last of them stops draining.

        Free GPUs first, then draining ones by release time. What was taken,
        (host, release, GPUs), goes to `took`: a job stopped before it began
        gives it back as it was (`_stop`).
        """
        pending = sorted(self.draining[host])
        while pending and pending[0][0] <= now:
            self.free[host] += pending.pop(0)[1]
        got = min(n, self.free[host])
        self.free[host] -= got
        if got:
            took.append((host, now, got))
        n -= got
        ready = now
        while n > 0:
            if not pending:
                raise ComponentBug(f"{host}: allocation beyond its free GPUs")
            release, k = pending.pop(0)
            used = min(k, n)
            n -= used
            ready = max(ready, release)
            took.append((host, release, used))
            if k > used:
                pending.insert(0, (release, k - used))
        self.draining[host] = pending
        return ready

    def _release(self, placement: tuple[tuple[str, int], ...], until: int, now: int) -> None:
        for host, n in placement:
            if until > now:
                self.draining[host].append((until, n))
            else:
                self.free[host] += n
            if self._slot(host).gpus_free > self.slots[host].gpus_total:
                raise ComponentBug(f"{host}: more GPUs free than it has")

    # --- job life ------------------------------------------------------------
    def _view(self, j: _Job, now: int) -> JobView:
        if j.view is not None and j.state != "running":
            return j.view
        t, running = j.t, j.state == "running"
        held = max(0, now - j.begin) if running else 0
        work = j.work_at(now)
        v = JobView(
            job_id=t.job_id,
            gpus=t.gpus,
            model=t.model,
            submit_us=t.submit_us,
            queued_since_us=j.queued_since,
            duration_us=t.duration_us,
            first_start_us=j.first_start,
            placement=j.placement if running else (),
            attained_gpu_us=(j.executed + held) * t.gpus,
            executed_us=j.executed + held,
            progress=min(1.0, work / t.duration_us),
            iterations=t.iterations,
            preemptions=j.preemptions,
            slowdown=j.slowdown if running else 1.0,
            mode=t.mode,
            batch_size=j.base_batch * job_pace.batch_scale_at(t.schedule, work, t.duration_us),
            weight=t.weight,
            initial_batch_size=j.base_batch,
        )
        j.view = v
        return v

    def _schedule_finish(self, j: _Job) -> None:
        t = j.t
        end = job_pace.finish_at(j.done, j.active, t.duration_us, t.schedule, j.slowdown)
        heapq.heappush(self.heap, (end, 0, t.job_id, j.version))

    def _start(self, j: _Job, placement: tuple[tuple[str, int], ...], now: int) -> None:
        j.took = []
        begin = max([now, j.ready_at] + [self._take(h, n, now, j.took) for h, n in placement])
        restore = 0
        if j.needs_restore and self.sem.preemption_cost:
            restore = round(perf_model.restore_s(j.t.model, j.t.gpus) * S)
        tier = tier_of(placement, self.rack_of)
        j.slowdown = perf_model.slowdown(j.t.model, tier, j.t.gpus) if self.sem.comm_model else 1.0
        j.overhead = restart_overhead_us(self.sem, j.t, j.done, j.slowdown)
        restore += j.overhead
        j.state, j.placement, j.begin = "running", placement, begin
        j.active = begin + restore
        j.queued += begin - j.ready_at
        if j.first_start is None:
            j.first_start = begin
        j.version += 1
        j.view = None
        self._schedule_finish(j)

    def _stop(self, j: _Job, now: int, *, preempt: bool) -> None:
        """Close the current run at `now` (finish or preemption) and release its GPUs.

        A preempted job keeps its work in whole µs, as the job agent's
        checkpoint does (`job_pace.saved_work`), with or without its cost.
        """
        j.done = job_pace.saved_work(j.work_at(now)) if preempt else j.work_at(now)
        held = max(0, now - j.begin)
        j.run += held
        j.executed += held
        j.restore += max(0, min(now, j.active) - j.begin)
        j.comm += max(0, now - j.active) * (1.0 - 1.0 / j.slowdown)
        if now < j.begin:  # stopped before its GPUs were even free: keep only the queueing so far
            j.queued -= (j.begin - j.ready_at) - max(0, now - j.ready_at)
            if j.first_start == j.begin:
                j.first_start = None  # that start never came: its first is still ahead
        ckpt = 0
        if preempt and self.sem.preemption_cost and now > j.active:
            ckpt = round(perf_model.checkpoint_s(j.t.model) * S)
            j.needs_restore = True
        j.ckpt += ckpt
        overhead = min(held, j.overhead)  # lost to the restart, not busy time
        j.overhead_total += overhead
        self.gpu_busy += j.t.gpus * (held + ckpt - overhead)
        if now < j.begin:
            # It never held its GPUs: what it took comes back as it was, the
            # free ones free and the draining ones draining until their release
            # (as the cluster manager drops a plan still waiting for its victims).
            for host, release, n in j.took:
                self._release(((host, n),), release, now)
        else:
            self._release(j.placement, now + ckpt, now)
        j.placement, j.slowdown, j.view, j.took = (), 1.0, None, []
        j.version += 1
        if preempt:
            j.state, j.queued_since, j.ready_at = "waiting", now, max(j.ready_at, now + ckpt)
            j.preemptions += 1

    def _finish(self, j: _Job, now: int) -> None:
        """The job did all its work (`job_pace.finish_at`)."""
        self._stop(j, now, preempt=False)
        j.done, j.state, j.finish = float(j.t.duration_us), "done", now
        self.finished.append(self._view(j, now))
        del self.present[j.t.job_id]

    def _arrive(self, j: _Job, total: int) -> None:
        if j.t.gpus > total:
            j.state = "failed"
            return
        j.state, j.queued_since, j.ready_at = "waiting", j.t.submit_us, j.t.submit_us
        self.present[j.t.job_id] = j

    # --- decisions -----------------------------------------------------------
    def decide(self, state: Any, now: int) -> tuple[Any, int | None, bool]:
        """One policy call at `now`: returns next state, wake time, and whether anything changed."""
        round_us = round(self.sem.round_s * S) if self.sem.scheduling == "round" else None
        view = ClusterView(
            now_us=now,
            machines=tuple(self._slot(s.host) for s in self.machines),
            jobs=tuple(self._view(j, now) for j in self.present.values()),
            finished=tuple(self.finished),
            round_us=round_us,
            jobs_in_trace=len(self.jobs),
            **self.sem.view_fields(),
        )
        self.finished = []
        self.decisions += 1
        decision, state = self.policy.decide(view, state, self.params)
        check_decision(self.policy.name, view, decision, self.rack_of)
        victims = {job_id: self.present[job_id] for job_id in decision.preempt}
        for j in victims.values():
            self._stop(j, now, preempt=True)
        changed = bool(victims)
        for offer in decision.start:
            j = self.present[offer.job_id]
            if self.policy.accepts(offer, self._view(j, now), now, self.params):
                merged: dict[str, int] = defaultdict(int)
                for host, n in offer.placement:
                    merged[host] += n
                self._start(j, tuple(sorted(merged.items())), now)
                changed = True
        return state, decision.wake_at_us, changed


def simulate(
    policy: ClusterPolicy,
    params: Any,
    jobs: Sequence[TraceJob],
    machines: Sequence[Slot],
    semantics: Semantics = DEFAULT_SEMANTICS,
    *,
    until_us: int | None = None,
) -> SimResult:
    """Run `policy` over `jobs` on `machines` (all idle at time 0) and report every job."""
    eng = _Engine(policy=policy, params=params, sem=semantics, machines=tuple(machines))
    for s in eng.machines:
        if s.host in eng.slots:
            raise ValueError(f"machine {s.host!r} listed twice")
        eng.slots[s.host] = msgspec.structs.replace(s, gpus_free=s.gpus_total)
        eng.free[s.host], eng.rack_of[s.host] = s.gpus_total, s.rack
    total = sum(s.gpus_total for s in eng.machines)
    for t in jobs:
        if t.job_id in eng.jobs:
            raise ValueError(f"job {t.job_id!r} listed twice")
        eng.jobs[t.job_id] = _Job(
            t=t, base_batch=t.batch_size or perf_model.base_batch_size(t.model)
        )
        heapq.heappush(eng.heap, (t.submit_us, 1, t.job_id, 0))
    round_us = round(semantics.round_s * S) if semantics.scheduling == "round" else None
    state = policy.initial_state(params)
    wake: int | None = None
    next_round = 0
    now = last_decision = 0
    same_instant = idle = 0
    stalled = False
    while True:
        # A finish event of a run since stopped (preempted, or rescheduled) is
        # dropped here, not reached: time must not move to it. Otherwise a run
        # whose last job ended at 397 s would end at a stale event at 816 s.
        while eng.heap and eng.heap[0][1] == 0:
            _, _, job_id, version = eng.heap[0]
            j = eng.jobs[job_id]
            if j.state == "running" and j.version == version:
                break
            heapq.heappop(eng.heap)
        if not eng.present and not eng.heap:
            break  # nothing left to run or to arrive: wake-ups cannot change anything
        if round_us is not None:
            if not eng.present:  # skip empty rounds up to the next arrival
                next_round = max(next_round, -(-eng.heap[0][0] // round_us) * round_us)
            nxt = min(eng.heap[0][0], next_round) if eng.heap else next_round
        else:
            candidates = [x for x in (eng.heap[0][0] if eng.heap else None, wake) if x is not None]
            if not candidates:
                break
            nxt = max(now, min(candidates))
        if until_us is not None and nxt > until_us:
            now = until_us
            break
        now = nxt
        happened = False  # an arrival or a completion at this instant
        while eng.heap and eng.heap[0][0] == now:
            _, kind, job_id, version = heapq.heappop(eng.heap)
            j = eng.jobs[job_id]
            if kind == 1:
                eng._arrive(j, total)
                happened = happened or j.state == "waiting"
            elif j.state == "running" and j.version == version:
                eng._finish(j, now)
                happened = True
        if round_us is not None:
            if now != next_round:
                continue
            next_round += round_us
            if not eng.present:
                # Its only arrivals failed (wider than the cluster): an empty round
                # is no decision, as in the actors (a call on no jobs moves
                # Shockwave's contention integral).
                continue
        else:
            woken = wake is not None and wake <= now
            if woken:
                wake = None
            if not (happened or woken):
                continue
        same_instant = same_instant + 1 if now == last_decision and eng.decisions else 0
        if same_instant > SAME_INSTANT_DECISIONS_MAX:
            raise PolicyContractError(
                f"policy {policy.name!r} asked to decide {same_instant} times at t={now} µs "
                "without time moving: it keeps waking itself at the same instant"
            )
        last_decision = now
        state, wake, changed = eng.decide(state, now)
        if round_us is not None:
            wake = None
        busy = changed or happened or any(j.state == "running" for j in eng.present.values())
        idle = 0 if busy else idle + 1
        if idle > IDLE_DECISIONS_MAX:
            stalled = True
            break
    end = now
    results = []
    for j in eng.jobs.values():
        if j.state == "running":
            eng._stop(j, end, preempt=False)
        elif j.state == "waiting":
            j.queued += max(0, end - j.ready_at)
        t = j.t
        results.append(
            JobResult(
                job_id=t.job_id,
                gpus=t.gpus,
                model=t.model,
                submit_us=t.submit_us,
                first_start_us=j.first_start,
                finish_us=j.finish,
                preemptions=j.preemptions,
                comm_overhead_us=round(j.comm),
                failed=j.state == "failed",
                duration_us=t.duration_us,
                mode=t.mode,
                exclusive_us=_exclusive_us(j),
                queued_us=j.queued,
                run_us=j.run,
                checkpoint_us=j.ckpt,
                restore_us=j.restore,
                restart_overhead_us=j.overhead_total,
            )
        )
    live = [r for r in results if not r.failed]
    makespan = 0
    if live:
        done = [r.finish_us for r in live if r.finish_us is not None]
        last = end if len(done) < len(live) else max(done)
        makespan = last - min(r.submit_us for r in live)
    return SimResult(
        policy=policy.name,
        semantics=semantics,
        jobs=tuple(results),
        makespan_us=makespan,
        end_us=end,
        gpus_total=total,
        gpu_busy_us=eng.gpu_busy,
        decisions=eng.decisions,
        stalled=stalled,
    )
