"""The commands that run: run, resume, sweep, shrink, compare."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from emulator.cli.output import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_VIOLATION,
    Progress,
    actor_error_lines,
    print_summary,
)
from emulator.cli.reading import reporter_for
from emulator.errors import InputError
from emulator.run.runner import check_replaceable
from emulator.run.scenario import resolve_scenario
from emulator.units import format_us


def cmd_run(args: argparse.Namespace) -> int:
    from emulator.run.runner import execute, plan_run

    scenario, text, source = resolve_scenario(args.scenario)
    plan = plan_run(scenario, text, source)
    seed = scenario.seed if args.seed is None else args.seed
    out = args.out or Path("runs") / f"{scenario.name}-{seed}.db"
    check_replaceable(out)
    print(f"scenario: {scenario.name}  seed: {seed}  out: {out}")
    end_us = (
        int(scenario.duration) if args.until is None else min(args.until, int(scenario.duration))
    )
    show = not args.no_progress and sys.stderr.isatty()
    with Progress(show, end_us) as progress:
        result = asyncio.run(
            execute(
                plan,
                seed=seed,
                out=out,
                speed=args.speed,
                until_us=args.until,
                progress=progress,
                handle_signals=True,
            )
        )
    print_summary(result, args.scenario)
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_VIOLATION if result.failed else EXIT_OK


def cmd_sweep(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """`mastemu sweep`: exit 1 if any seed violated an invariant or crashed, else 0."""
    from emulator.run.sweep import SeedRun, seed_lines, summary_lines, sweep

    out = out or sys.stdout
    # With --json, stdout carries only the JSON object; progress goes to stderr.
    progress = sys.stderr if args.json else out
    jobs = args.jobs or os.cpu_count() or 1
    seeds: range = args.seeds
    print(
        f"sweep: {args.scenario}  seeds {seeds.start}-{seeds.stop - 1}  jobs {jobs}",
        file=progress,
    )

    def show(run: SeedRun) -> None:
        for line in seed_lines(run, f"mastemu run {args.scenario} --seed {run.seed}"):
            print(line, file=progress)
        with contextlib.suppress(OSError):
            progress.flush()

    result = sweep(args.scenario, seeds, jobs=jobs, keep_dir=args.keep_dir, on_result=show)
    for line in summary_lines(result):
        print(line, file=progress)
    if args.json:
        print(json.dumps(result.to_json(), sort_keys=True), file=out)
    return 1 if result.violations else 0


def cmd_shrink(args: argparse.Namespace) -> int:
    from emulator.run.shrink import shrink_run

    return shrink_run(args.db, invariant=args.invariant, target=args.out, runs_max=args.runs_max)


def cmd_resume(args: argparse.Namespace) -> int:
    """`mastemu resume RUN.db [--until T] [--speed X]`; exit codes as for `run`."""
    from emulator.run.resume import FINISHED, AlreadyFinished, read_meta, resume
    from emulator.run.runner import run_end_us
    from emulator.run.scenario import decode_scenario

    db: Path = args.db
    meta = asyncio.run(read_meta(db))
    if meta.status in FINISHED:
        at = format_us(meta.end_t_us) if meta.end_t_us is not None else "its end"
        print(f"{db}: the run already finished ({meta.status} at {at}); nothing to resume")
        return EXIT_OK
    scenario = decode_scenario(meta.scenario_text, f"{db} (stored scenario)")
    print(f"resuming: {db}  scenario: {meta.scenario_name}  seed: {meta.seed}  ({meta.status})")
    show = not args.no_progress and sys.stderr.isatty()
    with Progress(show, run_end_us(scenario, args.until)) as progress:
        outcome = asyncio.run(
            resume(
                db,
                until_us=args.until,
                speed=args.speed,
                progress=progress,
                handle_signals=True,
            )
        )
    if isinstance(outcome, AlreadyFinished):  # finished between the two reads
        print(f"{db}: the run already finished ({outcome.status}); nothing to resume")
        return EXIT_OK
    print_summary(outcome, outcome.scenario)
    if outcome.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_VIOLATION if outcome.failed else EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from emulator.run.runner import execute, plan_run
    from emulator.run.scenario import convert_scenario, parse_raw

    _, text, source = resolve_scenario(args.scenario)
    raw = parse_raw(text, source)
    if not isinstance(raw, dict) or not isinstance(raw.get("system"), dict):
        raise InputError(str(source), "", "compare needs a scenario with a [system]")
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if not policies:
        raise InputError("--policies", "", "name at least one policy")
    dbs = []
    failed = False
    for policy in policies:
        variant = {**raw, "system": {**raw["system"], "policy": policy}}
        variant_text = json.dumps(variant, sort_keys=True)
        scenario = convert_scenario(variant, f"{source} (policy {policy})")
        plan = plan_run(scenario, variant_text, f"{source} (policy {policy})")
        seed = scenario.seed if args.seed is None else args.seed
        out = Path("runs") / f"{scenario.name}-{policy}-{seed}.db"
        result = asyncio.run(execute(plan, seed=seed, out=out, until_us=args.until))
        print(
            f"{policy}: {result.status}  trace-hash: {result.trace_hash}  ({out})", file=sys.stderr
        )
        for line in actor_error_lines(result.actor_errors, result.status):
            print(f"{policy}: {line}", file=sys.stderr)
        failed = failed or result.failed
        dbs.append(out)
    reporter = reporter_for(dbs[0])
    reports = [asyncio.run(reporter.report(db)) for db in dbs]
    if args.json:
        print(json.dumps({"runs": reports}, sort_keys=True))
    else:
        print(reporter.render_text(reports))
    return EXIT_VIOLATION if failed else EXIT_OK
