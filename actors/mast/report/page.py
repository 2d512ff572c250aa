"""The HTML page of a MAST report (`mastemu report --html DIR`).

One `index.html` beside its PNG plots and `report.json` (the whole report,
linked from the page rather than dumped on it): at the top the scenario's
description and what happened in the run (`story`: the workloads' fate,
the fault windows with their times, numbered as on the plots, failovers,
violations), then the plots side by side (a CSS grid, two columns on a
wide screen), then the report's rows (as in the terminal table, each with
what it measures). Every value from the run is HTML-escaped: scenario
names, descriptions and paths come from the user.
"""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path
from typing import Any

from actors.mast.report.plots import write_plots
from actors.mast.report.story import read_facts, story
from actors.mast.report.text import report_rows


def render_html(report: dict[str, Any], db: Path, out_dir: Path) -> Path:
    """Write `out_dir/index.html`, its plots and `report.json`; return the page's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(report, out_dir)
    (out_dir / "report.json").write_text(
        json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    # A page is drawn outside any event loop (the CLI, once the report is read): what
    # the report's figures do not hold (description, lease history) is read here.
    told = story(report, asyncio.run(read_facts(db)))
    rows = report_rows([report])
    body = []
    for label, vals, what in rows:
        if not vals:
            heading = f"{label} ({what})" if what else label
            body.append(f'<tr><th colspan="3" class="section">{html.escape(heading)}</th></tr>')
        else:
            body.append(
                f"<tr><td>{html.escape(label.strip())}</td><td>{html.escape(vals[0])}</td>"
                f'<td class="what">{html.escape(what)}</td></tr>'
            )
    images = "\n".join(
        f'<figure><img src="{html.escape(name)}" alt="{html.escape(caption)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        for name, caption in plots
    )
    description = told["description"]
    happened = "".join(f"{html.escape(line)} " for line in told["summary"]).strip()
    lists = ""
    for key, heading in (
        ("faults", "Fault windows"),
        ("failovers", "Leadership changes"),
        ("violations", "Invariant violations"),
    ):
        if told[key]:
            tag = "ol" if key == "faults" else "ul"
            items = "".join(f"<li>{html.escape(line)}</li>" for line in told[key])
            lists += f'<section class="{key}"><h3>{heading}</h3><{tag}>{items}</{tag}></section>\n'
    # Input the run accepted with a warning (`mastemu report` adds them to the report).
    warned = "".join(f"<li>{html.escape(str(w))}</li>" for w in report.get("warnings") or ())
    if warned:
        lists += f'<section class="warnings"><h3>Input warnings</h3><ul>{warned}</ul></section>\n'
    title = f"{report.get('scenario')} · seed {report.get('seed')} · {report.get('policy')}"
    page = out_dir / "index.html"
    page.write_text(
        _PAGE.format(
            title=html.escape(title),
            db=html.escape(str(db)),
            description=html.escape(description) or "(no description)",
            happened=happened,
            lists=lists,
            rows="\n".join(body),
            images=images,
        ),
        encoding="utf-8",
    )
    return page


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mastemu report: {title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em 2em; max-width: 96em; color: #222; }}
h1 {{ margin-bottom: 0.2em; }}
.description {{ font-size: 110%; max-width: 60em; }}
.happened {{ max-width: 60em; }}
.lists {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(22em, 1fr)); gap: 0 2em; }}
.lists h3 {{ margin: 0.6em 0 0.2em 0; font-size: 100%; }}
.lists ol, .lists ul {{ margin: 0; padding-left: 2em; font-size: 90%; }}
.lists section.faults {{ grid-column: 1 / -1; }}
.lists ol {{ column-width: 24em; }}
.plots {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(30em, 1fr));
  gap: 1em 2em; }}
figure {{ margin: 0; }}
figure img {{ width: 100%; height: auto; }}
figcaption {{ font-size: 85%; color: #444; }}
table {{ border-collapse: collapse; margin-top: 1em; }}
td, th {{ padding: 2px 10px; text-align: left; vertical-align: top; }}
td + td {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
td.what {{ text-align: left; color: #555; font-size: 85%; max-width: 48em; white-space: normal; }}
th.section {{ padding-top: 10px; border-bottom: 1px solid #ccc; }}
.meta {{ color: #555; font-size: 90%; }}
</style></head><body>
<h1>{title}</h1>
<p class="description">{description}</p>
<h2>What happened</h2>
<p class="happened">{happened}</p>
<div class="lists">
{lists}</div>
<h2>Plots</h2>
<div class="plots">
{images}
</div>
<h2>Figures</h2>
<table>
{rows}
</table>
<p class="meta">Run database: <code>{db}</code> · the whole report as JSON:
<a href="report.json">report.json</a></p>
</body></html>
"""
