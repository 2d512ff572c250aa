"""The corpus, the mutations and the search loop (see the package docstring)."""

from __future__ import annotations

import json
import multiprocessing
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import msgspec

from emulator.errors import InputError
from emulator.run.coverage import system_kind
from emulator.run.explore.budget import Budget
from emulator.run.explore.features import run_schedule, run_schedule_shipped
from emulator.run.explore.space import fault_space, fresh_schedule, length_field
from emulator.run.pools import ClusterSpec, dask_pool, land_db
from emulator.run.runner import remove_run_files
from emulator.run.scenario import (
    Fault,
    parse_raw,
    resolve_scenario,
)
from emulator.run.shrink import Schedule, materialise, shrink_run, to_toml, variant
from emulator.sometimes import (
    catalogue,
    coverage_json,
    coverage_lines,
    merge,
)
from emulator.units import MS, Duration

FAULTS_MAX = 64  # a schedule longer than this is cut: more faults rarely mean more coverage
MUTATIONS = ("add", "remove", "move", "retarget", "stretch", "splice", "reseed")


@dataclass
class Member:
    """A schedule in the corpus and how well its children did."""

    seed: int
    faults: tuple[Fault, ...]
    new: int  # features it brought
    picked: int = 0
    paid: int = 0  # features its children brought

    def energy(self) -> float:
        return (1.0 + self.new + 2.0 * self.paid) / (1.0 + self.picked) ** 0.5


@dataclass(frozen=True)
class RunRecord:
    index: int
    mutation: str
    seed: int
    faults: int
    new: int
    status: str
    failure: str | None
    cpu_s: float


@dataclass(frozen=True)
class Failure:
    signature: tuple[str, str]
    run: int
    seed: int
    cpu_s: float
    scenario: str  # the failing schedule as written
    minimal: str | None  # the shrunk reproducer, if shrinking kept the violation


@dataclass
class ExploreResult:
    scenario: str
    seed: int
    budget: Budget
    runs: list[RunRecord] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    features_over_time: list[int] = field(default_factory=list)
    corpus: int = 0
    features: int = 0
    tallies: list[dict[str, int]] = field(default_factory=list)
    system: str | None = None

    @property
    def first_failure_cpu_s(self) -> float | None:
        return self.failures[0].cpu_s if self.failures else None

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "seed": self.seed,
            "budget": self.budget.describe(),
            "runs": len(self.runs),
            "corpus": self.corpus,
            "features": self.features,
            "features_over_time": self.features_over_time,
            "failures": [
                {
                    "invariant": f.signature[0],
                    "after": f.signature[1],
                    "run": f.run,
                    "seed": f.seed,
                    "scenario": f.scenario,
                    "minimal": f.minimal,
                }
                for f in self.failures
            ],
            "sometimes": coverage_json(merge(self.tallies, catalogue(self.system))),
        }


