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
  failure); the event ends when the workload next becomes RUNNING. A failed
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

import html
import itertools
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from actors.mast.report.slow_figures import slow_path_figures
from actors.mast.report.slow_plots import slow_path_plots
from emulator.run.scenario import parse_raw
from emulator.trace import fault_key
from emulator.units import US_PER_S
from store import Store
from store.mast import fleet, queue
from store.mast.copies import DAY_US
from store.mast.queue import QUEUED, STATES
from store.runs import get_run_meta, list_violations
from store.trace import TraceRow, iter_trace, read_metrics

_JSON = msgspec.json.Encoder(order="deterministic")


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


# ---- the trace pass -------------------------------------------------------------------------
@dataclass
class SchedEvent:
    """One scheduling event of a workload: from (re)queueing to RUNNING (end) or the run's end."""

    workload: str
    start_us: int
    end_us: int | None = None
    within_quota: bool | None = None  # from the latest ranking while it waited
    # Start of the current uninterrupted within-quota stretch: the event's start if
    # its first ranking was within quota, else the ranking that made it so.
    within_since_us: int | None = None
    ranked: bool = False


@dataclass
class _Fold:
    """What one pass over the trace collects."""

    gpu_hosts: set[str]
    submitted: dict[str, int] = field(default_factory=dict)  # id → submission time
    gpus_asked: dict[str, int] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)
    open: dict[str, SchedEvent] = field(default_factory=dict)
    events: list[SchedEvent] = field(default_factory=list)
    award_region: dict[str, str] = field(default_factory=dict)
    candidates: dict[str, set[str]] = field(default_factory=dict)
    executing: dict[str, set[str]] = field(default_factory=dict)
    ever_waited_for_data: set[str] = field(default_factory=set)
    # Fig. 6: (t_us, workloads in WAITING_DATA, workloads submitted and not finished).
    data_waits: list[tuple[int, int, int]] = field(default_factory=list)
    waiting_data: int = 0
    live: int = 0
    # Allocation: what each job holds, and the step function of what is held.
    held: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    gpus_used: int = 0
    cpus_used: int = 0
    steps: list[tuple[int, int, int]] = field(default_factory=list)  # (t_us, gpus, cpu machines)
    loaded_from_us: int | None = None
    # (t_us, phase, name, target): a window is one target's start and end.
    faults: list[tuple[int, str, str, str]] = field(default_factory=list)
    # The slow path: Tetris's placement figures as they changed, on-demand bytes per day.
    tetris_states: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    on_demand_bytes: dict[int, int] = field(default_factory=dict)

    def feed(self, row: TraceRow) -> None:
        if row.kind == "store":
            handler = _STORE.get(row.type)
            if handler is not None:
                args, result = row.payload
                handler(self, row.t_us, args, result)
        elif row.kind == "decision":
            if row.type in ("auction.award", "auction.lost-cas"):
                p = row.payload
                self.candidates.setdefault(p["workload"], set()).update(p["bids"])
            elif row.type == "auction.none":
                self._none(row.t_us, row.payload)
            elif row.type == "tetris.state":
                self.tetris_states.append((row.t_us, row.payload))
            elif row.type == "migration.on-demand":
                day = row.t_us // DAY_US
                self.on_demand_bytes[day] = self.on_demand_bytes.get(day, 0) + row.payload["bytes"]
        elif row.kind == "fault":
            self._fault(row)

    # -- queue ------------------------------------------------------------------------------
    def _submit(self, t_us: int, args: list[Any], result: Any) -> None:
        if not result:
            return
        spec = args[0]
        wid = spec["id"]
        self.submitted[wid] = t_us
        self.gpus_asked[wid] = sum(j.get("gpus", 0) for j in spec["jobs"])
        self.live += 1
        self._set_state(t_us, wid, "PENDING")
        self._open(wid, t_us)

    def _rank(self, t_us: int, args: list[Any], result: Any) -> None:
        if not result:
            return
        for wid, _priority, _credit, within in args[2]:
            event = self.open.get(wid)
            if event is None:
                continue
            if not within:
                event.within_since_us = None
            elif event.within_since_us is None:
                event.within_since_us = t_us if event.ranked else event.start_us
            event.within_quota = bool(within)
            event.ranked = True

    def _award(self, t_us: int, args: list[Any], result: Any) -> None:
        if result:
            wid, region = args[2], args[4]
            self._set_state(t_us, wid, "DISPATCHING")
            self.award_region[wid] = region

    def _transition(self, t_us: int, args: list[Any], result: Any) -> None:
        if not result:
            return
        wid, to = args[0], args[2]
        before = self._set_state(t_us, wid, to)
        if to == "RUNNING":
            event = self.open.pop(wid, None)
            if event is not None:
                event.end_us = t_us
            region = self.award_region.get(wid)
            if region is not None:
                self.executing.setdefault(wid, set()).add(region)
        elif to in QUEUED and before == "RUNNING":
            self._open(wid, t_us)  # it ran and is back: a new scheduling event
        elif to in ("DONE", "FAILED"):
            self.open.pop(wid, None)

    def _set_state(self, t_us: int, wid: str, to: str) -> str | None:
        """Record a workload's new state (returns the old one), keeping Fig. 6's counts."""
        before = self.state.get(wid)
        self.state[wid] = to
        ended = to in ("DONE", "FAILED") and before not in ("DONE", "FAILED")
        if (before == "WAITING_DATA") != (to == "WAITING_DATA") or ended or before is None:
            self.waiting_data += (to == "WAITING_DATA") - (before == "WAITING_DATA")
            self.live -= ended
            self.data_waits.append((t_us, self.waiting_data, self.live))
        return before

    def _open(self, wid: str, t_us: int) -> None:
        event = SchedEvent(wid, t_us)
        self.open[wid] = event
        self.events.append(event)

    def _none(self, t_us: int, payload: dict[str, Any]) -> None:
        wid = payload["workload"]
        if payload["state"] == "WAITING_DATA":
            self.ever_waited_for_data.add(wid)
        # Loaded: a GPU workload found no room in a region that could otherwise run it.
        full = {"unschedulable", "negative_cache"} & set(payload["reasons"])
        if full and self.loaded_from_us is None and self.gpus_asked.get(wid, 0) > 0:
            self.loaded_from_us = t_us

    # -- fleet ----------------------------------------------------------------------------
    def _start(self, t_us: int, args: list[Any], result: Any) -> None:
        if result is None:
            return
        key = (args[2], args[3])
        self._free(key)
        gpus = sum(n for host, n in args[6] if host in self.gpu_hosts)
        self.held[key] = (gpus, len(args[7]))
        self._step(t_us, gpus, len(args[7]))

    def _release(self, t_us: int, args: list[Any], result: Any) -> None:
        if result:
            gpus, cpus = self._free((args[2], args[3]))
            if gpus or cpus:
                self._step(t_us, 0, 0)

    def _free(self, key: tuple[str, str]) -> tuple[int, int]:
        gpus, cpus = self.held.pop(key, (0, 0))
        self.gpus_used -= gpus
        self.cpus_used -= cpus
        return gpus, cpus

    def _step(self, t_us: int, gpus: int, cpus: int) -> None:
        self.gpus_used += gpus
        self.cpus_used += cpus
        if self.steps and self.steps[-1][0] == t_us:
            self.steps[-1] = (t_us, self.gpus_used, self.cpus_used)
        else:
            self.steps.append((t_us, self.gpus_used, self.cpus_used))

    def _fault(self, row: TraceRow) -> None:
        if "." in row.type:
            action, _, phase = row.type.rpartition(".")
        else:  # the kernel's own down/up of a node
            action, phase = f"down {row.dst}", "start" if row.type == "down" else "end"
        target = _JSON.encode(fault_key(row.payload)).decode()
        self.faults.append((row.t_us, phase, action, target))


