"""The commands that read: list, policies, schema, replay, export, check, report, bench."""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
from pathlib import Path
from typing import Any

from emulator.cli.args import output_file, output_folder
from emulator.cli.output import EXIT_OK, EXIT_VIOLATION
from emulator.errors import InputError
from emulator.units import format_us


def cmd_list(args: argparse.Namespace) -> int:
    from emulator.registry import builtin_scenarios
    from emulator.run.scenario import load_scenario_file

    if args.bugs:
        return _list_bugs(args.json)
    listed = []
    for name, path in builtin_scenarios().items():
        scenario, _ = load_scenario_file(path)
        listed.append((name, scenario))
    if args.json:
        rows = [
            {"name": n, "duration_s": s.duration / 1e6, "description": s.description}
            for n, s in listed
        ]
        print(json.dumps(rows, sort_keys=True))
        return EXIT_OK
    for name, scenario in listed:
        print(f"{name:<24} {format_us(scenario.duration):>14}  {scenario.description}")
    return EXIT_OK


def _list_bugs(as_json: bool) -> int:
    """`list --bugs`: the seeded protocol bugs (emulator/bugs.py), shallow first."""
    from emulator.bugs import DEPTHS, known_bugs
    from emulator.registry import load_plugins

    load_plugins()
    bugs = sorted(known_bugs().values(), key=lambda b: (DEPTHS.index(b.depth), b.name))
    if as_json:
        rows = [
            {
                "name": b.name,
                "depth": b.depth,
                "invariant": b.invariant,
                "witness": str(b.witness) if b.witness else None,
                "description": b.description,
                "chaos_caught": b.chaos_caught,
                "chaos_seeds_tried": b.chaos_seeds_tried,
            }
            for b in bugs
        ]
        print(json.dumps(rows, sort_keys=True))
        return EXIT_OK
    for b in bugs:
        print(f"{b.name:<36} {b.depth:<8} {b.invariant:<18} {b.description}")
    return EXIT_OK


def cmd_policies(args: argparse.Namespace) -> int:
    from emulator.registry import SYSTEMS, load_plugins

    load_plugins()
    # A system without a `policies` hook (the lease demonstration) has none to choose.
    listed = {
        kind: list(system.policies())
        for kind, system in sorted(SYSTEMS.items())
        if callable(getattr(system, "policies", None))
    }
    if args.json:
        print(json.dumps(listed, sort_keys=True))
    else:
        for kind, names in listed.items():
            print(f"{kind:<10} {', '.join(names)}")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from emulator.run.scenario import scenario_json_schema

    text = json.dumps(scenario_json_schema(), indent=2, sort_keys=True)
    if args.out:
        output_file(args.out)
        try:
            args.out.write_text(text + "\n", encoding="utf-8")
        except OSError as error:
            raise InputError(
                str(args.out), "", f"cannot write: {error.strerror or error}"
            ) from None
    else:
        print(text)
    return EXIT_OK


def open_run(path: Path) -> None:
    """Refuse a missing, foreign or damaged run database (StoreError, exit 2) before reading."""
    from store.verify import verify_run

    verify_run(path)


def status_now(db: Path, status: str) -> str:
    """A run's status as people should read it: "running" only while a process writes it."""
    from store.lock import holder

    if status != "running":
        return status
    writer = holder(db)
    if writer is not None:
        return f"running ({writer.describe()})"
    return "killed before it finished (`mastemu resume` continues it)"


def cmd_replay(args: argparse.Namespace) -> int:
    from emulator.run.replay import replay

    open_run(args.db)
    if args.t_from is not None and args.t_to is not None and args.t_from > args.t_to:
        raise InputError("", "", "--from must not be later than --to")
    return asyncio.run(
        replay(args.db, step=args.step, t_from=args.t_from, t_to=args.t_to, grep=args.grep)
    )


def cmd_export(args: argparse.Namespace) -> int:
    from emulator.run.replay import export

    open_run(args.db)
    if args.out is not None:
        output_file(args.out)
    return asyncio.run(export(args.db, fmt=args.format, out=args.out, level=args.level))


