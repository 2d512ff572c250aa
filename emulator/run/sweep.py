"""`mastemu sweep`: one scenario over a range of seeds, in parallel processes or on Dask.

Each seed runs in a worker process exactly as `mastemu run SCENARIO --seed S`
would run it (same scenario resolution, same planning, same `execute`), so a
seed's trace hash here is the hash that command prints. Runs go to a
temporary folder; a clean run's database is deleted as soon as it ends, and
the database of a run that violated an invariant or crashed is kept as
`KEEP_DIR/NAME-SEED.db`, ready for `mastemu check` or `mastemu shrink`.

With a `ClusterSpec` (`--cluster`) the seeds run on a Dask cluster's
workers instead (`emulator.run.pools`): the same runs, the same hashes, a
failing run's database shipped back and kept in the same place.

Results are reported in seed order whatever order the workers finish in. A
seed whose run raised (a bug of ours, or a worker that died) is a failure
with the pseudo-invariant `internal-error`, never a traceback of the sweep.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from emulator.errors import InputError
from emulator.liveness import stuck_summary
from emulator.run.coverage import system_kind
from emulator.run.failures import INTERNAL_ERROR, failing_errors
from emulator.run.pools import (
    ClusterSpec,
    ScenarioRef,
    Shipped,
    dask_pool,
    land_db,
    process_pool,
    ship_db,
    worker_tempdir,
)
from emulator.run.runaway import RUNAWAY, events_cap
from emulator.run.runner import check_replaceable, plan_run, remove_run_files
from emulator.run.scenario import Scenario, decode_scenario, resolve_scenario
from emulator.run.watched import run_watched
from emulator.sometimes import (
    Coverage,
    Tally,
    catalogue,
    coverage_json,
    coverage_lines,
    merge,
)
from emulator.units import format_us
from store.lock import run_lock

# A sweep is a batch job: refuse ranges that would take days by mistake.
SEEDS_MAX = 100_000
SEED_MAX = 2**63 - 1
# How many violations of one seed the text output lists before "… and N more".
LISTED_MAX = 10
# A clean run in which work that could run after the final heal never did
# (`emulator.liveness`): a finding of the campaign, as a violation is.
STALLED = "stalled"


@dataclass(frozen=True)
class SeedRun:
    """How one seed's run ended."""

    seed: int
    status: str  # ok, violated, stalled, or internal-error
    trace_hash: str | None = None
    # (trace position, emulated µs, invariant, message), as the run recorded them.
    violations: tuple[tuple[int, int, str, str], ...] = ()
    error: str | None = None
    wall_s: float = 0.0
    db: str | None = None  # where the run database was kept (failing runs only)
    # Every sometimes property of the run's system with how often it was reached.
    reached: tuple[tuple[str, int], ...] = ()
    events: int = 0  # the kernel's (the sweep's first seed sets the runaway cap)

    @property
    def failed(self) -> bool:
        return self.status != "ok"


@dataclass
class SweepResult:
    """Every seed's outcome, in seed order."""

    scenario: str
    ref: str
    runs: list[SeedRun] = field(default_factory=list)
    wall_s: float = 0.0
    system: str | None = None  # its kind, for the sometimes catalogue

    def command(self, seed: int) -> str:
        return f"mastemu run {self.ref} --seed {seed}"

    @property
    def violations(self) -> int:
        """Invariant violations, counting each internal error and each stalled run as one."""
        return sum(len(r.violations) or int(r.failed) for r in self.runs)

    def failures(self) -> list[dict[str, Any]]:
        """One entry per (seed, invariant): the first violation and how many there were."""
        out: list[dict[str, Any]] = []
        for run in self.runs:
            if run.status in (INTERNAL_ERROR, STALLED):
                out.append(
                    {
                        "seed": run.seed,
                        "invariant": "liveness" if run.status == STALLED else INTERNAL_ERROR,
                        "command": self.command(run.seed),
                        "message": run.error or "",
                        "count": 1,
                        "db": run.db,
                    }
                )
                continue
            first: dict[str, dict[str, Any]] = {}
            for seq, t_us, invariant, message in run.violations:
                entry = first.get(invariant)
                if entry is None:
                    first[invariant] = {
                        "seed": run.seed,
                        "invariant": invariant,
                        "command": self.command(run.seed),
                        "message": message,
                        "seq": seq,
                        "t_us": t_us,
                        "count": 1,
                        "db": run.db,
                    }
                else:
                    entry["count"] += 1
            out.extend(first.values())
        return out

    def sometimes(self) -> dict[str, Coverage]:
        """The campaign's sometimes catalogue: per property, the seeds that reached it."""
        described = catalogue(self.system)
        return merge((dict(r.reached) for r in self.runs), described)

    def to_json(self) -> dict[str, Any]:
        """The `--json` object; deterministic for a given scenario and seed range."""
        return {
            "sometimes": coverage_json(self.sometimes()),
            "scenario": self.scenario,
            "seeds": len(self.runs),
            "violations": self.violations,
            "failures": self.failures(),
            "internal_errors": sum(r.status == INTERNAL_ERROR for r in self.runs),
            "stalled": sum(r.status == STALLED for r in self.runs),
            "runs": [
                {
                    "seed": r.seed,
                    "status": r.status,
                    "trace_hash": r.trace_hash,
                    "violations": len(r.violations),
                }
                for r in self.runs
            ],
        }