_STORE = {
    "queue.submit": _Fold._submit,
    "queue.rank": _Fold._rank,
    "queue.award": _Fold._award,
    "queue.transition": _Fold._transition,
    "fleet.start": _Fold._start,
    "fleet.release": _Fold._release,
}


# ---- arithmetic -------------------------------------------------------------------------------
def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), digits)


def stats(values: Sequence[float], *keys: str) -> dict[str, float | int | None]:
    """avg / median / p95 (those named in `keys`) and count of `values` (None when empty)."""
    arr = np.asarray(values, dtype=float)
    out: dict[str, float | int | None] = {"count": len(arr)}
    for key in keys:
        if not len(arr):
            out[key] = None
        elif key == "avg":
            out[key] = _r(arr.mean())
        else:
            q = {"median": 50, "p95": 95}[key]
            out[key] = _r(np.percentile(arr, q))
    return out


def step_integral(
    steps: Sequence[tuple[int, float]], end_us: int, bucket_us: int
) -> tuple[float, list[float]]:
    """Integral over [0, end_us) of a step function (0 before its first step), and bucket means.

    `steps` are (time, value from then on) in time order; the value holds
    until the next step. Returns the integral (value·µs) and the mean value
    of each bucket [k·bucket_us, (k+1)·bucket_us) cut at `end_us`.
    """
    n = max(1, math.ceil(end_us / bucket_us)) if end_us > 0 else 0
    area = [0.0] * n
    total = 0.0
    bounds = [*steps, (end_us, 0.0)]
    for (t0, value), (t1, _) in itertools.pairwise(bounds):
        a, b = max(0, t0), min(end_us, t1)
        if b <= a or value == 0:
            continue
        total += value * (b - a)
        k = a // bucket_us
        while a < b:
            edge = min(b, (k + 1) * bucket_us)
            area[k] += value * (edge - a)
            a, k = edge, k + 1
    widths = [min(end_us, (k + 1) * bucket_us) - k * bucket_us for k in range(n)]
    return total, [area[k] / widths[k] for k in range(n)]


