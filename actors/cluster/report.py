"""Reports of cluster-policy runs (`[system] kind = "cluster"`): `mastemu report` and `compare`.

The figures are those of the reference engine (`actors/cluster/metrics.py`),
computed from the jobs' accounts the scheduler kept in the store and the
trace jobs the run recorded at setup, so an actor run and an engine run of
the same trace are measured alike:

- `jct_s` and `queueing_delay_s` {avg, median, p95} over finished jobs (and
  failed ones as zeros when `semantics.count_failed`), `makespan_s` from the
  first submission to the last finish, `preemptions` and their checkpoint
  and restore time, `comm_overhead_s`, GPU `utilization` (GPU-time held by
  jobs running, restoring or checkpointing over GPUs × makespan), and
  finish-time fairness `ftf{worst, unfair_fraction}`;
- `semantics`: the conventions in force (event or round scheduling, round
  length, preemption cost, communication model, failed jobs counted, what
  the FTF contention factor counts, and the peer conventions of
  `actors/cluster/semantics.py`: profile, placement, Gittins variant, equal
  rank, SRTF's clock, percentiles, batch sizes, restart overhead, one-GPU
  servers);
- `trace`: the trace file's consistency report, with what it says that the
  run does not honour (`not_honoured`) and the rows it dropped.
"""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path
from typing import Any

import msgspec

from actors.cluster.engine import Semantics, SimResult
from actors.cluster.jobs import NAMESPACE, JobAccount, result_of
from actors.cluster.metrics import contention_factors, rho, summarize
from actors.policies.cluster.api import TraceJob
from emulator.errors import InputError
from emulator.registry import ReferenceRun
from emulator.run.scenario import parse_raw
from emulator.units import S
from store import Store, kv
from store.runs import get_run_meta, list_violations
from store.trace import iter_trace, last_event_us

# Where a reference-engine run (`mastemu run FILE --engine reference`) keeps its `SimResult`.
REFERENCE_NAMESPACE = "cluster.reference"
REFERENCE_KEY = "result"

# The columns of `report --jobs FILE.csv` and of `report --json`'s `jobs`, in order.
JOB_COLUMNS = (
    "job_id",
    "gpus",
    "submit_s",
    "first_start_s",
    "end_s",
    "jct_s",
    "queueing_delay_s",
    "preemptions",
    "ftf_rho",
    "state",
)


def reference_outcome(result: SimResult) -> ReferenceRun:
    """A reference-engine run as its run database keeps it (`emulator/run/reference.py`)."""
    done = all(r.failed or r.finish_us is not None for r in result.jobs)
    return ReferenceRun(
        end_us=result.end_us,
        done=done,
        facts=[("cluster.result", msgspec.to_builtins(result))],
        kv=[(REFERENCE_NAMESPACE, REFERENCE_KEY, result)],
    )


def job_rows(result: SimResult) -> list[dict[str, Any]]:
    """One row per job of the run, in trace order (`JOB_COLUMNS`), in seconds.

    `state` is done, unfinished (at the run's end) or failed (wider than the
    cluster). A time the job never reached (first start, end), and the JCT
    and ρ of a job that did not finish, are None (empty in the CSV); the
    queueing delay counts to the run's end for an unfinished job. ρ is the
    report's finish-time fairness (`actors/cluster/metrics.py`).
    """
    contention = contention_factors(result)
    rows = []
    for r in result.jobs:
        done = r.finish_us is not None and not r.failed
        rows.append(
            {
                "job_id": r.job_id,
                "gpus": r.gpus,
                "submit_s": r.submit_us / S,
                "first_start_s": None if r.first_start_us is None else r.first_start_us / S,
                "end_s": r.finish_us / S if done and r.finish_us is not None else None,
                "jct_s": (r.finish_us - r.submit_us) / S
                if done and r.finish_us is not None
                else None,
                "queueing_delay_s": r.queued_us / S,
                "preemptions": r.preemptions,
                "ftf_rho": rho(r, contention[r.job_id]) if r.job_id in contention else None,
                "state": "failed" if r.failed else "done" if done else "unfinished",
            }
        )
    return rows


async def _setup_fact(store: Store, name: str) -> Any:
    async for row in iter_trace(store, kinds=("setup",)):
        if row.type == name:
            return row.payload
    return None


