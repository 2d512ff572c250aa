"""What a search found: its runs, its distinct failures, and the report of both."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from emulator.run.explore.budget import Budget
from emulator.sometimes import catalogue, coverage_json, coverage_lines, merge


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
    grid: int | None = None  # `--grid`: its size in schedules (the base run besides)

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
            "grid": self.grid,
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


def summary_lines(result: ExploreResult) -> list[str]:
    lines = [
        f"explored {result.scenario}: {len(result.runs)} runs ({result.budget.describe()} budget), "
        f"corpus {result.corpus}, {result.features} features, "
        f"{len(result.failures)} distinct failure(s)"
    ]
    if result.grid is not None:
        done = min(result.grid, max(0, len(result.runs) - 1))
        lines.append(f"grid: {done} of {result.grid} dark spells run (after the base run)")
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