# ---- what a sweep may be asked for -----------------------------------------------
def seed_range(text: str) -> range:
    """`A-B` (inclusive) or a single seed `N`; InputError says what is wrong."""
    first, dash, last = text.strip().partition("-")
    try:
        a = int(first)
        b = int(last) if dash else a
    except ValueError:
        raise InputError(
            "--seeds", "", f"expected A-B or N with non-negative integers, got {text!r}"
        ) from None
    if not (0 <= a <= SEED_MAX and 0 <= b <= SEED_MAX):
        raise InputError("--seeds", "", f"seeds must be between 0 and 2**63-1, got {text!r}")
    if a > b:
        raise InputError("--seeds", "", f"empty range {text!r}: the first seed is after the last")
    if b - a + 1 > SEEDS_MAX:
        raise InputError("--seeds", "", f"{b - a + 1:,} seeds; at most {SEEDS_MAX:,} per sweep")
    return range(a, b + 1)


def job_count(text: str) -> int:
    """A number of worker processes, 1 to 1024."""
    try:
        value = int(text)
    except ValueError:
        raise InputError("--jobs", "", f"not an integer: {text!r}") from None
    if not 1 <= value <= 1024:
        raise InputError("--jobs", "", "must be between 1 and 1024")
    return value


# ---- one seed, inside a worker ---------------------------------------------------------
def _resolve(ref: str | ScenarioRef) -> tuple[Scenario, str, str]:
    if isinstance(ref, ScenarioRef):
        if ref.text is None or ref.source is None:
            return resolve_scenario(ref.ref)
        return decode_scenario(ref.text, ref.source), ref.text, ref.source
    return resolve_scenario(ref)


def run_seed(
    ref: str | ScenarioRef, seed: int, workdir: str, events_max: int | None = None
) -> SeedRun:
    """Run `ref` with `seed` as `mastemu run` does; delete the database unless it failed.

    A run past `events_max` events is stopped there (`emulator.run.runaway`).
    """
    wall0 = time.perf_counter()
    out = Path(workdir) / f"seed-{seed}.db"
    try:
        scenario, text, source = _resolve(ref)
        plan = plan_run(scenario, text, source)
        found = Tally(system_kind(scenario.system))
        run = run_watched(plan, seed, out, events_max, found.attach)
    except Exception as error:  # a bug of ours: reported, not raised through the sweep
        return SeedRun(
            seed,
            INTERNAL_ERROR,
            error=f"{type(error).__name__}: {error}",
            wall_s=time.perf_counter() - wall0,
            db=str(out) if out.exists() else None,
        )
    result, cap = run.result, run.cap
    status = result.status
    error = None
    if run.runaway:
        status = INTERNAL_ERROR
        error = f"{RUNAWAY}: {cap.detail()} by {format_us(cap.tripped_at_us)} (a livelock?)"
    elif status == "error":
        first = failing_errors(result.actor_errors, scenario.invariants.tolerate_errors)[0]
        status = INTERNAL_ERROR
        error = f"actor {first.describe()} (#{first.seq}, {format_us(first.t_us)})"
    elif status not in ("ok", "violated"):
        status, error = INTERNAL_ERROR, f"the run ended with status {result.status!r}"
    elif status == "ok" and scenario.invariants.liveness:
        stuck = stuck_summary(run.watch.reports(scenario.invariants.may_wait))
        if stuck is not None:
            status, error = STALLED, stuck
    if status == "ok":
        remove_run_files(out)
    return SeedRun(
        seed,
        status,
        result.trace_hash,
        tuple(result.violations),
        error,
        time.perf_counter() - wall0,
        str(out) if status != "ok" else None,
        tuple(found.counts.items()),
        result.events,
    )