async def cluster_result(store: Store, end_us: int) -> tuple[SimResult, dict[str, Any]]:
    """The run as the engine would report it, and the setup facts it came from."""
    fact = await _setup_fact(store, "cluster")
    if fact is None:
        raise ValueError(f"{store.path}: not a cluster-policy run (no `cluster` setup fact)")
    reference = await kv.get(store, REFERENCE_NAMESPACE, REFERENCE_KEY, SimResult)
    if reference is not None:  # `mastemu run --engine reference`: the engine's own result
        return reference, fact
    jobs = msgspec.convert(fact["jobs"], tuple[TraceJob, ...])
    semantics = msgspec.convert(fact["semantics"], Semantics)
    accounts = dict(await kv.items(store, NAMESPACE, JobAccount))
    results = tuple(
        result_of(accounts.get(t.job_id) or JobAccount(job_id=t.job_id), t, end_us)
        for t in jobs
        if t.submit_us <= end_us
    )
    live = [r for r in results if not r.failed]
    makespan = 0
    if live:
        done = [r.finish_us for r in live if r.finish_us is not None]
        last = end_us if len(done) < len(live) else max(done)
        makespan = last - min(r.submit_us for r in live)
    result = SimResult(
        policy=fact["policy"],
        semantics=semantics,
        jobs=results,
        makespan_us=makespan,
        end_us=end_us,
        gpus_total=fact["gpus"],
        # A restart overhead holds GPUs without being busy time (Gavel's convention).
        gpu_busy_us=sum(
            r.gpus * (r.run_us + r.checkpoint_us - r.restart_overhead_us) for r in results
        ),
        decisions=0,
    )
    return result, fact


