"""Reports of MAST runs: what `mastemu report` and `mastemu compare` show.

A report is one JSON-able dict built from a run database: the store's tables
(final workload states, tenants, machines), the metric samples the actors
recorded, and ONE pass over the trace. What it measures, in MAST's terms:

- allocation rate (§5.2, Fig. 5): hardware-hours held by jobs over
  hardware-hours available, from `fleet.start`/`fleet.release` store events
  (a job holds its machines from its start to its release, or to the end of
  the run) over every machine of the ML dynamic clusters for the whole run.
  `gpu_allocation_rate_loaded` is the same from `loaded_from_s` on: the
  first auction in which a GPU workload found a region without room for it
  (an abstention `unschedulable` or `negative_cache`), i.e. once demand has
  met the supply somewhere. `series` holds both rates per time bucket;
- scheduling events (§5.5, Fig. 11): a workload's submission opens one, and
  so does its return to the queue after it ran (preempted, or stopped by a
  failure); the event ends when the workload next becomes RUNNING. In a run
  with a warm start, the workloads there at t=0 were already running: their
  first event is left out of time to start and SLO (their JCTs count). A failed
  dispatch that sends it back to the queue does not open a new one. An event
  is within quota when the latest GMS ranking (`queue.rank`) before its start
  said so;
- SLO: a within-quota event violates its SLO when it waits longer than
  `slo_start_s` while within quota. The clock starts with the event if its
  first ranking put it within quota, else at the ranking that did (a
  workload waiting over quota has no start-time guarantee; without this,
  a workload that waited hours over quota and started the moment its
  tenant's usage dropped would count as a within-quota violation). A
  ranking over quota stops the clock; the next one within quota restarts
  it. Events still waiting at the end count once their clock has passed
  `slo_start_s`; the others are undecided and left out. The high-priority
  rate counts tenants of priority levels 0 and 1 (`high_priority_levels`);
  the SLO series buckets events by when their clock started.
  `slo_whole_wait` gives the same rates counting each within-quota event's
  whole wait (the quota status as in time to start), for comparison;
- candidate regions (Fig. 7): the regions that bid for a workload at least
  once; executing regions: those whose dispatch of it reached RUNNING.

Percentiles interpolate linearly between order statistics (numpy's default).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

import msgspec
import numpy as np

from actors.mast.report.arithmetic import (
    bucket_means,
    cdf,
    distribution,
    nice_bucket_us,
    rounded,
    stats,
    step_integral,
)
from actors.mast.report.fold import TraceFold
from actors.mast.report.slow_figures import slow_path_figures
from emulator.run.scenario import parse_raw
from emulator.units import US_PER_S
from store import Store
from store.mast import fleet, queue
from store.mast.queue import STATES
from store.runs import get_run_meta, list_violations
from store.trace import iter_trace, read_metrics


class ReportOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Knobs of a MAST report."""

    # A within-quota scheduling event that waits longer than this violates its SLO.
    slo_start_s: float = 900.0
    high_priority_levels: tuple[int, ...] = (0, 1)
    # Time series are averaged into at most this many buckets.
    series_buckets: int = 240
    # Width of the buckets of the SLO violation rate over time.
    slo_bucket_s: float = 3_600.0
    # The CDFs keep this many evenly spaced quantiles (0 … 1).
    cdf_points: int = 101

    def __post_init__(self) -> None:
        if not self.slo_start_s >= 0:
            raise ValueError("slo_start_s must be >= 0")
        if self.series_buckets < 1 or self.cdf_points < 2 or not self.slo_bucket_s > 0:
            raise ValueError("series_buckets >= 1, cdf_points >= 2 and slo_bucket_s > 0")


