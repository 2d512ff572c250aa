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


class MastReporter:
    """`mastemu report` / `compare` for runs of `[system] kind = "mast"`."""

    def __init__(self, options: ReportOptions | None = None) -> None:
        self.options = options or ReportOptions()

    async def report(self, db: Path) -> dict[str, Any]:
        async with Store.open_ctx(db) as store:
            return await read_report(store, self.options)

    def render_text(self, reports: list[dict[str, Any]]) -> str:
        return text.render_text(reports)

    def render_html(self, report: dict[str, Any], db: Path, out_dir: Path) -> Path:
        return page.render_html(report, db, out_dir)