def _bucket_means(
    samples: Iterable[tuple[int, float]], end_us: int, bucket_us: int
) -> tuple[list[float], list[float]]:
    """Mean of point samples per bucket; buckets without samples are left out."""
    sums: dict[int, list[float]] = {}
    for t_us, value in samples:
        acc = sums.setdefault(min(t_us, max(0, end_us - 1)) // bucket_us, [0.0, 0.0])
        acc[0] += value
        acc[1] += 1
    keys = sorted(sums)
    return [k * bucket_us / US_PER_S for k in keys], [_r(sums[k][0] / sums[k][1]) for k in keys]


def _distribution(counts: Iterable[int]) -> dict[str, Any]:
    values = list(counts)
    hist = Counter(values)
    return {
        "avg": _r(sum(values) / len(values)) if values else None,
        "histogram": {str(k): hist[k] for k in sorted(hist)},
    }


def _cdf(values: Sequence[float], points: int) -> list[float]:
    if not values:
        return []
    return [_r(v, 3) for v in np.quantile(np.asarray(values, float), np.linspace(0, 1, points))]


def _nice_bucket_us(end_us: int, buckets: int) -> int:
    """A round bucket width (a whole number of minutes) giving at most `buckets` buckets."""
    minutes = max(1, math.ceil(end_us / buckets / 60 / US_PER_S))
    return minutes * 60 * US_PER_S


# ---- the reporter ---------------------------------------------------------------------------
class MastReporter:
    """`mastemu report` / `compare` for runs of `[system] kind = "mast"`."""

    def __init__(self, options: ReportOptions | None = None) -> None:
        self.options = options or ReportOptions()

    async def report(self, db: Path) -> dict[str, Any]:
        async with Store.open_ctx(db) as store:
            return await self._report(store)

    async def _report(self, store: Store) -> dict[str, Any]:
        opt = self.options
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

        fold = _Fold(gpu_hosts)
        last_us = 0
        async for row in iter_trace(store, kinds=("store", "decision", "fault")):
            fold.feed(row)
            last_us = row.t_us
        # A run that was killed has no end time: it ends at its last recorded event.
        end_us = int(meta.end_t_us) if meta.end_t_us is not None else last_us
        names = ("rms_decision_ms", "negative_cache_hit_rate", "gms_scan_ms", "queue_length")
        metrics = {name: await read_metrics(store, name) for name in names}

        bucket_us = _nice_bucket_us(end_us, opt.series_buckets)
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
            "emulated_s": _r(end_us / US_PER_S),
            "invariant_violations": len(await list_violations(store)),
            "workloads": _workload_counts(fold, entries),
            "workloads_waited_for_data": len(fold.ever_waited_for_data),
            "gpus": gpus_total,
            "cpu_machines": cpus_total,
            "gpu_allocation_rate": _r(gpu_area / (gpus_total * end_us))
            if gpus_total and end_us
            else None,
            "cpu_allocation_rate": _r(cpu_area / (cpus_total * end_us))
            if cpus_total and end_us
            else None,
            "loaded_from_s": _r(fold.loaded_from_us / US_PER_S)
            if fold.loaded_from_us is not None
            else None,
            "gpu_allocation_rate_loaded": _r(loaded_rate),
        }
        report.update(self._scheduling(fold, entries, tenants, end_us))
        report["preemptions"] = sum(e.preemptions for e in entries.values())
        report.update(_control_plane(metrics))
        ids = sorted(set(fold.submitted) | set(entries))
        report["candidate_regions"] = _distribution(len(fold.candidates.get(w, ())) for w in ids)
        report["executing_regions"] = _distribution(len(fold.executing.get(w, ())) for w in ids)
        qt, qv = _bucket_means(((t, v) for t, _, v in metrics["queue_length"]), end_us, bucket_us)
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
        report.update(
            await slow_path_figures(store, fold.tetris_states, fold.on_demand_bytes, end_us)
        )
        submitted = len(fold.submitted)
        report["waiting_for_data_rate"] = (
            _r(len(fold.ever_waited_for_data) / submitted) if submitted else None
        )
        return report

    def _scheduling(
        self,
        fold: _Fold,
        entries: dict[str, queue.QueueEntry],
        tenants: dict[str, int],
        end_us: int,
    ) -> dict[str, Any]:
        """Time to start, SLO violations, JCT and queueing delay."""
        opt = self.options
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
            return _r(bad / n) if n else None

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
                    "within_quota": _cdf(waits[True], opt.cdf_points),
                    "over_quota": _cdf(waits[False], opt.cdf_points),
                }
            },
        }

    # ---- rendering ------------------------------------------------------------------------
    def render_text(self, reports: list[dict[str, Any]]) -> str:
        rows = _rows(reports)
        heads = [f"{r.get('policy')} (seed {r.get('seed')})" for r in reports]
        width = max([len(label) for label, _ in rows] + [8])
        cols = [
            max([len(h)] + [len(vals[i]) for _, vals in rows if vals]) for i, h in enumerate(heads)
        ]
        title = reports[0].get("scenario", "") if reports else ""
        lines = [f"report: {title}", ""]
        lines.append(
            " " * width + "  " + "  ".join(h.rjust(c) for h, c in zip(heads, cols, strict=True))
        )
        for label, vals in rows:
            if not vals:
                lines.append(label)
                continue
            cells = "  ".join(v.rjust(c) for v, c in zip(vals, cols, strict=True))
            lines.append(f"{label.ljust(width)}  {cells}")
        return "\n".join(lines)

    def render_html(self, report: dict[str, Any], db: Path, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        plots = _plots(report, out_dir)
        rows = _rows([report])
        body = []
        for label, vals in rows:
            if not vals:
                body.append(f'<tr><th colspan="2" class="section">{html.escape(label)}</th></tr>')
            else:
                body.append(
                    f"<tr><td>{html.escape(label.strip())}</td><td>{html.escape(vals[0])}</td></tr>"
                )
        images = "\n".join(
            f'<figure><img src="{name}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            for name, caption in plots
        )
        title = f"{report.get('scenario')} · seed {report.get('seed')} · {report.get('policy')}"
        page = out_dir / "index.html"
        page.write_text(
            _PAGE.format(
                title=html.escape(title),
                db=html.escape(str(db)),
                rows="\n".join(body),
                images=images,
                json=html.escape(json.dumps(_headline(report), indent=2, sort_keys=True)),
            ),
            encoding="utf-8",
        )
        return page


def _rate_series(means: list[float], capacity: int) -> list[float | None]:
    return [_r(m / capacity, 4) if capacity else None for m in means]


def _workload_counts(fold: _Fold, entries: dict[str, queue.QueueEntry]) -> dict[str, int]:
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
            "no_preemption_avg": _r(np.mean(decisions[False]), 4) if decisions[False] else None,
            "preemption_avg": _r(np.mean(decisions[True]), 4) if decisions[True] else None,
            "no_preemption_count": len(decisions[False]),
            "preemption_count": len(decisions[True]),
        },
        "negative_cache_hit_rate": _r(np.mean(hit), 4) if hit else None,
        "gms_scan_ms_avg": _r(np.mean(scan), 4) if scan else None,
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