async def read_report(store: Store, opt: ReportOptions) -> dict[str, Any]:
    """The report of the run in `store` (see the module docstring for what each figure means)."""
    meta = await get_run_meta(store)
    if meta is None:
        raise ValueError(f"{store.path}: no run metadata")
    raw = parse_raw(meta.scenario_text, "stored scenario") if meta.scenario_text else {}
    system = raw.get("system", {}) if isinstance(raw, dict) else {}
    entries = {e.id: e for e in await queue.in_states(store, STATES)}
    tenants = {t.name: t.priority for t in await queue.get_tenants(store)}
    gpu_hosts: set[str] = set()
    gpus_total = cpus_total = 0
    for cluster in await fleet.clusters(store):
        if not cluster.ml:
            continue
        for machine, _healthy in await fleet.machines(store, cluster.id):
            if machine.gpus:
                gpu_hosts.add(machine.host)
                gpus_total += machine.gpus
            else:
                cpus_total += 1

    workload = system.get("workload", {}) if isinstance(system, dict) else {}
    warm = isinstance(workload, dict) and bool(workload.get("warm_start_fill"))
    fold = TraceFold(gpu_hosts, warm_start=warm)
    last_us = 0
    async for row in iter_trace(store, kinds=("store", "decision", "fault")):
        fold.feed(row)
        last_us = row.t_us
    # A run that was killed has no end time: it ends at its last recorded event.
    end_us = int(meta.end_t_us) if meta.end_t_us is not None else last_us
    names = ("rms_decision_ms", "negative_cache_hit_rate", "gms_scan_ms", "queue_length")
    metrics = {name: await read_metrics(store, name) for name in names}

    bucket_us = nice_bucket_us(end_us, opt.series_buckets)
    gpu_area, gpu_series = step_integral([(t, g) for t, g, _ in fold.steps], end_us, bucket_us)
    cpu_area, cpu_series = step_integral([(t, c) for t, _, c in fold.steps], end_us, bucket_us)
    gpu_rate = _rate_series(gpu_series, gpus_total)
    cpu_rate = _rate_series(cpu_series, cpus_total)
    loaded_rate = None
    if fold.loaded_from_us is not None and gpus_total and end_us > fold.loaded_from_us:
        before, _ = step_integral(
            [(t, g) for t, g, _ in fold.steps], fold.loaded_from_us, bucket_us
        )
        loaded_rate = (gpu_area - before) / (gpus_total * (end_us - fold.loaded_from_us))

    report: dict[str, Any] = {
        "scenario": meta.scenario_name,
        "seed": meta.seed,
        "policy": system.get("policy", "mast"),
        "trace_hash": meta.trace_hash,
        "status": meta.status,
        "emulated_s": rounded(end_us / US_PER_S),
        "invariant_violations": len(await list_violations(store)),
        "workloads": _workload_counts(fold, entries),
        "workloads_waited_for_data": len(fold.ever_waited_for_data),
        "gpus": gpus_total,
        "cpu_machines": cpus_total,
        "gpu_allocation_rate": rounded(gpu_area / (gpus_total * end_us))
        if gpus_total and end_us
        else None,
        "cpu_allocation_rate": rounded(cpu_area / (cpus_total * end_us))
        if cpus_total and end_us
        else None,
        "loaded_from_s": rounded(fold.loaded_from_us / US_PER_S)
        if fold.loaded_from_us is not None
        else None,
        "gpu_allocation_rate_loaded": rounded(loaded_rate),
    }
    report.update(_scheduling(fold, entries, tenants, end_us, opt))
    report["preemptions"] = sum(e.preemptions for e in entries.values())
    report.update(_control_plane(metrics))
    ids = sorted(set(fold.submitted) | set(entries))
    report["candidate_regions"] = distribution(len(fold.candidates.get(w, ())) for w in ids)
    report["executing_regions"] = distribution(len(fold.executing.get(w, ())) for w in ids)
    qt, qv = bucket_means(((t, v) for t, _, v in metrics["queue_length"]), end_us, bucket_us)
    report["series"] = {
        "bucket_s": bucket_us / US_PER_S,
        "t_s": [k * bucket_us / US_PER_S for k in range(len(gpu_series))],
        "gpu_allocation_rate": gpu_rate,
        "cpu_allocation_rate": cpu_rate,
        "queue_length": {"t_s": qt, "value": qv},
        # Fig. 6: the share of live workloads waiting for data, per bucket.
        "waiting_for_data_share": step_integral(
            [(t, w / n if n else 0.0) for t, w, n in fold.data_waits], end_us, bucket_us
        )[1],
    }
    report["fault_windows"] = _fault_windows(fold.faults, end_us)
    report.update(await slow_path_figures(store, fold.tetris_states, fold.on_demand_bytes, end_us))
    submitted = len(fold.submitted)
    report["waiting_for_data_rate"] = (
        rounded(len(fold.ever_waited_for_data) / submitted) if submitted else None
    )
    return report


