"""The top of a MAST report's page: the scenario's description and what happened in the run.

`read_facts` takes from the run database what the report's figures do not
hold: the scenario's own description, every leadership change (the
lease history: a failover is a grant at epoch 2 or later), the invariant
violations with their times, and what each fault hit (the trace's fault
events; a second of reading for quickstart's trace). `story` writes a short account
from those and the report: the workloads' fate, the fault windows with
their times (numbered as on the plots), the failovers, the violations,
and the headline figures. Plain strings: the page escapes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.errors import InputError
from emulator.run.scenario import parse_raw
from store import Store
from store.leases import history
from store.runs import get_run_meta, list_violations
from store.trace import iter_trace

# Beyond this many, a list says how many more there were.
LISTED_MAX = 12


@dataclass
class Facts:
    description: str = ""
    # (t_s, role, holder, epoch) of every grant after a role's first.
    failovers: list[tuple[float, str, str, int]] = field(default_factory=list)
    # (t_s, invariant, message)
    violations: list[tuple[float, str, str]] = field(default_factory=list)
    # (start_s, action) → what the fault hit ("cm/ap-south/c0/0 (leader of cm/ap-south/c0)"):
    # the report's windows name only the action.
    fault_targets: dict[tuple[float, str], str] = field(default_factory=dict)


async def read_facts(db: Path) -> Facts:
    async with Store.open_ctx(db) as store:
        meta = await get_run_meta(store)
        grants = await history(store)
        violations = await list_violations(store)
        targets = {
            (row.t_us / 1e6, row.type.rpartition(".")[0]): _target(row.payload)
            async for row in iter_trace(store, kinds=("fault",), batch=64)
            if row.type.endswith(".start")
        }
    description = ""
    if meta is not None and meta.scenario_text:
        try:
            raw = parse_raw(meta.scenario_text, f"{db} (stored scenario)")
        except InputError:
            raw = {}
        text = raw.get("description") if isinstance(raw, dict) else None
        description = text if isinstance(text, str) else ""
    return Facts(
        description=description,
        failovers=sorted(
            (g.granted_at_us / 1e6, g.role, g.holder, g.epoch) for g in grants if g.epoch > 1
        ),
        violations=[(v.t_us / 1e6, v.invariant, v.message) for v in violations],
        fault_targets={k: v for k, v in targets.items() if v},
    )


def _target(payload: Any) -> str:
    """What a fault's start event says it hits, in a few words."""
    if not isinstance(payload, dict):
        return ""
    if isinstance(payload.get("actor"), str):
        chosen = payload.get("target")
        return payload["actor"] + (f" ({chosen})" if isinstance(chosen, str) else "")
    for key, sep in (("regions", "|"), ("between", "↔"), ("hosts", ", ")):
        value = payload.get(key)
        if isinstance(value, list):
            return sep.join(str(v) for v in value)
    return ""


def clock(t_s: float) -> str:
    """Emulated time as h:mm:ss (the page's times; the plots' axes are in hours)."""
    whole = int(t_s)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def story(report: dict[str, Any], facts: Facts) -> dict[str, Any]:
    """{"description", "summary": [sentences], "faults", "failovers", "violations": [lines]}."""
    w = report.get("workloads") or {}
    waiting = sum(int(w.get(k) or 0) for k in ("pending", "waiting_data", "dispatching"))
    hours = float(report.get("emulated_s") or 0) / 3600
    summary = [
        f"In {hours:g} h of emulated time, {w.get('submitted', 0):,} workloads were submitted: "
        f"{w.get('completed', 0):,} done, {w.get('running', 0):,} running and {waiting:,} "
        f"waiting at the end, {w.get('failed', 0):,} failed, {w.get('lost', 0):,} lost."
    ]
    windows = report.get("fault_windows") or []
    kinds = sorted({str(name).split()[0] for _s, _e, name in windows})
    if windows:
        summary.append(
            f"{len(windows)} fault window(s) ({', '.join(kinds)}), shaded and numbered on the "
            "plots below."
        )
    else:
        summary.append("No faults were injected.")
    roles = sorted({role for _t, role, _h, _e in facts.failovers})
    if facts.failovers:
        summary.append(
            f"{len(facts.failovers)} leadership change(s), of {', '.join(roles)}; "
            f"{int(report.get('preemptions') or 0):,} preemption(s)."
        )
    else:
        summary.append(
            f"No role changed leader; {int(report.get('preemptions') or 0):,} preemption(s)."
        )
    n_violations = int(report.get("invariant_violations") or 0) or len(facts.violations)
    summary.append(
        f"{n_violations} invariant violation(s)." if n_violations else "No invariant was violated."
    )
    gpu, slo = report.get("gpu_allocation_rate"), report.get("slo_violation_rate")
    if gpu is not None or slo is not None:
        parts = []
        if gpu is not None:
            parts.append(f"GPUs were {100 * gpu:.1f}% allocated on average")
        if slo is not None:
            parts.append(f"{100 * slo:.1f}% of the judged scheduling events missed the SLO")
        summary.append("; ".join(parts) + ".")
    # In the report's order: the <ol> on the page numbers them as the plots do.
    faults = [
        f"{clock(start)}–{clock(end)} {name} {facts.fault_targets.get((start, name), '')}".strip()
        for start, end, name in windows
    ]
    failovers = [
        f"{clock(t)} {role}: {holder} leads (epoch {epoch})"
        for t, role, holder, epoch in facts.failovers
    ]
    violations = [f"{clock(t)} {inv}: {msg}" for t, inv, msg in facts.violations]
    return {
        "description": facts.description,
        "summary": summary,
        "faults": faults,  # every one: the plots number them
        "failovers": _capped(failovers),
        "violations": _capped(violations),
    }


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= LISTED_MAX:
        return lines
    return [*lines[:LISTED_MAX], f"… and {len(lines) - LISTED_MAX} more"]