# ---- text and html --------------------------------------------------------------------------
def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if unit == "%":
            return f"{100 * value:.1f}%"
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _get(report: dict[str, Any], path: str) -> Any:
    value: Any = report
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


# (label, key path, unit); a row without a path is a section heading.
_ROWS: list[tuple[str, str | None, str]] = [
    ("run", None, ""),
    ("  trace hash", "trace_hash", ""),
    ("  status", "status", ""),
    ("  emulated s", "emulated_s", ""),
    ("  invariant violations", "invariant_violations", ""),
    ("workloads", None, ""),
    *[
        (f"  {k.replace('_', ' ')}", f"workloads.{k}", "")
        for k in (
            "submitted",
            "completed",
            "running",
            "dispatching",
            "pending",
            "waiting_data",
            "failed",
            "lost",
        )
    ],
    ("  scheduling events", "scheduling_events", ""),
    ("  preemptions", "preemptions", ""),
    ("allocation", None, ""),
    ("  GPU allocation rate", "gpu_allocation_rate", "%"),
    ("  CPU allocation rate", "cpu_allocation_rate", "%"),
    ("  loaded from s", "loaded_from_s", ""),
    ("  GPU allocation once loaded", "gpu_allocation_rate_loaded", "%"),
    ("SLO (within quota)", None, ""),
    ("  violation rate", "slo_violation_rate", "%"),
    ("  violation rate, high priority", "slo_violation_rate_high_priority", "%"),
    ("  worst bucket, high priority", "slo_violation_rate_high_priority_max_bucket", "%"),
    ("  events judged", "slo_events.judged", ""),
    ("  events judged, high priority", "slo_events.judged_high_priority", ""),
    ("  whole waits: violation rate", "slo_whole_wait.violation_rate", "%"),
    ("  whole waits: high priority", "slo_whole_wait.violation_rate_high_priority", "%"),
    ("time to start s", None, ""),
    ("  within quota avg", "time_to_start_s.within_quota.avg", ""),
    ("  within quota p95", "time_to_start_s.within_quota.p95", ""),
    ("  within quota events", "time_to_start_s.within_quota.count", ""),
    ("  over quota avg", "time_to_start_s.over_quota.avg", ""),
    ("  over quota p95", "time_to_start_s.over_quota.p95", ""),
    ("  over quota events", "time_to_start_s.over_quota.count", ""),
    ("JCT and queueing s", None, ""),
    ("  JCT avg", "jct_s.avg", ""),
    ("  JCT median", "jct_s.median", ""),
    ("  JCT p95", "jct_s.p95", ""),
    ("  queueing delay avg", "queueing_delay_s.avg", ""),
    ("  queueing delay median", "queueing_delay_s.median", ""),
    ("  queueing delay p95", "queueing_delay_s.p95", ""),
    ("control plane", None, ""),
    ("  RMS decision ms, no preemption", "rms_decision_ms.no_preemption_avg", ""),
    ("  RMS decision ms, preemption", "rms_decision_ms.preemption_avg", ""),
    ("  negative cache hit rate", "negative_cache_hit_rate", "%"),
    ("  GMS scan ms avg", "gms_scan_ms_avg", ""),
    ("regions per workload", None, ""),
    ("  candidate avg", "candidate_regions.avg", ""),
    ("  executing avg", "executing_regions.avg", ""),
]