# ---- the search ----------------------------------------------------------------------
class Explorer:
    def __init__(
        self,
        ref: str,
        *,
        seed: int,
        budget: Budget,
        out_dir: Path,
        log: TextIO,
        stop_at_first: bool = False,
        shrink_runs: int = 60,
    ) -> None:
        from emulator.run.runner import plan_run

        scenario, text, source = resolve_scenario(ref)
        raw = parse_raw(text, source)
        if not isinstance(raw, dict):
            raise InputError(source, "", "a scenario is a table of keys")
        self.raw = raw
        self.plan = plan_run(scenario, text, source)
        self.schedule = materialise(self.plan, scenario.seed)
        self.space = fault_space(self.plan, scenario.seed, self.schedule)
        self.rng = random.Random(f"explore:{seed}")
        self.result = ExploreResult(
            scenario.name, seed, budget, system=system_kind(scenario.system)
        )
        self.out_dir = out_dir
        self.log = log
        self.stop_at_first = stop_at_first
        self.shrink_runs = shrink_runs
        self.seen: set[str] = set()
        self.corpus: list[Member] = []
        self.base_seed = scenario.seed
        self.drawn = 0  # candidates drawn after the base: every other one is a fresh seed

    # -- choosing the next schedule
    def _pick(self) -> Member:
        weights = [m.energy() for m in self.corpus]
        member = self.rng.choices(self.corpus, weights=weights)[0]
        member.picked += 1
        return member

    def _mutate(self, parent: Member) -> tuple[str, int, tuple[Fault, ...]]:
        faults = list(parent.faults)
        seed = parent.seed
        mutation = self.rng.choice(MUTATIONS)
        if mutation == "remove" and not faults:
            mutation = "add"
        if mutation in ("move", "retarget", "stretch") and not faults:
            mutation = "add"
        if mutation == "splice" and len(self.corpus) < 2:
            mutation = "add"
        if mutation == "add":
            drawn = self.space.draw(self.rng)
            if drawn is not None:
                faults.append(drawn)
        elif mutation == "remove":
            faults.pop(self.rng.randrange(len(faults)))
        elif mutation == "move":
            i = self.rng.randrange(len(faults))
            span = max(1, self.space.end_us - self.space.start_us)
            shift = int(self.rng.gauss(0, span / 10))
            at = min(self.space.end_us - 1, max(self.space.start_us, int(faults[i].at) + shift))
            faults[i] = msgspec.structs.replace(faults[i], at=Duration(at))
        elif mutation == "retarget":
            i = self.rng.randrange(len(faults))
            faults[i] = self.space.retarget(faults[i], self.rng)
        elif mutation == "stretch":
            i = self.rng.randrange(len(faults))
            name = length_field(faults[i])
            if name is not None:
                old = int(getattr(faults[i], name))
                new = max(MS, int(old * self.rng.choice((0.25, 0.5, 0.9, 1.1, 2.0, 4.0))))
                new = min(new, max(MS, self.space.end_us - int(faults[i].at)))
                faults[i] = msgspec.structs.replace(faults[i], **{name: Duration(new)})
        elif mutation == "splice":
            other = self.rng.choice([m for m in self.corpus if m is not parent] or [parent])
            cut = self.rng.randrange(
                self.space.start_us, max(self.space.start_us + 1, self.space.end_us)
            )
            faults = [f for f in faults if int(f.at) < cut] + [
                f for f in other.faults if int(f.at) >= cut
            ]
        else:  # reseed: the same faults over another draw of the workload and the network
            seed = self.rng.randrange(1, 2**31)
        faults.sort(key=lambda f: int(f.at))
        return mutation, seed, tuple(faults[:FAULTS_MAX])

    # -- running
    def _candidates(self, index: int, n: int) -> list[tuple[str, int, tuple[Fault, ...], Any]]:
        """The next `n` schedules to run: the base first, then, in turn, a fresh seed
        with the schedule its nemesis draws (what a random search would run) and a
        mutation of the corpus. So the search covers what random seeds reach, at
        half their pace at worst, and spends the other half where coverage led."""
        if index == 0:
            return [("base", self.base_seed, tuple(self.schedule.faults), None)]
        out: list[tuple[str, int, tuple[Fault, ...], Any]] = []
        for _ in range(n):
            self.drawn += 1
            if self.drawn % 2:
                seed = self.rng.randrange(1, 2**31)
                out.append(("fresh", seed, fresh_schedule(self.plan, self.space, seed), None))
                continue
            parent = self._pick()
            mutation, seed, faults = self._mutate(parent)
            out.append((mutation, seed, faults, parent))
        return out

    def run(
        self,
        on_run: Callable[[RunRecord], None] | None = None,
        pool: Executor | None = None,
        batch: int = 1,
    ) -> ExploreResult:
        """Search until the budget is spent (or the first failure, if asked).

        With a `pool` the runs of a batch go to its workers together; the
        batch is drawn before any of its runs, and the outcomes are taken in
        the batch's order, so the search depends on the batch size, never on
        which worker finished first.
        """
        self.out_dir.mkdir(parents=True, exist_ok=True)
        work = self.out_dir / "explore-run.db"
        wall0 = time.perf_counter()
        result = self.result
        heal = self.schedule.heal_at_us
        index = 0
        cpu = 0.0
        stop = False
        while not stop and not result.budget.spent(index, time.perf_counter() - wall0, cpu):
            size = batch if pool is not None else 1
            if result.budget.runs is not None:
                size = min(size, result.budget.runs - index)
            batch_now = self._candidates(index, size)
            if pool is None:
                outcomes = [run_schedule(self.raw, heal, s, f, work) for _, s, f, _ in batch_now]
            else:
                futures = [
                    pool.submit(run_schedule_shipped, self.raw, heal, s, f)
                    for _, s, f, _ in batch_now
                ]
                outcomes = [future.result() for future in futures]
            for (mutation, seed, faults, parent), outcome in zip(batch_now, outcomes, strict=True):
                index += 1
                cpu += outcome.cpu_s
                new = outcome.signature - self.seen
                self.seen |= new
                result.tallies.append(outcome.counts)
                if new:
                    self.corpus.append(Member(seed, faults, len(new)))
                    if parent is not None:
                        parent.paid += len(new)
                failure = outcome.failure
                record = RunRecord(
                    index, mutation, seed, len(faults), len(new), outcome.status,
                    f"{failure[0]} after {failure[1]}" if failure else None, round(cpu, 3),
                )  # fmt: skip
                result.runs.append(record)
                result.features_over_time.append(len(self.seen))
                if on_run is not None:
                    on_run(record)
                if failure is not None and failure not in {f.signature for f in result.failures}:
                    if outcome.files:
                        land_db(outcome.files, self.out_dir, work.name)
                    result.failures.append(
                        self._keep_failure(failure, index, seed, faults, cpu, work)
                    )
                    if self.stop_at_first:
                        stop = True
                        break
        result.corpus = len(self.corpus)
        result.features = len(self.seen)
        # The campaign's report stays with its failures (and marks the folder as used).
        report = json.dumps(result.to_json(), indent=1, sort_keys=True) + "\n"
        (self.out_dir / "explore.json").write_text(report, encoding="utf-8")
        remove_run_files(work)
        return result

    def _keep_failure(
        self,
        failure: tuple[str, str],
        index: int,
        seed: int,
        faults: tuple[Fault, ...],
        cpu_s: float,
        work: Path,
    ) -> Failure:
        """Write the failing schedule and its shrunk reproducer (the run's db is `work`)."""
        n = len(self.result.failures) + 1
        stem = f"failure-{n}-{failure[0]}"
        found = variant(
            self.raw,
            Schedule(list(faults), self.schedule.heal_at_us),
            range(len(faults)),
            self.raw.get("invariants", {}),
        )
        found["name"] = f"{self.raw.get('name', 'explore')}-{stem}"
        found["seed"] = seed
        header = [f"Found by `mastemu explore` (seed {self.result.seed}), run {index}."]
        written = self.out_dir / f"{stem}.toml"
        written.write_text(to_toml(found, header), encoding="utf-8")
        db = self.out_dir / f"{stem}.db"
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(work) + suffix)
            if src.exists():
                src.replace(Path(str(db) + suffix))
        minimal: str | None = str(self.out_dir / f"{stem}.min.toml")
        code = shrink_run(
            db,
            invariant=failure[0],
            target=Path(minimal),
            runs_max=self.shrink_runs,
            out=_Quiet(),
        )
        if code != 0:
            minimal = None
        print(
            f"failure {n}: {failure[0]} (after {failure[1]}) at run {index}: {written}"
            + (f"; minimal: {minimal}" if minimal else ""),
            file=self.log,
        )
        return Failure(failure, index, seed, round(cpu_s, 3), str(written), minimal)