def run_seed_shipped(ref: ScenarioRef, seed: int, events_max: int | None = None) -> Shipped:
    """`run_seed` on a Dask worker: its own scratch folder, a failing database shipped back."""
    with worker_tempdir() as workdir:
        run = run_seed(ref, seed, workdir, events_max)
        files = ship_db(Path(run.db)) if run.db is not None else {}
    return Shipped(outcome=replace(run, db=None), files=files)


def scenario_ref(ref: str, text: str, source: str) -> ScenarioRef:
    """What a worker needs to run `ref`: a built-in's name, or a file's text and path."""
    if Path(ref).is_file():
        return ScenarioRef(ref, text=text, source=str(Path(source).resolve()))
    return ScenarioRef(ref)


# ---- the sweep ---------------------------------------------------------------------
def sweep(
    ref: str,
    seeds: range,
    *,
    jobs: int,
    keep_dir: Path,
    on_result: Callable[[SeedRun], None] | None = None,
    cluster: ClusterSpec | None = None,
) -> SweepResult:
    """Run every seed of `seeds`; `on_result` sees each outcome in seed order.

    `jobs` caps the runs in flight (on a Dask cluster, 0 means one per worker
    thread). Raises InputError (bad input) before any worker starts.
    """
    scenario, text, source = resolve_scenario(ref)
    plan_run(scenario, text, source)  # bad input fails here, once, not in every worker
    result = SweepResult(scenario.name, ref, system=system_kind(scenario.system))
    wall0 = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="mastemu-sweep-") as workdir,
        contextlib.ExitStack() as stack,
    ):
        if cluster is None:
            jobs = max(1, min(jobs, len(seeds)))
            # Nothing is queued beyond the runs in progress: on Ctrl-C the pool
            # ends those (`process_pool`) and returns.
            pool: Executor = stack.enter_context(process_pool(jobs))

            def submit(seed: int, cap: int | None) -> Future[Any]:
                return pool.submit(run_seed, ref, seed, workdir, cap)

            land: Callable[[Any], SeedRun] = _identity
        else:
            dask = stack.enter_context(dask_pool(cluster, jobs or None))
            jobs = max(1, min(dask.slots, len(seeds)))
            shipped = scenario_ref(ref, text, source)

            def submit(seed: int, cap: int | None) -> Future[Any]:
                return dask.executor.submit(run_seed_shipped, shipped, seed, cap)

            def land(value: Any) -> SeedRun:
                run: SeedRun = value.outcome
                if not value.files:
                    return run
                db = land_db(value.files, Path(workdir), f"seed-{run.seed}.db")
                return replace(run, db=str(db))

        for run in in_order(submit, land, seeds, jobs):
            if run.db is not None:
                run = _keep(run, Path(run.db), keep_dir / f"{scenario.name}-{run.seed}.db")
            result.runs.append(run)
            if on_result is not None:
                on_result(run)
    result.wall_s = time.perf_counter() - wall0
    return result


def _identity(run: SeedRun) -> SeedRun:
    return run


