"""The commands that read: list, policies, schema, replay, export, check, report, bench."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from emulator.cli.output import EXIT_OK, EXIT_VIOLATION
from emulator.errors import InputError
from emulator.units import format_us


def cmd_list(args: argparse.Namespace) -> int:
    from emulator.registry import builtin_scenarios
    from emulator.run.scenario import load_scenario_file

    for name, path in builtin_scenarios().items():
        scenario, _ = load_scenario_file(path)
        print(f"{name:<24} {format_us(scenario.duration):>14}  {scenario.description}")
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
    if not path.is_file():
        raise InputError(str(path), "", "no such run database")


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
    return asyncio.run(export(args.db, fmt=args.format, out=args.out))


def cmd_check(args: argparse.Namespace) -> int:
    from emulator.registry import load_plugins
    from emulator.run.replay import check

    load_plugins()  # the system's checkers (MAST's) are registered by its plugin
    open_run(args.db)
    return asyncio.run(check(args.db))


def cmd_bench(args: argparse.Namespace) -> int:
    from emulator.registry import BENCHES, load_plugins

    load_plugins()
    if args.target == "kernel":
        from emulator.run.bench import bench_kernel

        result = bench_kernel(span_us=args.span)
    elif args.target in BENCHES:
        result = BENCHES[args.target](
            {"span_us": args.span, "seeds": args.seeds, "jobs": args.jobs}
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


def cmd_report(args: argparse.Namespace) -> int:
    open_run(args.db)
    reporter = reporter_for(args.db)
    report = asyncio.run(reporter.report(args.db))
    if args.html:
        page = reporter.render_html(report, args.db, args.html)
        print(f"html: {page}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(reporter.render_text([report]))
    return EXIT_VIOLATION if report.get("invariant_violations") else EXIT_OK
