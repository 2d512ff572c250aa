"""What the cluster scheduler knows of each job of its trace, and the arithmetic of its runs.

One `JobAccount` per trace job, kept by the scheduler and written to the
store (`kv` namespace `cluster.jobs`) at every change of state, so a new
leader continues with the same attained service, preemption counts and time
split. States:

- `future`: not submitted yet; `waiting`: in the wait queue;
- `offered`: an offer is out to the job's agent, its GPUs reserved;
- `dispatching`: accepted, the plan is at the cluster manager;
- `running`: the CM started it (it holds its GPUs, restoring or training);
- `stopping`: a stop was ordered (a preemption: it saves a checkpoint);
- `done`, `failed`: over.

The time split follows the reference engine's (`actors/cluster/engine.py`):
queued + run + checkpoint = finish − submit, where run includes restores,
and communication overhead is the time training at a slowdown s costs over
training consolidated, active time × (1 − 1/s).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from actors.cluster.engine import JobResult
from actors.common.messages import Pace
from actors.policies.cluster import perf_model
from actors.policies.cluster.api import ClusterView, ContentionCount, JobView, Slot, Start, TraceJob
from actors.policies.cluster.job_pace import run_time_us, work_after
from store.mast.records import Machine

NAMESPACE = "cluster.jobs"
LIVE = ("offered", "dispatching", "running")  # hold (or reserve) GPUs the policy sees as taken


class JobAccount(msgspec.Struct, kw_only=True):
    """One job's state and its accumulated times (µs). The current run's fields are last."""

    job_id: str
    state: str = "future"
    queued_since_us: int = 0  # entered the wait queue (the policy's view: a preemption order)
    ready_us: int = 0  # could start from here (a preempted job: once its checkpoint is saved)
    first_start_us: int | None = None
    finish_us: int | None = None
    preemptions: int = 0
    executed_us: int = 0  # GPU-holding time of finished runs, checkpoints excluded
    queued_us: int = 0
    run_us: int = 0
    checkpoint_us: int = 0
    restore_us: int = 0
    comm_us: float = 0.0
    work_us: float = 0.0  # progress saved by the last checkpoint
    # the current run (offered, dispatching, running, stopping)
    placement: tuple[tuple[str, int], ...] = ()
    pace: Pace | None = None
    dispatch: int = 0  # the auction id the dispatch was recorded under
    begin_us: int = 0  # holds its GPUs from here (the CM started it)
    stop_us: int | None = None  # when the stop was ordered
    # an offer made while the job was still stopping: sent once it has stopped
    deferred: Start | None = None


def pace_for(t: TraceJob, slowdown: float, *, preemption_cost: bool) -> Pace:
    """The pace of a run of `t` at `slowdown`, with or without preemption/restore costs."""
    return Pace(
        slowdown=slowdown,
        mode=t.mode,
        restore_us=round(perf_model.restore_s(t.model, t.gpus) * 1e6) if preemption_cost else 0,
        checkpoint_us=round(perf_model.checkpoint_s(t.model) * 1e6) if preemption_cost else 0,
    )


def restore_of(a: JobAccount) -> int:
    """Restore time of the current run: only a job resuming from a checkpoint restores."""
    return a.pace.restore_us if a.pace is not None and a.work_us > 0 else 0


def progress_at(a: JobAccount, t: TraceJob, now_us: int) -> float:
    """Work done by `now_us` (µs of consolidated run time), as the job's agent computes it."""
    if a.state != "running" or a.pace is None:
        return a.work_us
    active = now_us - a.begin_us - restore_of(a)
    if active <= 0:
        return a.work_us
    return work_after(a.work_us, active, t.duration_us, a.pace.mode, a.pace.slowdown)


Placement = tuple[tuple[str, int], ...]


def view_of(a: JobAccount, t: TraceJob, now_us: int, placement: Placement) -> JobView:
    """The job as the policy sees it; `placement` is () for a waiting job."""
    held = max(0, now_us - a.begin_us) if a.state == "running" else 0
    work = progress_at(a, t, now_us)
    regime = perf_model.regime_at(t.mode, work / t.duration_us)
    return JobView(
        job_id=t.job_id,
        gpus=t.gpus,
        model=t.model,
        submit_us=t.submit_us,
        queued_since_us=a.queued_since_us,
        duration_us=t.duration_us,
        first_start_us=a.first_start_us,
        placement=placement,
        attained_gpu_us=(a.executed_us + held) * t.gpus,
        executed_us=a.executed_us + held,
        progress=min(1.0, work / t.duration_us),
        iterations=t.iterations,
        preemptions=a.preemptions,
        slowdown=a.pace.slowdown if placement and a.pace is not None else 1.0,
        mode=t.mode,
        batch_size=perf_model.base_batch_size(t.model) * regime.batch_scale,
        weight=t.weight,
    )


