"""`explore --grid`'s layout: which dark spells, in which order, for which lengths."""

from __future__ import annotations

import pytest

from emulator.errors import InputError
from emulator.run.explore.grid import (
    default_at,
    default_lengths,
    grid_schedules,
    parse_instants,
)
from emulator.run.explore.space import FaultSpace
from emulator.run.scenario import CrashFault, PauseFault
from emulator.units import MIN, S

GROUPS = ("all of cm/east/c0", "all of cm/west/c0", "all of gms", "all of rms/east")


def space(clocks: tuple[int, ...] = (10 * S, 30 * S, 10 * MIN, 15 * MIN)) -> FaultSpace:
    return FaultSpace(
        actions=("crash",),
        targets=(),
        regions=("east", "west"),
        nodes=(),
        start_us=8 * MIN,
        end_us=168 * MIN,
        duration_mean_us=MIN,
        groups=GROUPS,
        clocks=clocks,
    )


def targets(schedule: tuple[object, ...]) -> set[str]:
    return {f.target for f in schedule}  # type: ignore[attr-defined]


def test_lengths_are_a_quarter_past_each_clock_of_30_s_or_more() -> None:
    assert default_lengths(space()) == (37 * S, 750 * S, 1125 * S)  # 37.5 s cut to seconds
    # The longest six only, none past the fault span (160 min).
    many = tuple(m * MIN for m in (1, 2, 3, 4, 5, 6, 7, 200))
    assert default_lengths(space(many)) == tuple(x * S for x in (225, 300, 375, 450, 525, 160 * 60))


def test_the_grid_begins_an_eighth_into_the_fault_span_on_a_minute() -> None:
    assert default_at(space()) == (28 * MIN,)


def test_every_group_alone_comes_first_then_pairs_sharing_a_region_then_the_rest() -> None:
    grid = grid_schedules(space(), seed=1)
    n_lengths, actions = 3, 2
    singles = len(GROUPS) * n_lengths * actions
    # Near pairs: the GMS with each of 3 others, and east's CM with east's RMS.
    near = 4 * n_lengths**2 * actions
    far = 2 * n_lengths**2 * actions  # west's CM with east's CM and with east's RMS
    assert len(grid) == singles + near + far
    assert all(len(s) == 1 for s in grid[:singles])
    assert all(len(s) == 2 for s in grid[singles:])
    far_pairs = {frozenset(targets(s)) for s in grid[singles + near :]}
    assert far_pairs == {
        frozenset({"all of cm/west/c0", "all of cm/east/c0"}),
        frozenset({"all of cm/west/c0", "all of rms/east"}),
    }
    # Every combination once: both actions, every length of each group, one instant.
    assert len({repr(s) for s in grid}) == len(grid)
    assert {type(f) for s in grid for f in s} == {CrashFault, PauseFault}
    assert {int(f.at) for s in grid for f in s} == {28 * MIN}
    # The east RMS out 12.5 min and its CM 18.75 min, in both orders of length.
    east = [s for s in grid if targets(s) == {"all of rms/east", "all of cm/east/c0"}]
    assert len(east) == n_lengths**2 * actions


def test_the_seed_shuffles_within_each_part_and_nothing_else() -> None:
    one, two = grid_schedules(space(), seed=1), grid_schedules(space(), seed=2)
    assert one == grid_schedules(space(), seed=1)
    assert one != two
    singles = len(GROUPS) * 3 * 2
    assert sorted(map(repr, one[:singles])) == sorted(map(repr, two[:singles]))
    assert sorted(map(repr, one)) == sorted(map(repr, two))


def test_given_instants_and_lengths_replace_the_defaults() -> None:
    grid = grid_schedules(space(), seed=1, at_us=(20 * MIN, 40 * MIN), lengths_us=(5 * MIN,))
    assert {int(f.at) for s in grid for f in s} == {20 * MIN, 40 * MIN}
    lengths = {int(getattr(f, "duration", None) or f.restart_after) for s in grid for f in s}
    assert lengths == {5 * MIN}


def test_a_spell_ends_by_the_final_heal_and_cut_lengths_make_one_spell() -> None:
    # From 150m, 18 minutes are left of the fault span (it ends at 168m): 30m and
    # 60m both end there, so each group and action has two spells alone, not three.
    lengths = (5 * MIN, 30 * MIN, 60 * MIN)
    grid = grid_schedules(space(), seed=1, at_us=(150 * MIN,), lengths_us=lengths)
    ends = {
        int(f.at) + int(getattr(f, "duration", None) or f.restart_after) for s in grid for f in s
    }
    assert max(ends) == 168 * MIN and min(ends) == 155 * MIN
    assert len(grid) == len(set(grid))
    alone = [s for s in grid if len(s) == 1]
    assert len(alone) == len(GROUPS) * 2 * 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"at_us": (2 * MIN,)}, "outside the run's fault span"),
        ({"at_us": (168 * MIN,)}, "outside the run's fault span"),
    ],
)
def test_an_instant_outside_the_fault_span_is_bad_input(
    kwargs: dict[str, tuple[int, ...]], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        grid_schedules(space(), seed=1, **kwargs)


def test_a_scenario_without_groups_or_clocks_has_no_grid() -> None:
    bare = FaultSpace((), (), (), (), 0, MIN, MIN)
    with pytest.raises(InputError, match="no role with several instances"):
        grid_schedules(bare, seed=1)
    with pytest.raises(InputError, match="no clock of 30 s or more"):
        grid_schedules(space(clocks=(10 * S,)), seed=1)


@pytest.mark.parametrize(
    ("text", "option", "parsed"),
    [
        ("20m", "--grid-at", (20 * MIN,)),
        ("45m, 20m,20m", "--grid-at", (20 * MIN, 45 * MIN)),
        ("0s", "--grid-at", (0,)),
        ("90s", "--grid-lengths", (90 * S,)),
    ],
)
def test_instants_parse_to_sorted_distinct_durations(
    text: str, option: str, parsed: tuple[int, ...]
) -> None:
    assert parse_instants(text, option, positive=option == "--grid-lengths") == parsed


@pytest.mark.parametrize(
    ("text", "option", "message"),
    [
        ("", "--grid-at", "one or more durations"),
        ("soon", "--grid-at", "'soon' is not a duration"),
        ("0s", "--grid-lengths", "a length is above 0"),
        (",".join(f"{m}m" for m in range(1, 10)), "--grid-at", "at most 8"),
    ],
)
def test_bad_instants_are_input_errors_naming_the_option(
    text: str, option: str, message: str
) -> None:
    with pytest.raises(InputError, match=message) as caught:
        parse_instants(text, option, positive=option == "--grid-lengths")
    assert caught.value.source == option
