"""`explore --grid`: dark spells of whole roles, laid out on a grid instead of drawn.

Some failures need components that fail together to come back in one order:
a region's RMSs back after it was given up while its CM stays dark past a
dispatch timeout. A random nemesis rarely draws two whole roles out from one
instant for lengths that straddle the system's clocks; a grid draws nothing.
Each schedule takes one or two role groups (`all of ROLE`) out at one instant,
paused or crashed, for lengths just past each of the system's clocks (every
duration its parameters and its actors' set, from the lease up), so one group
outlasts a clock the other does not, in every order; a spell ends by the end
of the fault span at the latest.

Order: every group alone first, then pairs of groups that share a region (or
where one is global, as the GMS is), then every other pair; within each
part the search's seed shuffles the schedules, so a budget smaller than the
grid samples it evenly instead of exhausting one group first. The grid's
runs keep the scenario's seed; its own faults are left out (the grid's are
the only ones).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from emulator.errors import InputError
from emulator.run.explore.space import FaultSpace
from emulator.run.scenario import CrashFault, Fault, PauseFault
from emulator.run.targets import ALL_OF
from emulator.units import MIN, Duration, S, parse_duration_us

CLOCK_MIN_US = 30 * S  # shorter clocks (retries, heartbeats) are crossed by any dark spell
PAST = 1.25  # a length a quarter past its clock: the clock has fired, its sequel has begun
LENGTHS_MAX = 6  # the longest clocks only: the grid is lengths² per pair of groups
AT_MAX = 8
ACTIONS = ("pause", "crash")


def default_lengths(space: FaultSpace) -> tuple[int, ...]:
    """A quarter past each of the system's clocks of 30 s or more, the longest six,
    each at most the fault span (rounded to seconds)."""
    span = space.end_us - space.start_us
    past = {min(span, int(c * PAST) // S * S) for c in space.clocks if c >= CLOCK_MIN_US}
    return tuple(sorted(p for p in past if p > 0)[-LENGTHS_MAX:])


def default_at(space: FaultSpace) -> tuple[int, ...]:
    """One instant an eighth into the fault span (on a minute): work is running by then."""
    at = space.start_us + (space.end_us - space.start_us) // 8
    return (max(space.start_us, at // MIN * MIN),)


def parse_instants(text: str, option: str, *, positive: bool = False) -> tuple[int, ...]:
    """`20m,45m`: distinct durations, at most `AT_MAX` of them (above 0 if `positive`)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise InputError(option, "", "give one or more durations, comma-separated (20m,45m)")
    if len(parts) > AT_MAX:
        raise InputError(option, "", f"at most {AT_MAX} values")
    out = []
    for part in parts:
        try:
            out.append(parse_duration_us(part))
        except (ValueError, InputError):
            raise InputError(option, "", f"{part!r} is not a duration (20m, 90s)") from None
    if positive and min(out) <= 0:
        raise InputError(option, "", "a length is above 0")
    return tuple(sorted(set(out)))


def grid_schedules(
    space: FaultSpace,
    seed: int,
    at_us: Sequence[int] | None = None,
    lengths_us: Sequence[int] | None = None,
) -> list[tuple[Fault, ...]]:
    """Every dark spell of the grid, in the order the module docstring gives."""
    ats = tuple(at_us) if at_us else default_at(space)
    lengths = tuple(lengths_us) if lengths_us else default_lengths(space)
    for at in ats:
        if not space.start_us <= at < space.end_us:
            raise InputError(
                "--grid-at", "", f"{Duration(at)} is outside the run's fault span "
                f"[{Duration(space.start_us)}, {Duration(space.end_us)})",
            )  # fmt: skip
    groups = space.groups
    if not groups:
        raise InputError("--grid", "", "the scenario has no role with several instances")
    if not lengths:
        raise InputError("--grid-lengths", "", "the system sets no clock of 30 s or more")
    rng = random.Random(f"grid:{seed}")
    singles = [((g,), (n,)) for g in groups for n in lengths]
    pairs = list(itertools.combinations(groups, 2))
    near = [p for p in pairs if _related(p, space.regions)]
    far = [p for p in pairs if not _related(p, space.regions)]
    out: list[tuple[Fault, ...]] = []
    for part in (singles, _spells(near, lengths), _spells(far, lengths)):
        # A spell ends by the fault span's end, the final heal, as explore's faults
        # do (`with_length`): one still on when the run ends leaves nothing to judge
        # recovery by. Lengths cut to the same one make one spell (dicts keep the first).
        schedules = list(
            dict.fromkeys(
                tuple(
                    space.with_length(_fault(action, at, g, n), n)
                    for g, n in zip(gs, ns, strict=True)
                )
                for gs, ns in part
                for at in ats
                for action in ACTIONS
            )
        )
        rng.shuffle(schedules)
        out += schedules
    return out


def _spells(
    pairs: list[tuple[str, str]], lengths: tuple[int, ...]
) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
    return [(pair, ns) for pair in pairs for ns in itertools.product(lengths, repeat=2)]


def _region(group: str, regions: Sequence[str]) -> str | None:
    """The region a role group lives in (`all of rms/us-east`), None for a global role."""
    parts = group.removeprefix(ALL_OF).split("/")
    return next((p for p in parts[1:] if p in regions), None)


def _related(pair: tuple[str, str], regions: Sequence[str]) -> bool:
    a, b = (_region(g, regions) for g in pair)
    return a is None or b is None or a == b


def _fault(action: str, at_us: int, target: str, length_us: int) -> Fault:
    if action == "crash":
        return CrashFault(at=Duration(at_us), target=target, restart_after=Duration(length_us))
    return PauseFault(at=Duration(at_us), target=target, duration=Duration(length_us))


@dataclass(frozen=True)
class GridSpec:
    """`--grid`, with its instants and lengths if given (the defaults otherwise)."""

    at_us: tuple[int, ...] = ()
    lengths_us: tuple[int, ...] = ()

    def schedules(self, space: FaultSpace, seed: int) -> list[tuple[Fault, ...]]:
        return grid_schedules(space, seed, self.at_us, self.lengths_us)