def merged(placement: Placement) -> Placement:
    """One entry per host, sorted: the form plans and views use."""
    out: dict[str, int] = {}
    for host, n in placement:
        out[host] = out.get(host, 0) + n
    return tuple(sorted(out.items()))


def policy_view(
    accounts: Mapping[str, JobAccount],
    trace: Mapping[str, TraceJob],
    machines: Iterable[tuple[Machine, bool]],
    now_us: int,
    gpu_type: str,
    round_us: int | None,
    finished: Iterable[JobView] = (),
    ftf_contention: ContentionCount = "jobs",
) -> ClusterView:
    """The snapshot a policy decides on; `finished`: the jobs done since the last one.

    Offered, dispatching and running jobs hold their GPUs; a stopping job is
    shown waiting and its GPUs free (as in the reference engine), unless an
    offer is held for it, whose GPUs it then holds.
    """
    held: dict[str, int] = {}
    jobs = []
    for job_id, a in accounts.items():
        t = trace[job_id]
        if a.state in LIVE or (a.state == "stopping" and a.deferred is not None):
            placement = a.placement if a.state in LIVE else merged(a.deferred.placement)
            for host, n in placement:
                held[host] = held.get(host, 0) + n
            jobs.append(view_of(a, t, now_us, placement))
        elif a.state in ("waiting", "stopping"):
            jobs.append(view_of(a, t, now_us, ()))
    slots = tuple(
        Slot(
            host=m.host,
            rack=m.rack,
            gpus_total=m.gpus,
            gpus_free=max(0, m.gpus - held.get(m.host, 0)) if healthy else 0,
            gpu_type=m.gpu_type or gpu_type,
        )
        for m, healthy in machines
    )
    return ClusterView(
        now_us=now_us,
        machines=slots,
        jobs=tuple(jobs),
        finished=tuple(finished),
        round_us=round_us,
        ftf_contention=ftf_contention,
    )


def stopping_on(accounts: Mapping[str, JobAccount], placement: Placement) -> list[str]:
    """The stopping jobs holding any host of `placement` (a plan's victims), sorted."""
    hosts = {h for h, _ in placement}
    return sorted(
        a.job_id
        for a in accounts.values()
        if a.state == "stopping" and hosts & {h for h, _ in a.placement}
    )


def close_run(a: JobAccount, now_us: int, saved_us: float, *, preempted: bool) -> None:
    """Add the run that ended at `now_us` (the CM reported it) to the job's times."""
    if a.state in ("running", "stopping") and a.begin_us:
        held = max(0, now_us - a.begin_us)
        restore = min(held, restore_of(a))
        stop = a.stop_us if a.stop_us is not None else now_us
        active = max(0, min(stop, now_us) - a.begin_us - restore)
        ckpt = 0
        if preempted and a.pace is not None and active > 0:
            ckpt = min(held - restore, max(0, now_us - stop), a.pace.checkpoint_us)
        a.run_us += held - ckpt
        a.executed_us += held - ckpt
        a.checkpoint_us += ckpt
        a.restore_us += restore
        if a.pace is not None:
            a.comm_us += active * (1.0 - 1.0 / a.pace.slowdown)
    a.work_us = max(a.work_us, saved_us)
    a.placement, a.pace, a.begin_us, a.stop_us = (), None, 0, None


def requeue(a: JobAccount, now_us: int, *, preempted: bool) -> None:
    """Back in the wait queue; a preemption counts and its queueing starts at the stop order."""
    since = a.stop_us if preempted and a.stop_us is not None else now_us
    a.state, a.queued_since_us, a.ready_us = "waiting", since, now_us
    if preempted:
        a.preemptions += 1


def result_of(a: JobAccount, t: TraceJob, end_us: int) -> JobResult:
    """The job's outcome for the metrics (`actors/cluster/metrics.py`), as of `end_us`."""
    queued = a.queued_us
    if a.state in ("waiting", "offered", "dispatching"):
        queued += max(0, end_us - a.ready_us)
    run = a.run_us + (max(0, end_us - a.begin_us) if a.state in ("running", "stopping") else 0)
    exclusive = run_time_us(0, t.duration_us, t.duration_us, t.mode, 1.0)
    return JobResult(
        job_id=t.job_id,
        gpus=t.gpus,
        model=t.model,
        submit_us=t.submit_us,
        first_start_us=a.first_start_us,
        finish_us=a.finish_us,
        preemptions=a.preemptions,
        comm_overhead_us=round(a.comm_us),
        failed=a.state == "failed",
        duration_us=t.duration_us,
        mode=t.mode,
        exclusive_us=exclusive,
        queued_us=queued,
        run_us=run,
        checkpoint_us=a.checkpoint_us,
        restore_us=a.restore_us,
    )
