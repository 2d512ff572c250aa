"""`mastemu view RUN.db`: the scenario player, one self-contained HTML file.

The page comes from the viewer the run's system registered
(`emulator.registry.VIEWERS`, filled by the `mastemu.plugins` entry point):
the command line knows no system.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import webbrowser
from pathlib import Path
from typing import Any

from emulator.cli.args import output_file
from emulator.cli.output import EXIT_OK
from emulator.errors import InputError


def viewer_for(db: Path) -> Any:
    """The viewer of the system a recorded run emulated ("" for declared actors only)."""
    from emulator.registry import VIEWERS, load_plugins
    from emulator.run.replay import run_meta
    from emulator.run.scenario import parse_raw

    load_plugins()
    meta = asyncio.run(run_meta(db))
    raw = parse_raw(meta.scenario_text, f"{db} (stored scenario)")
    system = raw.get("system") if isinstance(raw, dict) else None
    kind = system.get("kind", "") if isinstance(system, dict) else ""
    viewer = VIEWERS.get(kind) if isinstance(kind, str) else None
    if viewer is None:
        raise InputError(str(db), "system.kind", f"no player for runs of {kind!r}")
    return viewer


def cmd_view(args: argparse.Namespace) -> int:
    from emulator.cli.reading import open_run

    open_run(args.db)
    out: Path = args.out if args.out is not None else args.db.with_suffix(".html")
    output_file(out)
    page = asyncio.run(viewer_for(args.db).render_view(args.db))
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as error:
        raise InputError(str(out), "", f"cannot write: {error.strerror or error}") from None
    print(f"player: {out} ({len(page.encode()) / 1e6:.1f} MB)", file=sys.stderr)
    if args.open:
        webbrowser.open(out.resolve().as_uri())
    return EXIT_OK


def add_parser(sub: Any) -> None:
    """The `view` subcommand's arguments."""
    view = sub.add_parser(
        "view",
        help="write a run's scenario player (one HTML file)",
        description="Write one self-contained HTML page that plays a recorded run: regions "
        "and clusters, leaders and epochs, the queue and auctions, the WAN, a timeline "
        "with the fault windows, and the event log. Opens with no network access.",
    )
    view.add_argument("db", type=Path, metavar="RUN.db", help="a run database")
    view.add_argument(
        "--out", type=Path, metavar="FILE.html", help="default: RUN.html beside the database"
    )
    view.add_argument("--open", action="store_true", help="open it in the web browser")
