"""The MAST reporter: what `mastemu report` and `mastemu compare` call for a MAST run.

`actors.plugin` registers one `MastReporter` as the reporter of
`[system] kind = "mast"`; it ties the parts of this folder together: the
figures read from the run database (`figures`), the terminal table (`text`)
and the HTML page with its plots (`page`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.mast.report import page, text
from actors.mast.report.figures import ReportOptions, read_report
from store import Store
from store.mast import fleet, queue
from store.runs import list_violations


class MastReporter:
    """`mastemu report` / `compare` for runs of `[system] kind = "mast"`."""

    def __init__(self, options: ReportOptions | None = None) -> None:
        self.options = options or ReportOptions()

    async def report(self, db: Path) -> dict[str, Any]:
        async with Store.open_ctx(db) as store:
            return await read_report(store, self.options)

    async def summary(self, db: Path) -> list[tuple[str, str]]:
        """What the end of `mastemu run` says about the workloads: cheap reads, no trace pass.

        Lost workloads are the `no-lost-workload` invariant's violations; the
        GPU figure is what jobs hold at the end (`report` gives the rate over
        the run).
        """
        async with Store.open_ctx(db) as store:
            states = await queue.count_by_state(store)
            total = held = 0
            for cluster in await fleet.clusters(store):
                if cluster.ml:
                    total += sum(m.gpus for m, _ in await fleet.machines(store, cluster.id))
                    held += sum(a.gpus for a in await fleet.allocations(store, cluster.id))
            lost = sum(v.invariant == "no-lost-workload" for v in await list_violations(store))
        done = states.get("DONE", 0)
        running = states.get("RUNNING", 0) + states.get("DISPATCHING", 0)
        waiting = sum(states.get(s, 0) for s in queue.QUEUED)
        failed = states.get("FAILED", 0)
        withdrawn = states.get("WITHDRAWN", 0)
        line = f"{done:,} done, {running:,} running, {waiting:,} waiting"
        line += f", {failed:,} failed" if failed else ""
        line += f", {withdrawn:,} withdrawn" if withdrawn else ""
        share = f" ({held / total:.1%})" if total else ""
        return [
            ("workloads", f"{line}, {lost:,} lost (of {sum(states.values()):,} submitted)"),
            ("GPUs in use", f"{held:,} of {total:,}{share} at the end"),
        ]

    def render_text(self, reports: list[dict[str, Any]]) -> str:
        return text.render_text(reports)

    def render_html(self, report: dict[str, Any], db: Path, out_dir: Path) -> Path:
        return page.render_html(report, db, out_dir)
