"""The commands that run: run, resume, sweep, shrink, compare."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from emulator.cli.args import output_file, output_folder
from emulator.cli.output import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_VIOLATION,
    Progress,
    actor_error_lines,
    print_summary,
    run_exit_code,
)
from emulator.cli.reading import reporter_for, system_summary
from emulator.errors import InputError, InputWarning
from emulator.liveness import LivenessWatch, liveness_lines
from emulator.run.overrides import parse_assignment, set_path
from emulator.run.scenario import Scenario, convert_scenario, parse_raw, resolve_scenario
from emulator.units import format_us

if TYPE_CHECKING:
    from collections.abc import Iterator

    from emulator.run.pools import ClusterSpec
    from emulator.run.remote import RemoteRun
    from emulator.run.runner import RunPlan


def cmd_run(args: argparse.Namespace) -> int:
    """`mastemu run`: refuses (exit 2) an existing run database unless --force, and one that
    another process is writing in any case; the default `runs/` folder is made if missing."""
    from emulator.run.runner import execute, plan_run

    scenario, text, source = resolve_scenario(args.scenario)
    if args.set:
        scenario, text = with_overrides(text, source, args.set)
    plan = plan_run(scenario, text, source)
    seed = scenario.seed if args.seed is None else args.seed
    out = output_file(args.out) if args.out else Path("runs") / f"{scenario.name}-{seed}.db"
    if args.engine == "reference":
        return run_reference(args, plan, seed, out)
    print(f"scenario: {scenario.name}  seed: {seed}  out: {out}")
    print_warnings(plan.warnings, source)
    end_us = (
        int(scenario.duration) if args.until is None else min(args.until, int(scenario.duration))
    )
    show = not args.no_progress and sys.stderr.isatty()
    watch = LivenessWatch()
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
                replace=args.force,
                command=args.command_line,
                on_setup=watch.attach,
            )
        )
    # Only work that is stuck is told here (as `check` tells it, exit code unchanged).
    verdicts = watch.reports(scenario.invariants.may_wait)
    stuck = liveness_lines(verdicts) if any(r.stuck for r in verdicts) else []
    print_summary(result, args.scenario, system_summary(out), stuck)
    return run_exit_code(result)


def with_overrides(text: str, source: str, assignments: list[str]) -> tuple[Scenario, str]:
    """The scenario of `text` with `--set KEY=VALUE`s applied, and the text to store for it.

    The run keeps `source` as its file, so names relative to it still resolve
    beside it; the stored text is the scenario as run (JSON), which is what
    `resume` and `shrink` read back.
    """
    raw = parse_raw(text, source)
    if not isinstance(raw, dict):
        raise InputError(source, "", "a scenario is a table of keys")
    for assignment in assignments:
        key, value = parse_assignment(assignment)
        set_path(raw, key, value, source="--set")
    changed = json.dumps(raw, sort_keys=True, default=str)
    return convert_scenario(raw, source), changed


def run_reference(args: argparse.Namespace, plan: RunPlan, seed: int, out: Path) -> int:
    """`mastemu run FILE --engine reference`: the system's reference engine, same database.

    Exit codes as for a run of the actors (3 when cut short by `duration` or --until).
    """
    from emulator.run.reference import check_reference, execute_reference

    check_reference(plan)
    if args.speed is not None:
        raise InputError("--speed", "", "the reference engine has no wall clock to follow")
    print(f"scenario: {plan.scenario.name}  seed: {seed}  engine: reference  out: {out}")
    result = asyncio.run(
        execute_reference(
            plan,
            seed=seed,
            out=out,
            until_us=args.until,
            replace=args.force,
            command=args.command_line,
        )
    )
    print_summary(result, args.scenario, system_summary(out))
    return run_exit_code(result)


def cmd_sweep(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """`mastemu sweep`: exit 1 if any seed violated an invariant or crashed, else 0."""
    from emulator.run.sweep import SeedRun, seed_lines, summary_lines, sweep

    out = out or sys.stdout
    # With --json, stdout carries only the JSON object; progress goes to stderr.
    progress = sys.stderr if args.json else out
    seeds: range = args.seeds
    cluster = getattr(args, "cluster", None)
    if cluster is None:
        jobs = args.jobs or os.cpu_count() or 1
        where = f"jobs {jobs}"
    else:
        jobs = args.jobs or 0  # 0: one run per worker thread of the cluster
        where = f"on Dask {cluster.describe()}" + (f"  jobs {jobs}" if jobs else "")
    print(f"sweep: {args.scenario}  seeds {seeds.start}-{seeds.stop - 1}  {where}", file=progress)

    def show(run: SeedRun) -> None:
        for line in seed_lines(run, f"mastemu run {args.scenario} --seed {run.seed}"):
            print(line, file=progress)
        with contextlib.suppress(OSError):
            progress.flush()

    result = sweep(
        args.scenario, seeds, jobs=jobs, keep_dir=args.keep_dir, on_result=show, cluster=cluster
    )
    for line in summary_lines(result):
        print(line, file=progress)
    if args.json:
        print(json.dumps(result.to_json(), sort_keys=True), file=out)
    return 1 if result.violations else 0


def cmd_shrink(args: argparse.Namespace) -> int:
    from emulator.run.shrink import shrink_run

    return shrink_run(args.db, invariant=args.invariant, target=args.out, runs_max=args.runs_max)


def cmd_resume(args: argparse.Namespace) -> int:
    """`mastemu resume RUN.db [--until T] [--speed X]`; exit codes as for `run`.

    The database is verified, then locked for the whole resume: a run another
    process is writing is refused (exit 2, naming it).
    """
    from emulator.run.resume import AlreadyFinished, nothing_to_do, read_meta, resume, resume_target
    from emulator.run.runner import run_end_us
    from emulator.run.scenario import decode_scenario
    from store.lock import run_lock
    from store.verify import verify_run

    db: Path = args.db
    verify_run(db)  # before the lock file is made beside a file that is not a run
    with run_lock(db, args.command_line):
        meta = asyncio.run(read_meta(db))
        scenario = decode_scenario(meta.scenario_text, f"{db} (stored scenario)")
        end_us = run_end_us(scenario, resume_target(meta, args.until))
        if nothing_to_do(meta, end_us):
            line = finished_line(db, meta.status, meta.end_t_us, int(scenario.duration))
            if args.until is not None and args.until > int(scenario.duration):
                # Asked past the end: a run never outlasts its scenario's `duration`.
                line += f" (--until stops at the scenario's duration, {format_us(end_us)})"
            print(line)
            return EXIT_OK
        print(
            f"resuming: {db}  scenario: {meta.scenario_name}  seed: {meta.seed}  "
            f"({meta.status}; to {format_us(end_us)})"
        )
        show = not args.no_progress and sys.stderr.isatty()
        with Progress(show, end_us) as progress:
            outcome = asyncio.run(
                resume(
                    db,
                    until_us=args.until,
                    speed=args.speed,
                    progress=progress,
                    handle_signals=True,
                    command=args.command_line,
                )
            )
        if isinstance(outcome, AlreadyFinished):  # cannot happen under the lock
            print(finished_line(db, outcome.status, outcome.end_t_us, int(scenario.duration)))
            return EXIT_OK
        print_summary(outcome, outcome.scenario, system_summary(db))
        return run_exit_code(outcome)


def print_warnings(warnings: list[InputWarning], source: str) -> None:
    """Accepted but suspicious input, once, on stderr: `warning: FILE: KEY.PATH: why`."""
    for warning in warnings:
        print(f"warning: {source}: {warning}", file=sys.stderr)


def finished_line(db: Path, status: str, end_t_us: int | None, duration_us: int) -> str:
    """What `resume` says of a run that is already where it would take it."""
    at = format_us(end_t_us) if end_t_us is not None else "its end"
    line = f"{db}: the run already finished ({status} at {at}); nothing to resume"
    if end_t_us is not None and end_t_us < duration_us:
        line += f" (`resume --until T` extends it, up to {format_us(duration_us)})"
    return line


def cmd_compare(args: argparse.Namespace) -> int:
    """Run a scenario once per policy into one folder, then print the reports side by side.

    Every policy's variant is validated (its name and parameters) before the
    first run, so a bad name late in `--policies` costs no run; each run
    finished prints a line on stderr. Only the folder is written.
    """
    from emulator.run.runner import execute, plan_run
    from emulator.run.scenario import convert_scenario, parse_raw

    _, text, source = resolve_scenario(args.scenario)
    raw = parse_raw(text, source)
    if not isinstance(raw, dict) or not isinstance(raw.get("system"), dict):
        raise InputError(str(source), "", "compare needs a scenario with a [system]")
    plans = []
    for policy in compare_policies(args.policies):
        variant = {**raw, "system": {**raw["system"], "policy": policy}}
        variant_text = json.dumps(variant, sort_keys=True)
        scenario = convert_scenario(variant, f"{source} (policy {policy})")
        plans.append((policy, plan_run(scenario, variant_text, f"{source} (policy {policy})")))
    scenario = plans[0][1].scenario
    # The workload is the same under every policy: its warnings once.
    print_warnings(plans[0][1].warnings, source)
    seed = scenario.seed if args.seed is None else args.seed
    folder = compare_folder(args.out, scenario.name, seed, force=args.force)
    print(
        f"compare: {scenario.name}  seed: {seed}  {len(plans)} runs into {folder}", file=sys.stderr
    )
    from emulator.run.remote import land_run

    dbs = []
    failed = False
    cluster = getattr(args, "cluster", None)
    remote = iter(_compare_on_dask(cluster, plans, seed, args.until) if cluster else ())
    for i, (policy, plan) in enumerate(plans, start=1):
        out = folder / f"{policy}.db"
        started = time.monotonic()
        if cluster is not None:
            # All the policies were sent at once; each is taken here in order.
            result = land_run(next(remote), out)
        else:
            result = asyncio.run(
                execute(
                    plan,
                    seed=seed,
                    out=out,
                    until_us=args.until,
                    # Ctrl-C stops the kernel at its next step, the database consistent.
                    handle_signals=True,
                    replace=args.force,
                    command=getattr(args, "command_line", None),
                )
            )
        wall_s = time.monotonic() - started
        print(
            f"[{i}/{len(plans)}] {policy}: {result.status}  trace-hash: {result.trace_hash}  "
            f"({out}, {wall_s:.1f}s)",
            file=sys.stderr,
        )
        for line in actor_error_lines(result.actor_errors, result.status):
            print(f"{policy}: {line}", file=sys.stderr)
        with contextlib.suppress(OSError):
            sys.stderr.flush()
        if result.status == "interrupted":
            # The first Ctrl-C ends the whole compare: no report of a partial run.
            print(f"interrupted: {out} holds {policy} as far as it got", file=sys.stderr)
            return EXIT_INTERRUPTED
        failed = failed or result.failed
        dbs.append(out)
    reporter = reporter_for(dbs[0])
    reports = [asyncio.run(reporter.report(db)) for db in dbs]
    if args.json:
        print(json.dumps({"runs": reports}, sort_keys=True))
    else:
        print(reporter.render_text(reports))
    return EXIT_VIOLATION if failed else EXIT_OK


def _compare_on_dask(
    cluster: ClusterSpec, plans: list[tuple[str, RunPlan]], seed: int, until_us: int | None
) -> Iterator[RemoteRun]:
    """Every policy's run sent to the Dask cluster at once; the outcomes in policy order."""
    from emulator.run.pools import dask_pool
    from emulator.run.remote import run_text_shipped

    with dask_pool(cluster, None) as dask:
        futures = [
            dask.executor.submit(run_text_shipped, plan.text, plan.source, seed, until_us)
            for _, plan in plans
        ]
        for future in futures:
            yield future.result()


