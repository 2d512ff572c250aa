"""The MAST report of a run database, as `mastemu report --json` prints it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from actors.mast.report.figures import ReportOptions
from actors.mast.report.reporter import MastReporter


def report_of(db: Path, **options: Any) -> dict[str, Any]:
    """The report of the run in `db`, with `ReportOptions` fields given as keywords."""
    return asyncio.run(MastReporter(ReportOptions(**options)).report(db))