def cmd_check(args: argparse.Namespace) -> int:
    from emulator.registry import load_plugins
    from emulator.run.replay import check

    load_plugins()  # the system's checkers (MAST's) are registered by its plugin
    open_run(args.db)
    return asyncio.run(check(args.db, as_json=args.json))


def _bug_names(text: str | None) -> list[str] | None:
    """`--bugs a,b`: registered names only (exit 2 naming the unknown one)."""
    if text is None:
        return None
    from emulator.bugs import check_bugs

    names = [n.strip() for n in text.split(",") if n.strip()]
    check_bugs(names, "--bugs")
    return names


def cmd_bench(args: argparse.Namespace) -> int:
    from emulator.registry import BENCHES, load_plugins

    load_plugins()
    if args.target == "kernel":
        from emulator.run.bench import bench_kernel

        result = bench_kernel(span_us=args.span)
    elif args.target in BENCHES:
        result = BENCHES[args.target](
            {
                "span_us": args.span,
                "seeds": args.seeds,
                "jobs": args.jobs,
                "cluster": getattr(args, "cluster", None),
                "budget_s": getattr(args, "budget_s", None),
                "repetitions": getattr(args, "repetitions", None),
                "bugs": _bug_names(getattr(args, "bugs", None)),
            }
        )
    else:
        known = ", ".join(["kernel", *sorted(BENCHES)])
        raise InputError("", "", f"unknown benchmark {args.target!r} (known: {known})")
    indent = None if args.json else 2
    print(json.dumps(result, sort_keys=True, indent=indent))
    # A benchmark that checks invariants (chaos-sweep) fails like `sweep` does.
    return EXIT_VIOLATION if result.get("violations") else EXIT_OK


def reporter_for(db: Path) -> Any:
    """The reporter of the system a recorded run emulated."""
    from emulator.registry import REPORTERS, load_plugins
    from emulator.run.replay import run_meta
    from emulator.run.scenario import parse_raw

    load_plugins()
    meta = asyncio.run(run_meta(db))
    raw = parse_raw(meta.scenario_text, f"{db} (stored scenario)")
    kind = raw.get("system", {}).get("kind") if isinstance(raw, dict) else None
    reporter = REPORTERS.get(kind) if isinstance(kind, str) else None
    if reporter is None:
        raise InputError(
            str(db), "", "no report for this run (its scenario emulates no system with one)"
        )
    return reporter


def system_summary(db: Path) -> list[tuple[str, str]]:
    """The run's system's rows for the end of `run` (its reporter's `summary`), if it has any."""
    try:
        reporter = reporter_for(db)
    except InputError:
        return []
    summary = getattr(reporter, "summary", None)
    return asyncio.run(summary(db)) if summary is not None else []


def write_job_rows(path: Path, rows: Any, db: Path) -> None:
    """`report --jobs FILE.csv`: the report's per-job rows, columns in the report's order.

    A value the job never had (an end it did not reach) is an empty cell.
    """
    if not isinstance(rows, list):
        raise InputError(
            str(db), "", "no per-job rows in this run's report (cluster runs have them)"
        )
    try:
        with path.open("w", newline="", encoding="utf-8") as out:
            if rows:
                writer = csv.DictWriter(out, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    except OSError as error:
        raise InputError(str(path), "", f"cannot write: {error.strerror or error}") from None


def cmd_report(args: argparse.Namespace) -> int:
    from emulator.run.runner import recorded_warnings

    open_run(args.db)
    if args.html:
        output_folder(args.html)
    if args.jobs:
        output_file(args.jobs)
    reporter = reporter_for(args.db)
    report = asyncio.run(reporter.report(args.db))
    if args.jobs:
        write_job_rows(args.jobs, report.get("jobs"), args.db)
    if isinstance(report.get("status"), str):
        report["status"] = status_now(args.db, report["status"])
    # Input the run accepted but warned about when it started (a job no region holds).
    warnings = [str(w) for w in asyncio.run(recorded_warnings(args.db))]
    report["warnings"] = warnings
    if args.html:
        page = reporter.render_html(report, args.db, args.html)
        print(f"html: {page}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(reporter.render_text([report]))
        for warning in warnings:
            print(f"warning: {warning}")
    return EXIT_VIOLATION if report.get("invariant_violations") else EXIT_OK
