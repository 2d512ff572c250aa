"""The figures a cluster-policy report shows, computed from one `SimResult`.

- `jct_s`: finish − submit of every finished job (avg, median, p95; the
  percentiles interpolate linearly between order statistics, or with
  `Semantics.percentiles = "nearest-rank"` are the nearest-rank values).
- `queueing_delay_s`: time a finished job spent in the wait queue: submit to
  first start, plus, after each preemption, the end of its checkpoint to its
  next start. Checkpoint and restore time are not queueing: they are in
  `preemption_overhead_s`.
- With `Semantics.count_failed`, a job failed at arrival (wider than the
  cluster) counts in both lists with 0 s (it left the system at once, as in
  simulators that drop unplaceable jobs); without it, it is left out.
- `makespan_s`, `utilization` (GPU-time held by running, restoring and
  checkpointing jobs over GPU-time available during the makespan).
- `preemptions`, `preemption_overhead_s` (job-seconds of checkpoint + restore,
  the restart overhead of `Semantics.restart_overhead_s` included; that
  overhead alone is `restart_overhead_s` and is not busy GPU time),
  `comm_overhead_s` (job-seconds lost to communication slowdown: run time
  minus what it would have been at slowdown 1).
- `ftf`: finish-time fairness ρ as Shockwave defines it (§2.1, App. G):
  ρ = t_schedule / t_egalitarian with t_schedule the job's JCT and
  t_egalitarian = t_exclusive · N, where t_exclusive is its run time alone on
  a consolidated placement under its own batch-size schedule (`exclusive_us`)
  and N is its contention factor: the number of jobs in the cluster
  (waiting or running) over the number of GPUs, averaged over time from the
  job's submission to its finish, and never below 1 (with fewer jobs than
  GPUs an equal share is the whole request, as Shockwave's own evaluation
  code clamps it). With `Semantics.ftf_contention = "gpus"` N counts the
  GPUs those jobs ask for instead of the jobs: t_egalitarian is then the
  finish time under demand-proportional sharing, which a cluster can give
  every job at once. Counting jobs (App. G's words, the default), the
  egalitarian shares add up to the mean gang size times the cluster, so
  with multi-GPU gangs some jobs must end above 1 under any policy, and a
  policy that equalises ρ (Shockwave) ends nearly all of them just above it.
  With `"trace"` N is one number for every job, the trace's jobs over the
  GPUs (Gavel's and Shockwave's simulator: `num_jobs_in_trace / num_gpus`).
  `worst` is the largest ρ, `unfair_fraction` the share of finished jobs
  with ρ > 1 (beyond `UNFAIR_SLACK`: in the actor machinery a job alone on
  the cluster still pays milliseconds of control-plane latency, which must
  not make it unfair). Unfinished and failed jobs have no ρ.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec

from actors.cluster.engine import JobResult, SimResult
from emulator.units import S

__all__ = ["contention_factors", "percentile", "rho", "summarize"]


def percentile(values: Sequence[float], p: float, method: str = "linear") -> float:
    """The p-th percentile (0..100); 0.0 for no values.

    "linear" interpolates between the order statistics around rank
    (n − 1)·p/100 (numpy's default); "nearest-rank" is the smallest value
    with at least p% of the values at or below it, x[⌈n·p/100⌉ − 1] (1-based
    rank ⌈n·p/100⌉, never below 1), as the Tiresias simulator's analyses
    report p95: always one of the values.
    """
    if not values:
        return 0.0
    xs = sorted(values)
    if method == "nearest-rank":
        # Rounded first: 0.95 × 20 is 19.000000000000004 in floats, rank 19, not 20.
        rank = math.ceil(round(len(xs) * p / 100, 9))
        return xs[min(len(xs), max(1, rank)) - 1]
    rank = (len(xs) - 1) * p / 100
    lo = int(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def _stats(values: Sequence[float], method: str = "linear") -> dict[str, float]:
    avg = sum(values) / len(values) if values else 0.0
    return {
        "avg": avg,
        "median": percentile(values, 50, method),
        "p95": percentile(values, 95, method),
    }


def contention_factors(result: SimResult) -> dict[str, float]:
    """N_avg per finished job: mean jobs (or GPUs asked) present over its life / GPUs, ≥ 1.

    With `ftf_contention = "trace"` every finished job gets the same
    factor, the trace's jobs (failed ones included: the peer counts the
    trace) over the cluster's GPUs, never below 1.
    """
    live = [r for r in result.jobs if not r.failed]
    if result.semantics.ftf_contention == "trace":
        n = max(1.0, len(result.jobs) / result.gpus_total) if result.gpus_total else 1.0
        return {r.job_id: n for r in live if r.finish_us is not None and r.finish_us > r.submit_us}
    by_gpus = result.semantics.ftf_contention == "gpus"
    # n(t) = jobs (or their GPUs) submitted and not yet finished. Every submission and finish
    # is a change point of n, so the running integral I(t) at each change
    # point gives every job's time-average as (I(finish) - I(submit)) / JCT.
    deltas: dict[int, int] = defaultdict(int)
    for r in live:
        # A job still unfinished is present until the run ends (not at all if
        # it was to arrive after that).
        end = max(r.submit_us, result.end_us) if r.finish_us is None else r.finish_us
        weight = r.gpus if by_gpus else 1
        deltas[r.submit_us] += weight
        deltas[end] -= weight
    area: dict[int, int] = {}
    count = acc = 0
    prev = min(deltas, default=0)
    for t in sorted(deltas):
        acc += count * (t - prev)
        count += deltas[t]
        area[t] = acc
        prev = t
    out = {}
    for r in live:
        if r.finish_us is None or r.finish_us <= r.submit_us:
            continue
        present_avg = (area[r.finish_us] - area[r.submit_us]) / (r.finish_us - r.submit_us)
        out[r.job_id] = max(1.0, present_avg / result.gpus_total)
    return out


# ρ up to 1.001 counts as fair: 0.1% of a two-minute job is 120 ms, far above
# the few milliseconds an offer, a plan and an agent's start take.
UNFAIR_SLACK = 1e-3


def rho(job: JobResult, contention: float) -> float:
    """Finish-time fairness of a finished job given its contention factor N."""
    if job.finish_us is None:
        raise ValueError(f"job {job.job_id} has no finish time")
    return (job.finish_us - job.submit_us) / (job.exclusive_us * contention)


def summarize(result: SimResult) -> dict[str, Any]:
    """Every report figure of one run, in seconds; see the module docstring for definitions."""
    done = [r for r in result.jobs if not r.failed and r.finish_us is not None]
    failed = [r for r in result.jobs if r.failed]
    zeros = [0.0] * len(failed) if result.semantics.count_failed else []
    jct = [(r.finish_us - r.submit_us) / S for r in done if r.finish_us is not None] + zeros
    queued = [r.queued_us / S for r in done] + zeros
    method = str(result.semantics.percentiles)
    n_avg = contention_factors(result)
    rhos = [rho(r, n_avg[r.job_id]) for r in done]
    makespan = result.makespan_us
    available = result.gpus_total * makespan
    return {
        "jct_s": _stats(jct, method),
        "queueing_delay_s": _stats(queued, method),
        "makespan_s": makespan / S,
        "preemptions": sum(r.preemptions for r in result.jobs),
        "preemption_overhead_s": sum(r.checkpoint_us + r.restore_us for r in result.jobs) / S,
        "restart_overhead_s": sum(r.restart_overhead_us for r in result.jobs) / S,
        "comm_overhead_s": sum(r.comm_overhead_us for r in result.jobs) / S,
        "utilization": result.gpu_busy_us / available if available else 0.0,
        "ftf": {
            "worst": max(rhos, default=0.0),
            "unfair_fraction": sum(x > 1.0 + UNFAIR_SLACK for x in rhos) / len(rhos)
            if rhos
            else 0.0,
        },
        "finished": len(done),
        "unfinished": sum(1 for r in result.jobs if not r.failed and r.finish_us is None),
        "failed": len(failed),
        "semantics": msgspec.to_builtins(result.semantics),
    }