def compare_policies(text: str) -> list[str]:
    """`--policies a,b,c` as names in order: at least one, none twice (a run per name)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise InputError("--policies", "", "name at least one policy (e.g. mast,federated)")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError("--policies", "", f"names {name} more than once")
        seen.add(name)
    return names


# New default folders tried before giving up: a person does not keep 1,000 compares.
_COMPARE_FOLDERS_MAX = 1000


def compare_folder(
    out: Path | None, name: str, seed: int, *, force: bool, kind: str = "compare"
) -> Path:
    """The folder a compare (or another `kind` of campaign) writes into, made here.

    Without `out`, a new folder `runs/KIND-NAME-SEED` (`-2`, `-3`, … when
    taken), so no earlier compare is ever replaced. A given `out` may exist
    but must then be empty unless `force`; files in it that are not this
    compare's databases are left alone either way.
    """
    if out is None:
        base = Path("runs") / f"{kind}-{name}-{seed}"
        for n in range(1, _COMPARE_FOLDERS_MAX + 1):
            folder = base if n == 1 else base.with_name(f"{base.name}-{n}")
            try:
                folder.mkdir(parents=True)
            except FileExistsError:
                continue
            except OSError as error:
                raise InputError(str(folder), "", f"cannot create it: {error.strerror}") from None
            return folder
        raise InputError(
            str(base), "", f"{_COMPARE_FOLDERS_MAX} {kind} folders exist; give --out DIR"
        )
    folder = output_folder(out)
    if folder.exists():
        if any(folder.iterdir()) and not force:
            raise InputError(
                str(folder), "", "is not empty; give another --out, or --force to write into it"
            )
        return folder
    try:
        folder.mkdir()
    except OSError as error:
        raise InputError(str(folder), "", f"cannot create it: {error.strerror}") from None
    return folder