class _Quiet:
    """A text sink for shrink's progress lines (explore prints its own)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


def explore(
    ref: str,
    *,
    seed: int,
    budget: Budget,
    out_dir: Path,
    log: TextIO | None = None,
    stop_at_first: bool = False,
    on_run: Callable[[RunRecord], None] | None = None,
    jobs: int = 1,
    cluster: ClusterSpec | None = None,
) -> ExploreResult:
    """Search `ref`'s fault schedules within `budget` (the module docstring).

    `jobs` > 1 runs batches of that many schedules in local processes, and
    `cluster` on a Dask cluster (a batch per round of its worker threads).
    """
    explorer = Explorer(
        ref,
        seed=seed,
        budget=budget,
        out_dir=out_dir,
        log=log or sys.stdout,
        stop_at_first=stop_at_first,
    )
    if cluster is not None:
        with dask_pool(cluster, jobs if jobs > 1 else None) as dask:
            return explorer.run(on_run, dask.executor, dask.slots)
    if jobs > 1:
        context = multiprocessing.get_context(
            "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        )
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            return explorer.run(on_run, pool, jobs)
    return explorer.run(on_run)


def summary_lines(result: ExploreResult) -> list[str]:
    lines = [
        f"explored {result.scenario}: {len(result.runs)} runs ({result.budget.describe()} budget), "
        f"corpus {result.corpus}, {result.features} features, "
        f"{len(result.failures)} distinct failure(s)"
    ]
    marks = sorted({0, *(len(result.runs) * k // 4 for k in range(1, 5))} - {0})
    if marks:
        growth = ", ".join(f"run {m}: {result.features_over_time[m - 1]}" for m in marks)
        lines.append(f"features over time: {growth}")
    for f in result.failures:
        where = f.minimal or f.scenario
        lines.append(
            f"  {f.signature[0]} (after {f.signature[1]}) at run {f.run} "
            f"({f.cpu_s:.1f} CPU s): {where}"
        )
        lines.append(f"  reproduce: mastemu run {where}")
    return lines + coverage_lines(
        merge(result.tallies, catalogue(result.system)), len(result.runs), "runs"
    )
