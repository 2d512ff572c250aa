"""`mastemu`: the command line. The only place that knows argparse.

Commands that run something are in `running.py`, those that read a run or
the registries in `reading.py`; what a run prints is in `output.py`.
Exit codes: 0 ok, 1 an invariant was violated, 2 bad input (the message
names the file and the key path; never a traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from emulator.cli import reading, running
from emulator.cli.args import duration as _duration
from emulator.cli.args import job_count, seed_range
from emulator.cli.args import seed as _seed
from emulator.cli.args import speed as _speed
from emulator.cli.output import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK
from emulator.errors import InputError
from store import StoreError


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
    bench.add_argument(
        "--seeds", type=seed_range, metavar="A-B", help="seeds of a sweep (chaos-sweep: 1-200)"
    )
    bench.add_argument("--jobs", type=job_count, metavar="N", help="worker processes of a sweep")

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
        "list": reading.cmd_list,
        "policies": reading.cmd_policies,
        "run": running.cmd_run,
        "replay": reading.cmd_replay,
        "export": reading.cmd_export,
        "check": reading.cmd_check,
        "schema": reading.cmd_schema,
        "report": reading.cmd_report,
        "compare": running.cmd_compare,
        "bench": reading.cmd_bench,
        "sweep": running.cmd_sweep,
        "shrink": running.cmd_shrink,
        "resume": running.cmd_resume,
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


if __name__ == "__main__":
    sys.exit(main())