def _rows(reports: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for label, path, unit in _ROWS:
        if path is None:
            out.append((label, []))
        else:
            out.append((label, [_fmt(_get(r, path), unit) for r in reports]))
    return out


def _headline(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in ("series", "slo_series", "cdf")}


def _plots(report: dict[str, Any], out_dir: Path) -> list[tuple[str, str]]:
    """Write the PNG plots; returns (file name, caption) pairs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def shade(ax: Any) -> None:
        for start, end, _name in report.get("fault_windows", []):
            ax.axvspan(start / 3600, end / 3600, color="tab:red", alpha=0.12, lw=0)

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=96)
        plt.close(fig)

    out: list[tuple[str, str]] = []
    series = report["series"]
    hours = [t / 3600 for t in series["t_s"]]
    fig, ax = plt.subplots(figsize=(7, 3))
    for key, label in (("gpu_allocation_rate", "GPU"), ("cpu_allocation_rate", "CPU")):
        values = [np.nan if v is None else 100 * v for v in series[key]]
        ax.step(hours, values, where="post", label=label)
    if report.get("loaded_from_s") is not None:
        ax.axvline(report["loaded_from_s"] / 3600, ls="--", c="grey", lw=1, label="loaded")
    shade(ax)
    ax.set(xlabel="emulated hours", ylabel="allocation rate %", ylim=(0, 105))
    ax.legend(loc="lower right")
    save(fig, "allocation.png")
    out.append(("allocation.png", "GPU and CPU allocation rate over time (MAST Fig. 5)"))

    fig, ax = plt.subplots(figsize=(7, 3))
    q = series["queue_length"]
    ax.step([t / 3600 for t in q["t_s"]], q["value"], where="post")
    shade(ax)
    ax.set(xlabel="emulated hours", ylabel="queued workloads")
    save(fig, "queue_length.png")
    out.append(("queue_length.png", "Queue length at each GMS-scan pass"))

    fig, ax = plt.subplots(figsize=(7, 3))
    cdf = report["cdf"]["time_to_start_s"]
    for key, label in (("within_quota", "within quota"), ("over_quota", "over quota")):
        xs = cdf[key]
        if xs:  # log scale: waits under a second are drawn at 1 s
            ax.plot(np.maximum(xs, 1.0), np.linspace(0, 1, len(xs)), label=label)
    ax.axvline(max(1.0, report["slo_start_s"]), ls="--", c="grey", lw=1, label="SLO")
    ax.set(xlabel="time to start s (per scheduling event)", ylabel="CDF", ylim=(0, 1.02))
    ax.set_xscale("log")
    ax.legend(loc="lower right")
    save(fig, "time_to_start_cdf.png")
    out.append(("time_to_start_cdf.png", "Time to start, within vs over quota (MAST Fig. 11)"))

    fig, ax = plt.subplots(figsize=(7, 3))
    slo = report["slo_series"]
    hours = [t / 3600 for t in slo["t_s"]]
    for key, label in (
        ("slo_violation_rate", "all within quota"),
        ("slo_violation_rate_high_priority", "high priority"),
    ):
        values = [np.nan if v is None else 100 * v for v in slo[key]]
        ax.plot(hours, values, marker="o", label=label)
    shade(ax)
    ax.set(xlabel="emulated hours (when the SLO clock started)", ylabel="late %", ylim=(-2, 102))
    ax.legend(loc="upper left")
    save(fig, "slo.png")
    out.append(("slo.png", "SLO violation rate of within-quota scheduling events (MAST §5.6)"))
    out.extend(slow_path_plots(report, out_dir))  # none for runs without a slow path
    return out


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mastemu report: {title}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; max-width: 72em; }}
table {{ border-collapse: collapse; float: left; margin-right: 2em; }}
td, th {{ padding: 2px 10px; text-align: left; }}
td + td {{ text-align: right; font-variant-numeric: tabular-nums; }}
th.section {{ padding-top: 10px; border-bottom: 1px solid #ccc; }}
figure {{ display: inline-block; margin: 0 0 1em 0; }}
pre {{ clear: both; background: #f6f6f6; padding: 1em; font-size: 80%; }}
</style></head><body>
<h1>{title}</h1>
<p>Run database: <code>{db}</code></p>
<table>
{rows}
</table>
{images}
<h2>JSON</h2>
<pre>{json}</pre>
</body></html>
"""
