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
from typing import Any, Literal

import msgspec

from actors.cluster.engine import JobResult
from actors.common.messages import Pace
from actors.policies.cluster import perf_model
from actors.policies.cluster.api import ClusterView, ContentionCount, JobView, Slot, Start, TraceJob
from actors.policies.cluster.job_pace import batch_scale_at, finish_at, saved_work, work_at
from emulator.errors import ComponentBug
from store.mast import fleet, queue
from store.mast.records import Machine

NAMESPACE = "cluster.jobs"
Claim = tuple[str, str, int]  # (stopping job, host, GPUs of it a start counts on)
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
    overhead_us: int = 0  # restart overhead of finished runs (Semantics.restart_overhead_s)
    work_us: float = 0.0  # progress saved by the last checkpoint
    # the current run (offered, dispatching, running, stopping)
    placement: tuple[tuple[str, int], ...] = ()
    pace: Pace | None = None
    dispatch: int = 0  # the auction id the dispatch was recorded under
    begin_us: int | None = None  # holds its GPUs from here (the CM started it)
    stop_us: int | None = None  # when the stop was ordered
    # an offer made while the job was still stopping: sent once it has stopped
    deferred: Start | None = None
    # The run about to begin (offered, dispatching, or deferred): the GPUs of
    # stopping jobs it counts on, (victim, host, GPUs), and when the last of
    # them is free — when it begins (`claims_for`).
    claims: tuple[Claim, ...] = ()
    begins_us: int | None = None
    # The claims the current run's dispatch had, kept once it began or was
    # preempted before its start was heard: until the scheduler hears those
    # victims' ends, their GPUs are the ones it stands in for (at its CM they
    # are its own, or still the victims' if it never started), counted once
    # (`claims_for`); a start counting on its GPUs names them as victims too
    # (`plan_victims`).
    stand_in: tuple[Claim, ...] = ()
    next_slowdown: float = 1.0  # of that run's placement (the offer's, before its pace)


def pace_for(t: TraceJob, slowdown: float, *, preemption_cost: bool, overhead_us: int = 0) -> Pace:
    """The pace of a run of `t` at `slowdown`, with or without preemption/restore costs.

    `overhead_us` is the run's restart overhead (`semantics.restart_overhead_us`).
    """
    return Pace(
        slowdown=slowdown,
        mode=t.schedule,
        overhead_us=overhead_us,
        restore_us=round(perf_model.restore_s(t.model, t.gpus) * 1e6) if preemption_cost else 0,
        checkpoint_us=round(perf_model.checkpoint_s(t.model) * 1e6) if preemption_cost else 0,
    )


def release_us(a: JobAccount) -> int:
    """When a stopping job that began its run lets its GPUs go.

    After its checkpoint if it made progress (the agent saves one only then,
    as the engine checkpoints only then); at once otherwise.
    """
    assert a.stop_us is not None and a.begin_us is not None
    progressed = a.stop_us > a.begin_us + restore_of(a)
    return a.stop_us + (a.pace.checkpoint_us if progressed and a.pace is not None else 0)


def restore_of(a: JobAccount) -> int:
    """Restore time of the current run: only a job resuming from a checkpoint restores.

    The restart overhead comes first in every run, a first one too.
    """
    if a.pace is None:
        return 0
    return (a.pace.restore_us if a.work_us > 0 else 0) + a.pace.overhead_us


def progress_at(a: JobAccount, t: TraceJob, now_us: int) -> float:
    """Work done by `now_us` (µs of consolidated run time), as the job's agent computes it.

    A stopping job's is what its checkpoint keeps of the work done at the stop
    order, as the engine keeps it from that instant on.
    """
    if a.state not in ("running", "stopping") or a.pace is None or a.begin_us is None:
        return a.work_us
    active_us = a.begin_us + restore_of(a)
    if a.state == "stopping" and a.stop_us is not None:
        at_stop = work_at(
            a.work_us, active_us, a.stop_us, t.duration_us, a.pace.mode, a.pace.slowdown
        )
        return max(a.work_us, saved_work(at_stop))
    return work_at(a.work_us, active_us, now_us, t.duration_us, a.pace.mode, a.pace.slowdown)


Placement = tuple[tuple[str, int], ...]


def initial_batch(t: TraceJob) -> int:
    """The batch size a job starts at: its trace's, else Shockwave Table 2's for its model."""
    return t.batch_size or perf_model.base_batch_size(t.model)


