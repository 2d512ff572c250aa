"""`mastemu`: list, run, replay, export, check, schema, bench, sweep, shrink, resume.

Exit codes: 0 ok, 1 an invariant was violated, 2 bad input (the message names
the file and the key path; never a traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from emulator.errors import InputError
from emulator.units import format_us, parse_duration_us
from store import StoreError
from store.migrations import APPLICATION_ID

EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


def _duration(text: str) -> int:
    try:
        value = parse_duration_us(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    except OverflowError:  # '999…9h' overflows float → int
        raise argparse.ArgumentTypeError(f"too large: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError("must be between 0 and 2**63-1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mastemu",
        description="Deterministic emulator of geo-distributed ML-training schedulers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    sub.add_parser(
        "list", help="list the built-in scenarios", description="List built-in scenarios."
    )

    policies = sub.add_parser(
        "policies",
        help="list the scheduling policies of each system kind",
        description="List the policies a scenario's `[system] policy` may name, per system kind.",
    )
    policies.add_argument("--json", action="store_true", help="print {kind: [policy, …]}")

    run = sub.add_parser("run", help="run a scenario", description="Run a scenario to its end.")
    run.add_argument("scenario", metavar="SCENARIO|FILE", help="built-in name or a TOML file")
    run.add_argument("--seed", type=_seed, help="override the scenario's seed")
    run.add_argument("--speed", type=_speed, help="scaled mode: emulated seconds per wall second")
    run.add_argument("--until", type=_duration, metavar="T", help="stop at emulated time T")
    run.add_argument(
        "--out", type=Path, metavar="RUN.db", help="run database (default runs/NAME-SEED.db)"
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")

    replay = sub.add_parser(
        "replay", help="print a recorded run's events", description="Print events in order."
    )
    replay.add_argument("db", type=Path, metavar="RUN.db")
    replay.add_argument("--step", action="store_true", help="wait for Enter between events")
    replay.add_argument("--from", dest="t_from", type=_duration, metavar="T")
    replay.add_argument("--to", dest="t_to", type=_duration, metavar="T")
    replay.add_argument("--grep", metavar="TEXT", help="only events whose line contains TEXT")

    export = sub.add_parser(
        "export", help="export a run's trace", description="Export a run's trace."
    )
    export.add_argument("db", type=Path, metavar="RUN.db")
    export.add_argument("--format", choices=["jsonl", "chrome"], default="jsonl")
    export.add_argument("--out", type=Path, help="output file (default: stdout)")

    check = sub.add_parser(
        "check",
        help="re-check invariants over a recorded run",
        description="Offline invariant check.",
    )
    check.add_argument("db", type=Path, metavar="RUN.db")

    schema = sub.add_parser("schema", help="print the JSON Schema of scenario files")
    schema.add_argument("--out", type=Path, help="write to a file instead of stdout")

    report = sub.add_parser(
        "report", help="metrics of a recorded run", description="Report a run's metrics."
    )
    report.add_argument("db", type=Path, metavar="RUN.db")
    report.add_argument("--json", action="store_true", help="print one JSON object")
    report.add_argument("--html", type=Path, metavar="DIR", help="write an HTML page with plots")

    compare = sub.add_parser(
        "compare",
        help="run one scenario under several policies",
        description="Run a scenario once per policy (same world, same workload) and compare.",
    )
    compare.add_argument("scenario", metavar="SCENARIO|FILE")
    compare.add_argument(
        "--policies",
        required=True,
        help="comma-separated, e.g. mast,federated (an unknown name is answered with the list)",
    )
    compare.add_argument("--seed", type=_seed, help="override the scenario's seed")
    compare.add_argument("--until", type=_duration, metavar="T", help="stop at emulated time T")
    compare.add_argument("--json", action="store_true", help='print {"runs": [reports]}')

    bench = sub.add_parser("bench", help="benchmarks (print JSON)", description="Benchmarks.")
    bench.add_argument(
        "target", help="kernel, or a benchmark of an emulated system (gms, rms, day…)"
    )
    bench.add_argument("--json", action="store_true", help="print only the JSON object")
    bench.add_argument("--span", type=_duration, default=None, metavar="T", help="emulated span")
    from emulator.run.sweep import job_count, seed_range

    bench.add_argument(
        "--seeds", type=seed_range, metavar="A-B", help="seeds of a sweep (chaos-sweep: 1-200)"
    )
    bench.add_argument("--jobs", type=job_count, metavar="N", help="worker processes of a sweep")

    from emulator.run.sweep import job_count, seed_range

    sweep = sub.add_parser(
        "sweep",
        help="run a scenario over many seeds in parallel",
        description="Run one scenario once per seed in parallel processes; exit 1 on any "
        "violation. Databases of failing runs are kept as KEEP_DIR/NAME-SEED.db.",
    )
    sweep.add_argument("scenario", metavar="SCENARIO|FILE")
    sweep.add_argument(
        "--seeds", type=seed_range, required=True, metavar="A-B", help="inclusive, or one seed N"
    )
    sweep.add_argument("--jobs", type=job_count, metavar="N", help="default: CPU count")
    sweep.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    sweep.add_argument(
        "--keep-dir", type=Path, default=Path("runs"), help="for failing runs (default: runs)"
    )

    shrink = sub.add_parser(
        "shrink",
        help="minimise the faults of a failing run",
        description="Remove faults from a failing run's schedule while the violation "
        "persists; write the smallest scenario that still reproduces it.",
    )
    shrink.add_argument("db", type=Path, metavar="RUN.db")
    shrink.add_argument("--out", type=Path, metavar="FILE", help="default: RUN.min.toml")
    shrink.add_argument("--invariant", help="the violation to keep (default: the first)")
    shrink.add_argument(
        "--runs-max", type=job_count, default=200, metavar="N", help="re-runs at most (200)"
    )
    resume = sub.add_parser(
        "resume",
        help="continue a killed or interrupted run",
        description="Continue a run whose process was killed (or interrupted) from its "
        "last committed event, every actor restarting from the store; a finished run is "
        "left as it is (exit 0).",
    )
    resume.add_argument("db", type=Path, metavar="RUN.db")
    resume.add_argument("--until", type=_duration, metavar="T", help="stop at emulated time T")
    resume.add_argument("--speed", type=_speed, help="scaled mode (as for `run`)")
    resume.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "list": cmd_list,
        "policies": cmd_policies,
        "run": cmd_run,
        "replay": cmd_replay,
        "export": cmd_export,
        "check": cmd_check,
        "schema": cmd_schema,
        "report": cmd_report,
        "compare": cmd_compare,
        "bench": cmd_bench,
        "sweep": cmd_sweep,
        "shrink": cmd_shrink,
        "resume": cmd_resume,
    }
    try:
        return commands[args.command](args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StoreError as error:
        # StoreError: a run database that cannot be opened or written (bad --out).
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


# ---- list / schema ---------------------------------------------------------
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


# ---- run -------------------------------------------------------------------
def resolve_scenario(ref: str) -> tuple[Any, str, str]:
    """A built-in name or a file path → (scenario, text, source)."""
    from emulator.registry import builtin_scenarios
    from emulator.run.scenario import load_scenario_file

    path = Path(ref)
    if not path.is_file():
        builtin = builtin_scenarios().get(ref)
        if builtin is None:
            raise InputError(ref, "", "no such file or built-in scenario (see `mastemu list`)")
        path = builtin
    scenario, text = load_scenario_file(path)
    return scenario, text, str(path)


def cmd_run(args: argparse.Namespace) -> int:
    from emulator.run.runner import execute, plan_run

    scenario, text, source = resolve_scenario(args.scenario)
    plan = plan_run(scenario, text, source)
    seed = scenario.seed if args.seed is None else args.seed
    out = args.out or Path("runs") / f"{scenario.name}-{seed}.db"
    _check_replaceable(out)
    print(f"scenario: {scenario.name}  seed: {seed}  out: {out}")
    end_us = (
        int(scenario.duration) if args.until is None else min(args.until, int(scenario.duration))
    )
    show = not args.no_progress and sys.stderr.isatty()
    with _progress(show, end_us) as progress:
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
    _print_summary(result, args.scenario)
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_VIOLATION if result.violations else EXIT_OK


def _check_replaceable(out: Path) -> None:
    """A run deletes the file at `out` first: refuse unless it is an old run database."""
    if out.is_dir():
        raise InputError(str(out), "", "is a directory, not a run database")
    if not out.is_file() or out.stat().st_size == 0:
        return
    app_id = None
    # Read-only, and through SQLite itself: a killed run's header lives in its WAL.
    with contextlib.suppress(sqlite3.Error):
        uri = out.resolve().as_uri() + "?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id != APPLICATION_ID:
        raise InputError(str(out), "", "exists and is not a mastemu run database; not replacing it")


class _progress:
    """A rich progress bar on stderr (emulated time, events/s), or nothing."""

    def __init__(self, show: bool, end_us: int) -> None:
        self.show = show
        self.end_us = end_us
        self.bar: Any = None

    def __enter__(self) -> Callable[[Any], None] | None:
        if not self.show:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("[bold]emulated[/] {task.fields[now]}"),
            BarColumn(),
            TextColumn("{task.percentage:>5.1f}%  {task.fields[rate]} events/s"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.bar.start()
        task = self.bar.add_task("run", total=max(1, self.end_us), now="0s", rate="-")
        import time

        start = time.perf_counter()

        def update(kernel: Any) -> None:
            elapsed = max(1e-9, time.perf_counter() - start)
            self.bar.update(
                task,
                completed=kernel.now_us,
                now=format_us(kernel.now_us),
                rate=f"{kernel.events / elapsed:,.0f}",
            )

        return update

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _print_summary(result: Any, ref: str) -> None:
    # "events" are trace events, as replay/check/export count them; "steps" are
    # the kernel's heap events (a delivery is one of each; a store write only a trace event).
    rate = result.trace_events / result.wall_s if result.wall_s > 0 else 0.0
    rows = [
        ("status", result.status),
        ("emulated", format_us(result.end_t_us)),
        ("events", f"{result.trace_events:,} ({rate:,.0f}/s wall)"),
        ("kernel steps", f"{result.events:,}"),
        ("deliveries", f"{result.deliveries:,}"),
        ("drops", f"{result.drops:,}"),
        ("crashes", f"{result.crashes:,}"),
        ("fault windows", f"{len(result.fault_windows)}"),
        ("wall time", f"{result.wall_s:.2f}s"),
    ]
    if result.lag_s_max is not None:
        rows.append(("max lag", f"{result.lag_s_max * 1000:.1f}ms"))
    rows.append(("run database", str(result.out)))
    for key, value in rows:
        print(f"{key:>14}: {value}")
    for seq, t_us, invariant, message in result.violations[:20]:
        print(f"VIOLATION {invariant} at #{seq} ({format_us(t_us)}): {message}")
    if result.violations:
        print(f"reproduce: mastemu run {ref} --seed {result.seed}")
    print(f"trace-hash: {result.trace_hash}")


# ---- replay / export / check -------------------------------------------------
def _open_run(path: Path) -> None:
    if not path.is_file():
        raise InputError(str(path), "", "no such run database")


def cmd_replay(args: argparse.Namespace) -> int:
    from emulator.run.replay import replay

    _open_run(args.db)
    if args.t_from is not None and args.t_to is not None and args.t_from > args.t_to:
        raise InputError("", "", "--from must not be later than --to")
    return asyncio.run(
        replay(args.db, step=args.step, t_from=args.t_from, t_to=args.t_to, grep=args.grep)
    )


def cmd_export(args: argparse.Namespace) -> int:
    from emulator.run.replay import export

    _open_run(args.db)
    return asyncio.run(export(args.db, fmt=args.format, out=args.out))


def cmd_check(args: argparse.Namespace) -> int:
    from emulator.registry import load_plugins
    from emulator.run.replay import check

    load_plugins()  # the system's checkers (MAST's) are registered by its plugin
    _open_run(args.db)
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


# ---- sweep / shrink (emulator/run/sweep.py, emulator/run/shrink.py) -----------------------
def cmd_sweep(args: argparse.Namespace) -> int:
    from emulator.run.sweep import command

    return command(args)


def cmd_shrink(args: argparse.Namespace) -> int:
    from emulator.run.shrink import command

    return command(args)


def cmd_resume(args: argparse.Namespace) -> int:
    from emulator.run.resume import command

    return command(args)


def _reporter_for(db: Path) -> Any:
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
    _open_run(args.db)
    reporter = _reporter_for(args.db)
    report = asyncio.run(reporter.report(args.db))
    if args.html:
        page = reporter.render_html(report, args.db, args.html)
        print(f"html: {page}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(reporter.render_text([report]))
    return EXIT_VIOLATION if report.get("invariant_violations") else EXIT_OK


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
        dbs.append(out)
    reporter = _reporter_for(dbs[0])
    reports = [asyncio.run(reporter.report(db)) for db in dbs]
    if args.json:
        print(json.dumps({"runs": reports}, sort_keys=True))
    else:
        print(reporter.render_text(reports))
    return EXIT_VIOLATION if any(r.get("invariant_violations") for r in reports) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
