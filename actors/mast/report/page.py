"""The HTML page of a MAST report (`mastemu report --html DIR`).

One self-contained `index.html` beside its PNG plots: the report's rows (as
in the terminal table), the plots, and the report's JSON without its long
series. Every value from the run is HTML-escaped: scenario names and paths
come from the user.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from actors.mast.report.plots import write_plots
from actors.mast.report.text import report_rows


def _headline(report: dict[str, Any]) -> dict[str, Any]:
    """The report without its series and CDFs: the JSON shown at the foot of the page."""
    return {k: v for k, v in report.items() if k not in ("series", "slo_series", "cdf")}


def render_html(report: dict[str, Any], db: Path, out_dir: Path) -> Path:
    """Write `out_dir/index.html`: the report's rows, its plots and its JSON; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(report, out_dir)
    rows = report_rows([report])
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