def view_of(a: JobAccount, t: TraceJob, now_us: int, placement: Placement) -> JobView:
    """The job as the policy sees it; `placement` is () for a waiting job.

    As the engine shows it: a stopping job from the stop order on (its run
    closed at that instant, one preemption more, queued since), a job whose
    run is about to begin from when it will begin, at its new placement's
    slowdown.
    """
    stopping = a.state == "stopping"
    held = 0
    if a.begin_us is not None and a.state == "running":
        held = max(0, now_us - a.begin_us)
    elif a.begin_us is not None and stopping and a.stop_us is not None:
        held = max(0, a.stop_us - a.begin_us)
    first_start = a.first_start_us
    if first_start is None and a.state in ("offered", "dispatching"):
        # As the engine shows a job started on draining GPUs: from when it will begin.
        first_start = a.begins_us
    slowdown = 1.0
    if placement:
        current = a.state in ("dispatching", "running") and a.pace is not None
        slowdown = a.pace.slowdown if current and a.pace is not None else a.next_slowdown
    work = progress_at(a, t, now_us)
    initial = initial_batch(t)
    return JobView(
        job_id=t.job_id,
        gpus=t.gpus,
        model=t.model,
        submit_us=t.submit_us,
        queued_since_us=a.stop_us if stopping and a.stop_us is not None else a.queued_since_us,
        duration_us=t.duration_us,
        first_start_us=first_start,
        placement=placement,
        attained_gpu_us=(a.executed_us + held) * t.gpus,
        executed_us=a.executed_us + held,
        progress=min(1.0, work / t.duration_us),
        iterations=t.iterations,
        preemptions=a.preemptions + (1 if stopping else 0),
        slowdown=slowdown,
        mode=t.mode,
        batch_size=initial * batch_scale_at(t.schedule, work, t.duration_us),
        weight=t.weight,
        initial_batch_size=initial,
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
    conventions: Mapping[str, Any] | None = None,
) -> ClusterView:
    """The snapshot a policy decides on; `finished`: the jobs done since the last one.

    `conventions` are the run's `Semantics.view_fields()` (they override
    `ftf_contention`); the view counts the whole trace in `jobs_in_trace`.

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
        jobs_in_trace=len(trace),
        **({"ftf_contention": ftf_contention} | dict(conventions or {})),
    )


def _pending_run(a: JobAccount) -> Placement | None:
    """The placement of the run `a` is about to begin (offered, dispatching, deferred)."""
    if a.state in ("offered", "dispatching"):
        return a.placement
    if a.state == "stopping" and a.deferred is not None:
        return merged(a.deferred.placement)
    return None


def claims_for(
    accounts: Mapping[str, JobAccount],
    placement: Placement,
    now_us: int,
    gpus_of: Mapping[str, int],
) -> tuple[tuple[Claim, ...], int]:
    """The stopping jobs' GPUs a start on `placement` counts on, and when it can begin.

    The reference engine's allocation (`_Engine._take`), over the accounts:
    on each host the free GPUs first — those neither held by a running or
    stopping job nor counted on by a run about to begin — then the GPUs of
    stopping jobs by the time they let them go (`release_us`), less what
    earlier starts count on. The plan's victims are those jobs, and it
    begins when the last of them has stopped: as in the engine, a start next
    to a checkpointing job on a host with GPUs enough to spare does not wait.
    """
    stopping = {
        a.job_id: a for a in accounts.values() if a.state == "stopping" and a.begin_us is not None
    }
    claimed: dict[tuple[str, str], int] = {}
    used: dict[str, int] = {}
    for a in accounts.values():
        if a.begin_us is not None and a.state in ("running", "stopping"):
            for host, n in a.placement:
                used[host] = used.get(host, 0) + n
            # The GPUs a run took (or will take) from victims still stopping are theirs
            # as long as they are (`stand_in`): counted once.
            for victim, host, n in a.stand_in:
                if victim in stopping:
                    claimed[(victim, host)] = claimed.get((victim, host), 0) + n
                    used[host] = used.get(host, 0) - n
        run = _pending_run(a)
        if run is None:
            continue
        on_victims: dict[str, int] = {}
        for victim, host, n in a.claims:
            if victim in stopping:
                claimed[(victim, host)] = claimed.get((victim, host), 0) + n
                on_victims[host] = on_victims.get(host, 0) + n
        for host, n in run:
            used[host] = used.get(host, 0) + n - on_victims.get(host, 0)
    claims: list[Claim] = []
    ready = now_us
    for host, need in placement:
        need -= min(need, max(0, gpus_of.get(host, 0) - used.get(host, 0)))
        draining = sorted(
            (_release_on(v, host, stopping), left, v.job_id)
            for v in stopping.values()
            for h, n in v.placement
            if h == host and (left := n - claimed.get((v.job_id, host), 0)) > 0
        )
        for release, left, victim in draining:
            if need <= 0:
                break
            take = min(need, left)
            need -= take
            claims.append((victim, host, take))
            ready = max(ready, release)
        if need > 0:
            # The policy's view is computed from the same accounts (`policy_view`).
            raise ComponentBug(f"{host}: a start counts on {need} GPUs nobody frees")
    return tuple(claims), ready


def _release_on(v: JobAccount, host: str, stopping: Mapping[str, JobAccount]) -> int:
    """When stopping `v` lets its GPUs on `host` go: a stand-in once its victims there have too."""
    waits = [stopping[w] for w, h, _ in v.stand_in if h == host and w in stopping]
    return max([release_us(v), *(release_us(w) for w in waits)])


def plan_victims(accounts: Mapping[str, JobAccount], claims: Iterable[Claim]) -> tuple[str, ...]:
    """The stopping jobs a plan with `claims` waits for: those it counts on, and the
    victims still stopping of any stand-in among them (transitively)."""
    out: set[str] = set()
    todo = [v for v, _, _ in claims]
    while todo:
        v = todo.pop()
        a = accounts.get(v)
        if v in out or a is None or a.state != "stopping":
            continue
        out.add(v)
        todo.extend(w for w, _, _ in a.stand_in)
    return tuple(sorted(out))


def hand_over(
    accounts: Mapping[str, JobAccount], ended: JobAccount, now_us: int
) -> list[JobAccount]:
    """`ended`'s run is over at `now_us` (call before `close_run`): what other runs
    counted on or took of its GPUs (`claims`, `stand_in`) is free now, or, where it
    stood in for a victim still stopping, that victim's.

    Left with a claim on a job no longer stopping, such a start would name no
    victim, and its CM would refuse it while the victim still holds the GPU;
    and once the job stopped again, in a later run, the stale claim would
    count on that run's GPUs. A start whose claims changed begins when the
    victims it still counts on have stopped (at once if none). Returns the
    other accounts it changed (to be saved).
    """
    inherited: dict[str, list[list[Any]]] = {}  # host -> [[victim, GPUs not yet passed on]]
    for victim, host, n in ended.stand_in:
        v = accounts.get(victim)
        if victim != ended.job_id and v is not None and v.state == "stopping":
            inherited.setdefault(host, []).append([victim, n])

    def passed_on(entries: tuple[Claim, ...]) -> tuple[Claim, ...]:
        out: list[Claim] = []
        for victim, host, n in entries:
            if victim != ended.job_id:
                out.append((victim, host, n))
                continue
            for entry in inherited.get(host, ()):
                take = min(n, entry[1])
                if take:
                    out.append((entry[0], host, take))
                    entry[1] -= take
                    n -= take
        return tuple(out)

    stopping = {
        a.job_id: a
        for a in accounts.values()
        if a is not ended and a.state == "stopping" and a.begin_us is not None
    }
    changed = []
    for b in accounts.values():
        before = (b.claims, b.stand_in)
        if any(victim == ended.job_id for victim, _, _ in b.claims):
            b.claims = passed_on(b.claims)
            if b.begins_us is not None:
                b.begins_us = max(
                    [now_us]
                    + [
                        _release_on(stopping[v], h, stopping)
                        for v, h, _ in b.claims
                        if v in stopping
                    ]
                )
        if b is not ended and any(victim == ended.job_id for victim, _, _ in b.stand_in):
            b.stand_in = passed_on(b.stand_in)
        if b is not ended and (b.claims, b.stand_in) != before:
            changed.append(b)
    return changed


def preempt(a: JobAccount, now_us: int) -> Literal["none", "withdraw", "stop"]:
    """The account after the policy preempted it at `now_us`; what the scheduler
    must do: withdraw an offer, order a stop, or nothing (a stop goes on)."""
    claims = a.claims
    a.claims, a.begins_us = (), None  # a run not begun yet counts on nothing now
    if a.state == "stopping":
        a.deferred = None  # the held offer is withdrawn; the stop goes on
        return "none"
    if a.state == "offered":
        # Not started yet: nothing to checkpoint.
        a.state, a.placement = "waiting", ()
        return "withdraw"
    if a.begin_us is None:
        # Dispatched, its start not heard yet (its CM slow): a start on its GPUs
        # waits for its stop, and for its victims' on those it took from them
        # (`claims_for`, `plan_victims`). It waited until now: that is queueing
        # (`begin_run` will not count it), and a start heard later counts from here.
        a.queued_us += max(0, now_us - a.ready_us)
        a.ready_us = now_us
        a.begin_us, a.stand_in = now_us, claims
    a.state, a.stop_us = "stopping", now_us
    return "stop"


def close_run(a: JobAccount, now_us: int, saved_us: float, *, preempted: bool) -> None:
    """Add the run that ended at `now_us` (the CM reported it) to the job's times."""
    if a.state in ("running", "stopping") and a.begin_us is not None:
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
            a.overhead_us += min(held, a.pace.overhead_us)
            a.comm_us += active * (1.0 - 1.0 / a.pace.slowdown)
    a.work_us = max(a.work_us, saved_us)
    a.placement, a.pace, a.begin_us, a.stop_us = (), None, None, None
    a.claims, a.begins_us, a.stand_in = (), None, ()