class ClusterReporter:
    """`mastemu report` / `compare` for runs of `[system] kind = "cluster"`."""

    async def report(self, db: Path) -> dict[str, Any]:
        async with Store.open_ctx(db) as store:
            meta = await get_run_meta(store)
            if meta is None:
                raise ValueError(f"{db}: no run metadata")
            end_us = meta.end_t_us
            if end_us is None:  # killed: it ends at its last recorded event
                end_us = await last_event_us(store)
            result, fact = await cluster_result(store, int(end_us))
            ended = sum(1 for r in result.jobs if r.failed or r.finish_us is not None)
            jobs_total = len(fact["jobs"])
            # Jobs left (unfinished, or not even submitted) when the run ended.
            cut_short = ended < jobs_total
            status = meta.status
            if status == "ok" and cut_short:
                status = "cut-short"
            report: dict[str, Any] = {
                "scenario": meta.scenario_name,
                "seed": meta.seed,
                "policy": fact["policy"],
                "engine": "reference" if meta.mode == "reference" else "actors",
                "trace_hash": meta.trace_hash,
                "status": status,
                "cut_short": cut_short,
                "emulated_s": end_us / S,
                "invariant_violations": len(await list_violations(store)),
                "gpus": fact["gpus"],
                "jobs_total": jobs_total,
                "not_submitted": jobs_total - len(result.jobs),
                "jobs": job_rows(result),
                # The trace file's consistency report (None for generated jobs).
                "trace": _trace_summary(fact.get("trace")),
            }
        report.update(summarize(result))
        report["jct_cdf_s"] = sorted(
            (r.finish_us - r.submit_us) / S for r in result.jobs if r.finish_us is not None
        )
        return report

    def render_text(self, reports: list[dict[str, Any]]) -> str:
        rows = _rows(reports)
        heads = [str(r.get("policy")) for r in reports]
        width = max(len(label) for label, _ in rows)
        cols = [max([len(h)] + [len(v[i]) for _, v in rows]) for i, h in enumerate(heads)]
        title = reports[0].get("scenario", "") if reports else ""
        lines = [f"report: {title} (seed {reports[0].get('seed') if reports else ''})", ""]
        header = "  ".join(h.rjust(c) for h, c in zip(heads, cols, strict=True))
        lines.append(" " * width + "  " + header)
        for label, vals in rows:
            cells = "  ".join(v.rjust(c) for v, c in zip(vals, cols, strict=True))
            lines.append(f"{label.ljust(width)}  {cells}")
        return "\n".join(lines)

    def render_html(self, report: dict[str, Any], db: Path, out_dir: Path) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        out_dir.mkdir(parents=True, exist_ok=True)
        fig, ax = plt.subplots(figsize=(7, 3), dpi=96)
        jct = report.get("jct_cdf_s") or []
        if jct:
            ax.step(jct, [(i + 1) / len(jct) for i in range(len(jct))], where="post")
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (s)")
        ax.set_ylabel("fraction of jobs")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out_dir / "jct_cdf.png")
        plt.close(fig)
        rows = "\n".join(
            f"<tr><td>{html.escape(label)}</td><td>{html.escape(vals[0])}</td></tr>"
            for label, vals in _rows([report])
        )
        # The whole report beside the page, linked from it rather than dumped on it.
        (out_dir / "report.json").write_text(
            json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
        description = html.escape(asyncio.run(_description(db))) or "(no description)"
        page = out_dir / "index.html"
        page.write_text(
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>mastemu report: {html.escape(str(report.get('scenario')))}</title>"
            "<style>body { font-family: sans-serif; margin: 1.5em 2em; max-width: 96em; }"
            " .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(30em, 1fr));"
            " gap: 1em 2em; align-items: start; } figure { margin: 0; }"
            " figure img { width: 100%; height: auto; } td + td { text-align: right; }</style>"
            f"</head><body><h1>{html.escape(str(report.get('scenario')))} · "
            f"{html.escape(str(report.get('policy')))}</h1><p>{description}</p>"
            f"<div class='grid'><table>{rows}</table>"
            "<figure><img src='jct_cdf.png' alt='JCT CDF'>"
            "<figcaption>CDF of job completion times</figcaption></figure></div>"
            f"<p>Run database: <code>{html.escape(str(db))}</code> · the whole report as "
            "JSON: <a href='report.json'>report.json</a></p></body></html>",
            encoding="utf-8",
        )
        return page


async def _description(db: Path) -> str:
    """The scenario's own description, from the run database ("" if it has none)."""
    async with Store.open_ctx(db) as store:
        meta = await get_run_meta(store)
    if meta is None or not meta.scenario_text:
        return ""
    try:
        raw = parse_raw(meta.scenario_text, f"{db} (stored scenario)")
    except InputError:
        return ""
    text = raw.get("description") if isinstance(raw, dict) else None
    return text if isinstance(text, str) else ""


def _trace_summary(trace: dict[str, Any] | None) -> dict[str, Any] | None:
    if not trace:
        return None
    return {
        "path": trace["path"],
        "format": trace["fmt"],
        "rows_read": trace["rows_read"],
        "jobs_kept": trace["jobs_kept"],
        "rows_skipped": trace["rows_skipped"],
        "unknown_models": {m["name"]: m["count"] for m in trace["unknown_models"]},
        "unknown_gpu_types": {m["name"]: m["count"] for m in trace["unknown_gpu_types"]},
        "never_fit": [m["job_id"] for m in trace["never_fit"]],
        "rows_dropped": trace.get("rows_dropped", 0),
        "dropped": {m["name"]: m["count"] for m in trace.get("dropped", ())},
        # What the trace says that the run does not use: never dropped silently.
        "not_honoured": [
            {"what": n["what"], "rows": n["rows"], "why": n["why"]}
            for n in trace.get("not_honoured", ())
        ],
        "time_origin_s": trace.get("time_origin_s"),
    }


def _on(flag: Any) -> str:
    return "on" if flag else "off"


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _rows(reports: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    def each(get: Any, digits: int = 1) -> list[str]:
        return [_fmt(get(r), digits) for r in reports]

    sem = [r.get("semantics", {}) for r in reports]
    return [
        ("status", each(lambda r: r.get("status"))),
        (
            "jobs finished / unfinished / failed",
            [f"{r.get('finished')}/{r.get('unfinished')}/{r.get('failed')}" for r in reports],
        ),
        ("JCT avg (s)", each(lambda r: r["jct_s"]["avg"])),
        ("JCT median (s)", each(lambda r: r["jct_s"]["median"])),
        ("JCT p95 (s)", each(lambda r: r["jct_s"]["p95"])),
        ("queueing delay avg (s)", each(lambda r: r["queueing_delay_s"]["avg"])),
        ("queueing delay p95 (s)", each(lambda r: r["queueing_delay_s"]["p95"])),
        ("makespan (s)", each(lambda r: r["makespan_s"])),
        ("preemptions", each(lambda r: r["preemptions"])),
        ("preemption overhead (s)", each(lambda r: r["preemption_overhead_s"])),
        ("communication overhead (s)", each(lambda r: r["comm_overhead_s"])),
        ("GPU utilization", each(lambda r: r["utilization"], 3)),
        ("FTF worst rho", each(lambda r: r["ftf"]["worst"], 2)),
        ("FTF unfair fraction", each(lambda r: r["ftf"]["unfair_fraction"], 3)),
        ("invariant violations", each(lambda r: r.get("invariant_violations"))),
        (
            "scheduling",
            [
                f"{x.get('scheduling')}"
                + (f" {x.get('round_s'):g} s" if x.get("scheduling") == "round" else "")
                for x in sem
            ],
        ),
        ("preemption cost", [_on(x.get("preemption_cost")) for x in sem]),
        ("communication model", [_on(x.get("comm_model")) for x in sem]),
        ("failed jobs in averages", [_on(x.get("count_failed")) for x in sem]),
        ("FTF contention counts", [x.get("ftf_contention", "jobs") for x in sem]),
        ("semantics profile", [str(x.get("profile", "none")) for x in sem]),
        ("placement", [str(x.get("placement", "topology")) for x in sem]),
        ("Gittins index", [str(x.get("gittins", "paper")) for x in sem]),
        ("at equal rank", [str(x.get("equal_rank", "keep")) for x in sem]),
        ("SRTF remaining time", [str(x.get("srtf_remaining", "work")) for x in sem]),
        ("percentiles", [str(x.get("percentiles", "linear")) for x in sem]),
        ("batch sizes from", [str(x.get("batch_size", "model")) for x in sem]),
        ("restart overhead (s)", [f"{x.get('restart_overhead_s', 0.0):g}" for x in sem]),
        ("one-GPU servers", [_on(x.get("one_gpu_servers")) for x in sem]),
        ("restart overhead total (s)", each(lambda r: r.get("restart_overhead_s", 0.0))),
    ]
