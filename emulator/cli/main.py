"""`mastemu`: the command line. The only place that knows argparse.

Commands that run something are in `running.py`, those that read a run or
the registries in `reading.py`; what a run prints is in `output.py`.
Exit codes: 0 ok, 1 an invariant was violated, 2 bad input (the message
names the file and the key path; never a traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from emulator.cli import exploring, reading, running, viewing
from emulator.cli.args import (
    budget,
    cluster_spec,
    command_line,
    grid_instants,
    job_count,
    negative_values,
    seed_range,
    until,
)
from emulator.cli.args import duration as _duration
from emulator.cli.args import seed as _seed
from emulator.cli.args import speed as _speed
from emulator.cli.output import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK
from emulator.errors import InputError
from emulator.run.collector import run_collector
from store import StoreError


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError("between 0 and 86,400 seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mastemu",
        description="Deterministic emulator of geo-distributed ML-training schedulers.",
        epilog="Exit codes: 0 ok, 1 an invariant was violated or an actor crashed on a bug, "
        "2 bad input (file, key path and why), 130 interrupted (Ctrl-C).",
    )
    parser.add_argument(
        "--version", action="version", version=f"mastemu {version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    listing = sub.add_parser(
        "list", help="list the built-in scenarios", description="List built-in scenarios."
    )
    listing.add_argument(
        "--json", action="store_true", help='print [{"name", "duration_s", "description"}, …]'
    )
    listing.add_argument(
        "--bugs",
        action="store_true",
        help="list the seeded protocol bugs a scenario's `bugs` may name instead "
        '(with --json: [{"name", "depth", "invariant", "witness", "description", …}, …])',
    )

    policies = sub.add_parser(
        "policies",
        help="list the scheduling policies of each system kind",
        description="List the policies a scenario's `[system] policy` may name, per system kind.",
    )
    policies.add_argument("--json", action="store_true", help="print {kind: [policy, …]}")

    run = sub.add_parser("run", help="run a scenario", description="Run a scenario to its end.")
    run.add_argument("scenario", metavar="SCENARIO|FILE", help="built-in name or a TOML/JSON file")
    run.add_argument("--seed", type=_seed, help="override the scenario's seed")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help='set a scenario key by dotted path (system.load=3, faults[0].at="5m"); '
        "the value is TOML, else a string; repeatable",
    )
    run.add_argument(
        "--engine",
        choices=["actors", "reference"],
        default="actors",
        help="actors (default), or the system's reference engine (cluster systems): "
        "no control plane, same run database and report",
    )
    run.add_argument("--speed", type=_speed, help="scaled mode: emulated seconds per wall second")
    run.add_argument(
        "--until", type=until, metavar="T", help="stop at emulated time T (e.g. 30m, 2h)"
    )
    run.add_argument(
        "--out",
        type=Path,
        metavar="RUN.db",
        help="run database (default runs/NAME-SEED.db); its folder must exist",
    )
    run.add_argument(
        "--force",
        action="store_true",
        help="replace an existing run database (never one another process is writing)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")

    replay = sub.add_parser(
        "replay", help="print a recorded run's events", description="Print events in order."
    )
    replay.add_argument("db", type=Path, metavar="RUN.db", help="a run database")
    replay.add_argument(
        "--step",
        action="store_true",
        help="stop at each event with a status line: Enter the next event, d/f/v the next "
        "decision/fault/violation, q quit",
    )
    replay.add_argument(
        "--from", dest="t_from", type=_duration, metavar="T", help="from emulated time T on"
    )
    replay.add_argument(
        "--to", dest="t_to", type=_duration, metavar="T", help="up to (before) emulated time T"
    )
    replay.add_argument("--grep", metavar="TEXT", help="only events whose line contains TEXT")

    export = sub.add_parser(
        "export", help="export a run's trace", description="Export a run's trace."
    )
    export.add_argument("db", type=Path, metavar="RUN.db", help="a run database")
    export.add_argument(
        "--format",
        choices=["jsonl", "chrome"],
        default="jsonl",
        help="jsonl: one event per line; chrome: Chrome trace JSON (Perfetto), a process per "
        "region and one for the global roles",
    )
    export.add_argument(
        "--level",
        choices=["messages", "decisions"],
        default="messages",
        help="chrome only: messages draws every delivery as an arrow; decisions leaves the "
        "message traffic out (a much smaller file)",
    )
    export.add_argument(
        "--out", type=Path, help="output file (default: stdout); its folder must exist"
    )

    check = sub.add_parser(
        "check",
        help="re-check invariants over a recorded run",
        description="Offline invariant check.",
    )
    check.add_argument("db", type=Path, metavar="RUN.db", help="a run database")
    check.add_argument(
        "--json",
        action="store_true",
        help='print {"events", "violations", "actor_errors", "liveness", …}',
    )

    schema = sub.add_parser(
        "schema",
        help="print the JSON Schema of scenario files",
        description="The JSON Schema of scenario files (with each value's bounds), for editors.",
    )
    schema.add_argument(
        "--out", type=Path, help="write to a file instead of stdout; its folder must exist"
    )

    report = sub.add_parser(
        "report", help="metrics of a recorded run", description="Report a run's metrics."
    )
    report.add_argument("db", type=Path, metavar="RUN.db", help="a run database")
    report.add_argument("--json", action="store_true", help="print one JSON object")
    report.add_argument("--html", type=Path, metavar="DIR", help="write an HTML page with plots")
    report.add_argument(
        "--jobs",
        type=Path,
        metavar="FILE.csv",
        help="write one row per job (cluster runs): id, GPUs, submit, first start, end, "
        "JCT, queueing delay, preemptions, FTF rho, state",
    )

    compare = sub.add_parser(
        "compare",
        help="run one scenario under several policies",
        description="Run a scenario once per policy (same world, same workload) and compare.",
    )
    compare.add_argument(
        "scenario", metavar="SCENARIO|FILE", help="built-in name or a TOML/JSON file"
    )
    compare.add_argument(
        "--policies",
        required=True,
        help="comma-separated, e.g. mast,federated (an unknown name is answered with the list)",
    )
    compare.add_argument("--seed", type=_seed, help="override the scenario's seed")
    compare.add_argument("--until", type=until, metavar="T", help="stop at emulated time T")
    compare.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="folder for the runs' databases, POLICY.db each (default: a new folder "
        "runs/compare-NAME-SEED[-N]); an existing one must be empty",
    )
    compare.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty --out folder, replacing its run databases of the same names",
    )
    compare.add_argument("--json", action="store_true", help='print {"runs": [reports]}')
    compare.add_argument(
        "--cluster",
        type=cluster_spec,
        metavar="ADDR",
        help="run the policies on Dask at once: tcp://HOST:PORT, local or local:N",
    )

    bench = sub.add_parser("bench", help="benchmarks (print JSON)", description="Benchmarks.")
    bench.add_argument(
        "target", help="kernel, or a benchmark of an emulated system (gms, rms, day…)"
    )
    bench.add_argument("--json", action="store_true", help="print only the JSON object")
    bench.add_argument("--span", type=_duration, default=None, metavar="T", help="emulated span")
    bench.add_argument(
        "--seeds", type=seed_range, metavar="A-B", help="seeds of a sweep (chaos-sweep: 1-200)"
    )
    bench.add_argument("--jobs", type=job_count, metavar="N", help="worker processes of a sweep")
    bench.add_argument(
        "--cluster",
        type=cluster_spec,
        metavar="ADDR",
        help="chaos-sweep on Dask: tcp://HOST:PORT, local or local:N",
    )
    bench.add_argument(
        "--budget-s",
        type=_positive_seconds,
        metavar="S",
        help="bugzoo: CPU seconds each search may spend on a bug (default 60)",
    )
    bench.add_argument(
        "--repetitions",
        type=job_count,
        metavar="N",
        help="bugzoo: searches per bug and method (default 3)",
    )
    bench.add_argument(
        "--bugs", metavar="A,B", help="bugzoo: only these bugs (default: the whole zoo)"
    )

    sweep = sub.add_parser(
        "sweep",
        help="run a scenario over many seeds in parallel",
        description="Run one scenario once per seed in parallel processes; exit 1 on any "
        "violation. Databases of failing runs are kept as KEEP_DIR/NAME-SEED.db.",
    )
    sweep.add_argument(
        "scenario", metavar="SCENARIO|FILE", help="built-in name or a TOML/JSON file"
    )
    sweep.add_argument(
        "--seeds", type=seed_range, required=True, metavar="A-B", help="inclusive, or one seed N"
    )
    sweep.add_argument(
        "--jobs",
        type=job_count,
        metavar="N",
        help="runs at once (default: CPU count; on --cluster, one per worker thread)",
    )
    sweep.add_argument(
        "--cluster",
        type=cluster_spec,
        metavar="ADDR",
        help="run on Dask: tcp://HOST:PORT (a running scheduler), local or local:N "
        "(N local worker processes); needs the [cluster] extra",
    )
    sweep.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    sweep.add_argument(
        "--keep-dir", type=Path, default=Path("runs"), help="for failing runs (default: runs)"
    )

    explore = sub.add_parser(
        "explore",
        help="search fault schedules for violations, guided by coverage",
        description="A guided search of the scenario's fault schedules: schedules whose run "
        "reaches something new (a sometimes property, a fault in a new protocol phase, an "
        "unusual count of a decision) are kept and mutated. Each distinct violation is "
        "written, with its shrunk reproducer, into the output folder; exit 1 if any.",
    )
    explore.add_argument(
        "scenario", metavar="SCENARIO|FILE", help="built-in name or a TOML/JSON file"
    )
    explore.add_argument(
        "--budget",
        type=budget,
        required=True,
        metavar="N|T",
        help="runs (200: deterministic for a --seed) or wall time (10m)",
    )
    explore.add_argument("--seed", type=_seed, default=1, help="the search's own seed (default 1)")
    explore.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="folder for failures (default: a new runs/explore-NAME-SEED)",
    )
    explore.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    explore.add_argument("--stop-at-first", action="store_true", help="stop at the first violation")
    explore.add_argument(
        "--jobs",
        type=job_count,
        default=1,
        metavar="N",
        help="run batches of N schedules in N local processes (the search depends on N)",
    )
    explore.add_argument(
        "--cluster",
        type=cluster_spec,
        metavar="ADDR",
        help="run batches on Dask: tcp://HOST:PORT, local or local:N (one per worker thread)",
    )
    explore.add_argument(
        "--grid",
        action="store_true",
        help="run a grid of dark spells instead of the guided search: every group of a role's "
        "instances alone and in pairs, paused and crashed, for lengths just past the system's "
        "clocks (a budget larger than the grid runs all of it)",
    )
    explore.add_argument(
        "--grid-at",
        type=grid_instants("--grid-at"),
        metavar="T[,T…]",
        help="when the grid's spells begin (default: an eighth into the fault span)",
    )
    explore.add_argument(
        "--grid-lengths",
        type=grid_instants("--grid-lengths", positive=True),
        metavar="T[,T…]",
        help="the grid's lengths (default: a quarter past each system clock of 30 s or more)",
    )
    explore.add_argument("--json", action="store_true", help="print one JSON object on stdout")

    shrink = sub.add_parser(
        "shrink",
        help="minimise the faults of a failing run",
        description="Remove faults from a failing run's schedule while the violation "
        "persists; write the smallest scenario that still reproduces it.",
    )
    shrink.add_argument("db", type=Path, metavar="RUN.db", help="the failing run's database")
    shrink.add_argument("--out", type=Path, metavar="FILE", help="default: RUN.min.toml")
    shrink.add_argument(
        "--invariant",
        help="the failure to keep: an invariant, actor-error or liveness (default: the first)",
    )
    shrink.add_argument(
        "--runs-max", type=job_count, default=200, metavar="N", help="re-runs at most (200)"
    )
    resume = sub.add_parser(
        "resume",
        help="continue a killed or interrupted run",
        description="Continue a run whose process was killed (or interrupted) from its "
        "last committed event, every actor restarting from the store, up to the --until it "
        "was started with (or the scenario's end); a finished run is left as it is (exit 0) "
        "unless --until extends it.",
    )
    resume.add_argument("db", type=Path, metavar="RUN.db", help="a run database")
    resume.add_argument(
        "--until",
        type=until,
        metavar="T",
        help="stop at emulated time T instead (later than a finished run's end extends it)",
    )
    resume.add_argument("--speed", type=_speed, help="scaled mode (as for `run`)")
    resume.add_argument("--no-progress", action="store_true", help="no progress bar")
    viewing.add_parser(sub)
    return parser


def version() -> str:
    """This mastemu's version (the installed package's, or "source")."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("mast-emulator")
    except PackageNotFoundError:
        return "source"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; Ctrl-C raises at once wherever the command is (see `_run`)."""
    # Not `signal.default_int_handler`: asyncio.run then leaves SIGINT alone
    # instead of turning the first Ctrl-C into a task cancellation that waits
    # for the next await (a blocking read in `replay --step`, a long setup);
    # a running kernel installs its own handler (`emulator.run.runner.drive`).
    try:
        previous = signal.signal(signal.SIGINT, _interrupt)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        return _run(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _run(argv: Sequence[str] | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(negative_values(given))
    args.command_line = command_line(given)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "list": reading.cmd_list,
        "policies": reading.cmd_policies,
        "run": running.cmd_run,
        "replay": reading.cmd_replay,
        "export": reading.cmd_export,
        "check": reading.cmd_check,
        "schema": reading.cmd_schema,
        "report": reading.cmd_report,
        "view": viewing.cmd_view,
        "compare": running.cmd_compare,
        "bench": reading.cmd_bench,
        "sweep": running.cmd_sweep,
        "explore": exploring.cmd_explore,
        "shrink": running.cmd_shrink,
        "resume": running.cmd_resume,
    }
    try:
        with run_collector():
            return commands[args.command](args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StoreError as error:
        # A run database that cannot be opened, is damaged, or is another process's.
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except sqlite3.DatabaseError as error:
        # Damage that verification did not see (it checks before reading, not during).
        print(f"error: a run database is damaged or unreadable: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
