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
  the FTF contention factor counts).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import msgspec

from actors.cluster.engine import Semantics, SimResult
from actors.cluster.jobs import NAMESPACE, JobAccount, result_of
from actors.cluster.metrics import summarize
from actors.policies.cluster.api import TraceJob
from emulator.units import S
from store import Store, kv
from store.runs import get_run_meta, list_violations
from store.trace import iter_trace, last_event_us


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
        gpu_busy_us=sum(r.gpus * (r.run_us + r.checkpoint_us) for r in results),
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
            report: dict[str, Any] = {
                "scenario": meta.scenario_name,
                "seed": meta.seed,
                "policy": fact["policy"],
                "trace_hash": meta.trace_hash,
                "status": meta.status,
                "emulated_s": end_us / S,
                "invariant_violations": len(await list_violations(store)),
                "gpus": fact["gpus"],
                "jobs": len(result.jobs),
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
        headline = {k: v for k, v in report.items() if k != "jct_cdf_s"}
        page = out_dir / "index.html"
        page.write_text(
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>mastemu report: {html.escape(str(report.get('scenario')))}</title></head>"
            f"<body><h1>{html.escape(str(report.get('scenario')))} · "
            f"{html.escape(str(report.get('policy')))}</h1><p>{html.escape(str(db))}</p>"
            f"<table>{rows}</table><figure><img src='jct_cdf.png' alt='JCT CDF'>"
            "<figcaption>CDF of job completion times</figcaption></figure>"
            f"<pre>{html.escape(json.dumps(headline, indent=2, sort_keys=True))}</pre>"
            "</body></html>",
            encoding="utf-8",
        )
        return page


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
    ]
