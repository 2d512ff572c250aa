"""Argument types of the `mastemu` command line: each turns text into a value or says why not."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from emulator.errors import InputError
from emulator.run import sweep
from emulator.run.explore import Budget, parse_budget
from emulator.run.explore.grid import parse_instants
from emulator.run.pools import ClusterSpec, parse_cluster
from emulator.units import parse_duration_us


def duration(text: str) -> int:
    try:
        value = parse_duration_us(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    except OverflowError:  # '999…9h' overflows float → int
        raise argparse.ArgumentTypeError(f"too large: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def until(text: str) -> int:
    """A time to stop at: a duration later than the start (`--until 0` would run nothing)."""
    value = duration(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be later than 0 (e.g. 30m, 2h)")
    return value


# Options whose value may look like an option (`--until -5m`): argparse would
# take `-5m` for an unknown flag and say "expected one argument".
_VALUE_OPTIONS = frozenset({"--until", "--from", "--to", "--span", "--seed", "--speed"})


def negative_values(argv: Sequence[str]) -> list[str]:
    """`--until -5m` as `--until=-5m`, so the value's own check answers ("must not be negative")."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if token in _VALUE_OPTIONS and nxt is not None and nxt[:1] == "-" and nxt[:2] != "--":
            out.append(f"{token}={nxt}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError("must be between 0 and 2**63-1")
    return value


def seed_range(text: str) -> range:
    try:
        return sweep.seed_range(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def job_count(text: str) -> int:
    try:
        return sweep.job_count(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def budget(text: str) -> Budget:
    try:
        return parse_budget(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def cluster_spec(text: str) -> ClusterSpec:
    try:
        return parse_cluster(text)
    except InputError as error:
        raise argparse.ArgumentTypeError(error.message) from None


def grid_instants(option: str, positive: bool = False) -> Callable[[str], tuple[int, ...]]:
    """`20m,45m` for `option`: distinct durations (`explore --grid-at`, `--grid-lengths`)."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            return parse_instants(text, option, positive=positive)
        except InputError as error:
            raise argparse.ArgumentTypeError(error.message) from None

    return parse


def command_line(argv: Sequence[str]) -> str:
    """The command as typed (what a run's lock says it runs: `mastemu run …`)."""
    return " ".join(["mastemu", *map(shlex.quote, argv)])


def output_file(path: Path) -> Path:
    """A file a command writes: its folder must exist (a typo is not a new folder)."""
    if path.is_dir():
        raise InputError(str(path), "", "is a folder; give a file name")
    parent = path.parent
    if not parent.is_dir():
        raise InputError(str(path), "", f"folder {parent} does not exist; create it first")
    return path


def output_folder(path: Path) -> Path:
    """A folder a command writes into: made if missing, but inside a folder that exists."""
    if path.exists() and not path.is_dir():
        raise InputError(str(path), "", "exists and is not a folder")
    if not path.exists() and not path.parent.is_dir():
        raise InputError(str(path), "", f"folder {path.parent} does not exist; create it first")
    return path