def _scheduling(
    fold: TraceFold,
    entries: dict[str, queue.QueueEntry],
    tenants: dict[str, int],
    end_us: int,
    opt: ReportOptions,
) -> dict[str, Any]:
    """Time to start, SLO violations, JCT and queueing delay."""
    slo_us = opt.slo_start_s * US_PER_S
    waits: dict[bool, list[float]] = {True: [], False: []}
    waiting_at_end = {True: 0, False: 0}
    per_workload: dict[str, float] = {}
    # SLO tallies: overall and high priority, and per time bucket of the event's start.
    judged = violated = judged_hi = violated_hi = 0
    whole = [0, 0, 0, 0]  # the same tallies over whole waits
    slo_bucket_us = round(opt.slo_bucket_s * US_PER_S)
    buckets = max(1, math.ceil(end_us / slo_bucket_us)) if end_us else 1
    by_bucket = [[0, 0, 0, 0] for _ in range(buckets)]  # judged, violated, judged_hi, vio_hi
    for ev in fold.events:
        if ev.warm:
            continue
        entry = entries.get(ev.workload)
        within = ev.within_quota
        if within is None:  # never ranked while waiting: the queue's last word on it
            within = bool(entry.within_quota) if entry is not None else False
        done = ev.end_us is not None
        t_end = ev.end_us if ev.end_us is not None else end_us
        if done:
            wait_s = (t_end - ev.start_us) / US_PER_S
            waits[within].append(wait_s)
            per_workload[ev.workload] = per_workload.get(ev.workload, 0.0) + wait_s
        else:
            waiting_at_end[within] += 1
        if not within:
            continue
        tenant = entry.tenant if entry is not None else None
        high = tenants.get(tenant or "", -1) in opt.high_priority_levels
        if done or t_end - ev.start_us > slo_us:  # the whole wait, for comparison
            late = t_end - ev.start_us > slo_us
            whole[0] += 1
            whole[1] += late
            whole[2] += high
            whole[3] += high and late
        # The SLO clock runs while the event is within quota (module docstring).
        since = ev.within_since_us if ev.within_since_us is not None else ev.start_us
        if not done and t_end - since <= slo_us:
            continue  # still waiting, not late yet: undecided
        bad = t_end - since > slo_us
        row = by_bucket[min(buckets - 1, since // slo_bucket_us)]
        judged += 1
        violated += bad
        row[0] += 1
        row[1] += bad
        if high:
            judged_hi += 1
            violated_hi += bad
            row[2] += 1
            row[3] += bad

    def rate(bad: int, n: int) -> float | None:
        return rounded(bad / n) if n else None

    hourly_hi = [rate(r[3], r[2]) for r in by_bucket]
    jct = [
        (e.finished_us - e.submitted_us) / US_PER_S
        for e in entries.values()
        if e.state == "DONE" and e.finished_us is not None
    ]
    tts = {}
    for within, key in ((True, "within_quota"), (False, "over_quota")):
        tts[key] = {
            **stats(waits[within], "avg", "p95"),
            "waiting_at_end": waiting_at_end[within],
        }
    return {
        "slo_start_s": opt.slo_start_s,
        "slo_violation_rate": rate(violated, judged),
        "slo_violation_rate_high_priority": rate(violated_hi, judged_hi),
        "slo_violation_rate_high_priority_max_bucket": max(
            (r for r in hourly_hi if r is not None), default=None
        ),
        "slo_events": {
            "judged": judged,
            "violated": violated,
            "judged_high_priority": judged_hi,
            "violated_high_priority": violated_hi,
        },
        # Counting each event's whole wait, over-quota time included.
        "slo_whole_wait": {
            "violation_rate": rate(whole[1], whole[0]),
            "violation_rate_high_priority": rate(whole[3], whole[2]),
            "judged": whole[0],
            "judged_high_priority": whole[2],
        },
        "scheduling_events": len(fold.events),
        "time_to_start_s": tts,
        "jct_s": stats(jct, "avg", "median", "p95"),
        "queueing_delay_s": stats(list(per_workload.values()), "avg", "median", "p95"),
        "slo_series": {
            "bucket_s": opt.slo_bucket_s,
            "t_s": [k * opt.slo_bucket_s for k in range(buckets)],
            "slo_violation_rate": [rate(r[1], r[0]) for r in by_bucket],
            "slo_violation_rate_high_priority": hourly_hi,
        },
        "cdf": {
            "time_to_start_s": {
                "within_quota": cdf(waits[True], opt.cdf_points),
                "over_quota": cdf(waits[False], opt.cdf_points),
            }
        },
    }


def _rate_series(means: list[float], capacity: int) -> list[float | None]:
    return [rounded(m / capacity, 4) if capacity else None for m in means]


def _workload_counts(fold: TraceFold, entries: dict[str, queue.QueueEntry]) -> dict[str, int]:
    ids = set(fold.submitted) | set(entries)
    by_state = Counter(entries[w].state for w in ids if w in entries)
    known = sum(by_state[s] for s in STATES)
    return {
        "submitted": len(ids),
        "completed": by_state["DONE"],
        "running": by_state["RUNNING"],
        "dispatching": by_state["DISPATCHING"],
        "pending": by_state["PENDING"] + by_state["WAITING"],
        "waiting_data": by_state["WAITING_DATA"],
        "failed": by_state["FAILED"],
        "withdrawn": by_state["WITHDRAWN"],
        "lost": len(ids) - known,
    }


def _control_plane(metrics: dict[str, list[tuple[int, str, float]]]) -> dict[str, Any]:
    """RMS decision latency with and without preemption, negative cache, GMS scan time."""
    decisions: dict[bool, list[float]] = {True: [], False: []}
    for _, labels, value in metrics["rms_decision_ms"]:
        decisions[bool(json.loads(labels).get("preempts"))].append(value)
    hit = [v for _, _, v in metrics["negative_cache_hit_rate"]]
    scan = [v for _, _, v in metrics["gms_scan_ms"]]
    return {
        "rms_decision_ms": {
            "no_preemption_avg": rounded(np.mean(decisions[False]), 4)
            if decisions[False]
            else None,
            "preemption_avg": rounded(np.mean(decisions[True]), 4) if decisions[True] else None,
            "no_preemption_count": len(decisions[False]),
            "preemption_count": len(decisions[True]),
        },
        "negative_cache_hit_rate": rounded(np.mean(hit), 4) if hit else None,
        "gms_scan_ms_avg": rounded(np.mean(scan), 4) if scan else None,
    }


def _fault_windows(faults: list[tuple[int, str, str, str]], end_us: int) -> list[list[Any]]:
    """Fault windows [start_s, end_s, name]: a start matched with the next end of its
    action on the same target (concurrent crashes of two actors pair up per actor)."""
    open_: dict[tuple[str, str], list[int]] = {}
    out: list[list[Any]] = []
    for t_us, phase, action, target in faults:
        key = (action, target)
        if phase == "start":
            open_.setdefault(key, []).append(t_us)
        elif phase == "end" and open_.get(key):
            out.append([_s(open_[key].pop(0)), _s(t_us), action])
        elif action in ("heal", "final-heal"):
            healed = [k for k in open_ if k[0].startswith(("partition", "loss", "delay", "dup"))]
            for k in healed:
                out.extend([_s(s), _s(t_us), k[0]] for s in open_.pop(k))
    for (name, _), starts in open_.items():
        out.extend([_s(s), _s(end_us), name] for s in starts)
    return sorted(out)


def _s(t_us: int) -> float:
    return t_us / US_PER_S
