"""`mastemu bench bugzoo`: how fast random seeds, `explore` and its grid find each seeded bug.

For every bug of the zoo (`emulator.bugs`), the searches get the same
scenario with that bug switched on and the same budget of CPU seconds (the
runs' own CPU time, so a slow machine does not favour either):

  - random: the scenario's nemesis under seeds `base+1, base+2, …`, one run
    after another, until a run violates an invariant (or crashes);
  - explore: `mastemu explore` on the scenario with `--seed r`, stopping at
    its first failure. Its base run (the scenario's own seed and nemesis) is
    the random search's first seed of the same repetition: paired draws, so a
    bug that run catches costs both searches the same and the comparison
    measures what the searches do after it, not the luck of one seed;
  - grid: `mastemu explore --grid` (its default instants and lengths), the
    same base run first, then dark spells of whole roles in the order
    `--seed r` shuffles them to.

Each search is repeated (`repetitions`, a different `base` or `--seed` each
time) and the median CPU seconds to the first failure is reported; a search
that finds nothing within the budget counts as the budget. The scenario is
the bug's family: `chaos` with the setting the bug needs
(`search_scenario`).
"""

from __future__ import annotations

import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from actors.mast.zoo import ZOO, family
from emulator.bugs import BUGS, DEPTHS, Bug
from emulator.run.explore import Budget, explore
from emulator.run.explore.grid import GridSpec
from emulator.run.sweep import run_seed

ZOO_BY_NAME = {bug.name: bug for bug in ZOO}
BUDGET_CPU_S = 60.0
REPETITIONS = 3
# Random seeds of repetition r start after r * SEED_STRIDE: disjoint draws.
SEED_STRIDE = 100_000


def search_scenario(bug: Bug) -> dict[str, Any]:
    """The scenario both searches run for `bug`, with the bug switched on.

    The bug's family (`actors.mast.zoo.family`): `chaos`, the random nemesis
    on the small world with a random workload, clean on every seed without a
    bug, with the setting the bug needs switched on (pipelined auctions,
    home-only data, the migration service). Not the bug's witness: it is
    written to show the bug, often without a fault, so any search would find
    it at once.
    """
    raw = family(ZOO_BY_NAME[bug.name])
    # Both searches stop a run at its first violation: what follows costs CPU
    # and finds nothing more. They hunt the bug's violation: a stall (liveness)
    # is not the bug found.
    invariants = {**raw.get("invariants", {}), "stop_on_violation": True, "liveness": False}
    return {**raw, "name": f"zoo-{bug.name}", "invariants": invariants}


def random_search(path: Path, repetition: int, budget_s: float, workdir: Path) -> float | None:
    """CPU seconds until a random seed fails (None: not within the budget)."""
    spent = 0.0
    seed = first_seed(repetition) - 1
    while spent < budget_s:
        seed += 1
        cpu0 = time.process_time()
        run = run_seed(str(path), seed, str(workdir))
        spent += time.process_time() - cpu0
        if run.failed:
            return round(spent, 3)
    return None


def first_seed(repetition: int) -> int:
    """The random search's first seed in `repetition`: also explore's base run's seed."""
    return repetition * SEED_STRIDE + 1


def paired_scenario(path: Path, repetition: int, workdir: Path) -> Path:
    """The scenario at `path` with its seed set to `first_seed(repetition)`."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["seed"] = first_seed(repetition)
    paired = workdir / f"{path.stem}-seed{raw['seed']}.json"
    paired.write_text(json.dumps(raw), encoding="utf-8")
    return paired


def explore_search(
    path: Path, repetition: int, budget_s: float, workdir: Path, grid: GridSpec | None = None
) -> float | None:
    """CPU seconds until explore's guided search (or its `grid`) fails a run."""
    result = explore(
        str(paired_scenario(path, repetition, workdir)),
        seed=repetition,
        budget=Budget(cpu_s=budget_s),
        out_dir=workdir / f"{'explore' if grid is None else 'grid'}-{repetition}",
        log=io.StringIO(),  # its failure lines: the JSON says it all
        stop_at_first=True,
        grid=grid,
    )
    return result.first_failure_cpu_s


def grid_search(path: Path, repetition: int, budget_s: float, workdir: Path) -> float | None:
    return explore_search(path, repetition, budget_s, workdir, GridSpec())


SEARCHES = {"random": random_search, "explore": explore_search, "grid": grid_search}


def _median(found: list[float | None], budget_s: float) -> float:
    return round(statistics.median(budget_s if f is None else f for f in found), 3)


def _totals(rows: list[dict[str, Any]], search: str) -> dict[str, Any]:
    medians = [r[f"{search}_s"] for r in rows]
    return {
        "found": sum(r[f"{search}_found"] > 0 for r in rows),
        "median_s": round(statistics.median(medians), 3) if rows else None,
    }


def bench_bugzoo(options: dict[str, Any]) -> dict[str, Any]:
    """Per bug and search, the median CPU seconds to the first failure (module docstring)."""
    budget_s = float(options.get("budget_s") or BUDGET_CPU_S)
    repetitions = int(options.get("repetitions") or REPETITIONS)
    names = options.get("bugs") or sorted(
        (n for n in BUGS if n in ZOO_BY_NAME), key=lambda n: (DEPTHS.index(BUGS[n].depth), n)
    )
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mastemu-bugzoo-") as tmp:
        work = Path(tmp)
        for name in names:
            bug = BUGS[name]
            path = work / f"{name}.json"
            path.write_text(json.dumps(search_scenario(bug)), encoding="utf-8")
            row: dict[str, Any] = {"name": name, "depth": bug.depth, "invariant": bug.invariant}
            for search, run in SEARCHES.items():
                found = [run(path, r, budget_s, work) for r in range(1, repetitions + 1)]
                row[f"{search}_s"] = _median(found, budget_s)
                row[f"{search}_found"] = sum(f is not None for f in found)
                row[f"{search}_runs_s"] = found
            # Progress for a person on stderr (stdout is the JSON): a full zoo takes minutes.
            runs = ", ".join(f"{search} {row[f'{search}_runs_s']}" for search in SEARCHES)
            print(f"bugzoo: {name}: {runs}", file=sys.stderr, flush=True)
            rows.append(row)
    totals = {search: _totals(rows, search) for search in SEARCHES}
    speedup = None
    if rows:
        speedup = round(totals["random"]["median_s"] / max(totals["explore"]["median_s"], 1e-9), 2)
    return {
        "budget_cpu_s": budget_s,
        "repetitions": repetitions,
        "bugs": rows,
        **totals,
        "speedup_median": speedup,
        "note": "CPU seconds of the runs to the first failure, median over repetitions; "
        "a search that found nothing counts as the budget",
    }
