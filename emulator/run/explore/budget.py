"""How long a search may run: runs, wall seconds or CPU seconds."""

from __future__ import annotations

from dataclasses import dataclass

from emulator.errors import InputError
from emulator.units import S, parse_duration_us

RUNS_MAX = 1_000_000


# ---- the budget ------------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """Runs (deterministic), wall seconds or CPU seconds of runs (a benchmark's measure);
    a time budget stops after the run that crosses it."""

    runs: int | None = None
    wall_s: float | None = None
    cpu_s: float | None = None

    def spent(self, runs: int, wall_s: float, cpu_s: float = 0.0) -> bool:
        if self.runs is not None:
            return runs >= self.runs
        if self.cpu_s is not None:
            return cpu_s >= self.cpu_s
        return self.wall_s is not None and wall_s >= self.wall_s

    def describe(self) -> str:
        if self.runs is not None:
            return f"{self.runs} runs"
        if self.cpu_s is not None:
            return f"{self.cpu_s:g} CPU s"
        return f"{self.wall_s:g} s"


def parse_budget(text: str) -> Budget:
    """`200` (runs) or a duration of wall time (`10m`, `90s`)."""
    if text.isdigit():
        runs = int(text)
        if not 1 <= runs <= RUNS_MAX:
            raise InputError("--budget", "", f"runs must be between 1 and {RUNS_MAX:,}")
        return Budget(runs=runs)
    try:
        us = parse_duration_us(text)
    except (ValueError, InputError):
        raise InputError(
            "--budget", "", f"{text!r} is neither a number of runs nor a duration (10m)"
        ) from None
    if not S <= us <= 7 * 24 * 3600 * S:
        raise InputError("--budget", "", "a time budget is between 1s and 7 days")
    return Budget(wall_s=us / S)