def requeue(a: JobAccount, now_us: int, *, preempted: bool, stop_us: int | None) -> None:
    """Back in the wait queue; a preemption counts and its queueing starts at the stop order.

    `stop_us` is when the stop was ordered (`close_run` has already cleared the run's).
    """
    since = stop_us if preempted and stop_us is not None else now_us
    a.state, a.queued_since_us, a.ready_us = "waiting", since, now_us
    if preempted:
        a.preemptions += 1


def begin_run(a: JobAccount, begin_us: int) -> None:
    """Its CM started the dispatched job at `begin_us`: it runs (its wait ends there)."""
    a.state, a.begin_us = "running", begin_us
    # Its victims have let their GPUs go at its CM, but their ends may not be
    # heard yet: until they are, the GPUs it took from them count once.
    a.stand_in = a.claims
    a.claims, a.begins_us = (), None
    a.queued_us += max(0, begin_us - a.ready_us)
    if a.first_start_us is None:
        a.first_start_us = begin_us


# What a new leader has left to do for a job once its account is rebuilt (`recovered`).
Recovery = Literal["began", "unheard", "stop", "stop-unheard", "done", "failed"] | None


def recovered(a: JobAccount, t: TraceJob, entry: str | None, row: fleet.JobRow | None) -> Recovery:
    """Set a saved account's state from the job queue's (`entry`) and the fleet's (`row`).

    The account was saved by the last leader; the queue and the fleet may have
    moved on since (its CM started or ended the job unheard). Returns what the
    new leader must still do: record a start (`began`), wait for an unheard
    dispatch (`unheard`), order the stop of a stopping job again, its order
    perhaps lost with the last leader's resends (`stop`; `stop-unheard` when
    its start was not heard either), or record an end the fleet has (`done`,
    `failed`).
    """
    live = row is not None and row.state in fleet.LIVE_JOB_STATES
    if entry is None:
        a.state = "future"
    elif entry in queue.QUEUED:
        if a.state == "future":
            a.queued_since_us = a.ready_us = t.submit_us
        a.state, a.deferred, a.placement = "waiting", None, ()
        a.claims, a.begins_us, a.stand_in = (), None, ()
    elif entry == "DISPATCHING":
        if a.state == "stopping":
            # Preempted before its start was heard (`begin_us` set at the order):
            # as a dispatching job, the policy would see its GPUs held twice over.
            return "stop" if live else "stop-unheard"
        a.state = "dispatching"
        return "began" if live else "unheard"
    elif entry == "RUNNING":
        if row is not None and row.state == "CHECKPOINTING":
            a.state = "stopping"
        elif not live:
            return "done" if row is not None and row.state == "DONE" else "failed"
        elif a.state != "stopping":
            if a.begin_us is None and row is not None and row.started_us is not None:
                begin_run(a, row.started_us)  # its start recorded, its account not saved after
            a.state = "running"
            return None
        return "stop"
    else:
        a.state = "done" if entry == "DONE" else "failed"
    return None


def result_of(a: JobAccount, t: TraceJob, end_us: int) -> JobResult:
    """The job's outcome for the metrics (`actors/cluster/metrics.py`), as of `end_us`."""
    queued = a.queued_us
    if a.state in ("waiting", "offered", "dispatching"):
        queued += max(0, end_us - a.ready_us)
    begun = a.begin_us is not None and a.state in ("running", "stopping")
    run = a.run_us + (max(0, end_us - a.begin_us) if begun and a.begin_us is not None else 0)
    exclusive = finish_at(0, 0, t.duration_us, t.schedule, 1.0)
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
        restart_overhead_us=a.overhead_us,
    )