def in_order(
    submit: Callable[[int, int | None], Future[Any]],
    land: Callable[[Any], SeedRun],
    seeds: range,
    jobs: int,
) -> Iterator[SeedRun]:
    """Keep `jobs` seeds running; yield outcomes in seed order as they become known.

    `submit(seed, cap)` starts a seed's run, stopped past `cap` events. The
    first seed runs alone, uncapped: clean, its events set the cap of the
    others (`emulator.run.runaway`), the same on every machine.
    """
    if not seeds:
        return
    first = _outcome(seeds[0], submit(seeds[0], None), land)
    cap = events_cap(first.events) if first.status == "ok" else None
    yield first
    seeds = seeds[1:]
    waiting = iter(seeds)
    running: dict[Future[SeedRun], int] = {}
    done: dict[int, SeedRun] = {}
    broken: str | None = None
    for seed in seeds:
        while seed not in done:
            while broken is None and len(running) < jobs:
                nxt = next(waiting, None)
                if nxt is None:
                    break
                try:
                    running[submit(nxt, cap)] = nxt
                except BrokenProcessPool:
                    broken = "not run: a worker process died and took the pool with it"
                    done[nxt] = SeedRun(nxt, INTERNAL_ERROR, error=broken)
            if not running:
                # The pool broke: every seed not yet run is reported as not run.
                done[seed] = SeedRun(seed, INTERNAL_ERROR, error=broken or "not run")
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                ran = running.pop(future)
                done[ran] = _outcome(ran, future, land)
        yield done.pop(seed)


def _outcome(seed: int, future: Future[Any], land: Callable[[Any], SeedRun]) -> SeedRun:
    try:
        return land(future.result())
    except BrokenProcessPool:
        # Which seed killed it is unknown: every seed running at that moment says so.
        return SeedRun(seed, INTERNAL_ERROR, error="a worker process died while this seed ran")
    except Exception as error:
        message = f"worker failed: {type(error).__name__}: {error}"
        return SeedRun(seed, INTERNAL_ERROR, error=message)


def _keep(run: SeedRun, db: Path, dest: Path) -> SeedRun:
    """Move a failing run's database (with any WAL files) to `dest`.

    An older run database there is replaced (a sweep keeps its latest failure
    per seed), but never one a process is writing: its lock is taken first.
    """
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with run_lock(dest, "mastemu sweep (keeping a failing run)"):
            check_replaceable(dest)
            for suffix in ("", "-wal", "-shm"):
                Path(str(dest) + suffix).unlink(missing_ok=True)
                src = Path(str(db) + suffix)
                if src.exists():
                    shutil.move(src, Path(str(dest) + suffix))
    except Exception as error:  # kept nowhere: the run is still reported
        print(f"warning: {dest}: cannot keep the run database: {error}", file=sys.stderr)
        return replace(run, db=None)
    return replace(run, db=str(dest))


# ---- output --------------------------------------------------------------------------
def seed_lines(run: SeedRun, command: str) -> list[str]:
    """One line per seed, then its violations and the command that reproduces them."""
    from emulator.units import format_us

    lines = [
        f"seed {run.seed:<6} {run.status:<15} trace-hash {run.trace_hash or '-':<32} "
        f"violations {len(run.violations) or int(run.failed):<4} {run.wall_s:6.2f}s"
    ]
    if run.status == INTERNAL_ERROR:
        lines.append(f"  {INTERNAL_ERROR}: {run.error}")
    elif run.status == STALLED:
        lines.append(f"  liveness: {run.error}")
    for seq, t_us, invariant, message in run.violations[:LISTED_MAX]:
        lines.append(f"  VIOLATION {invariant} at #{seq} ({format_us(t_us)}): {message}")
    if len(run.violations) > LISTED_MAX:
        lines.append(f"  … and {len(run.violations) - LISTED_MAX} more")
    if run.failed:
        kept = f"  (run database: {run.db})" if run.db else ""
        lines.append(f"  reproduce: {command}{kept}")
    return lines


def summary_lines(result: SweepResult) -> list[str]:
    clean = sum(not r.failed for r in result.runs)
    errors = sum(r.status == INTERNAL_ERROR for r in result.runs)
    stalled = sum(r.status == STALLED for r in result.runs)
    violated = len(result.runs) - clean - errors - stalled
    lines = [
        f"{len(result.runs)} seeds: {clean} clean, {violated} with violations, "
        f"{stalled} stalled, {errors} internal errors; {result.violations} violation(s) in "
        f"{result.wall_s:.1f}s wall"
    ]
    failing = [str(r.seed) for r in result.runs if r.failed]
    if failing:
        lines.append(f"failing seeds: {', '.join(failing)}")
    return lines + coverage_lines(result.sometimes(), len(result.runs))
