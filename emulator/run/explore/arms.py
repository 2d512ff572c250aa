"""What the search chooses between, and how it scores what each choice paid.

An arm is a way of making the next run's schedule (a fresh seed's draw, or
a mutation of a corpus member); arms form groups, and runs go to groups and
arms by what their runs brought (a bandit with priors and floors). A
corpus member is picked by its energy: what it and its children brought.
"""

from __future__ import annotations

from dataclasses import dataclass

from emulator.run.explore.features import Renewal, Window
from emulator.run.scenario import Fault

MUTATIONS = (
    "add",
    "remove",
    "move",
    "retarget",
    "stretch",
    "splice",
    "reseed",
    "aim",
    "early",
    "timeout",
    "expiry",
)
# Where a run's schedule comes from: a fresh seed's nemesis as drawn (what random
# seeds run), the same front-loaded, the same with the next dark spell of
# `explore --grid`'s added (whole roles out together past the system's clocks),
# or a mutation of a corpus member.
ARMS = ("fresh", "front", "grid", *MUTATIONS)
# What an arm is believed worth before it has run (features per run): aimed
# faults are the point of the search, fresh seeds its safety net.
PRIOR = {"fresh": 2.0, "front": 2.0, "aim": 5.0, "early": 2.0, "timeout": 1.0, "expiry": 1.0}
PRIOR_OTHER = 1.5
SHARE_MIN = 0.04  # no arm starves: every one keeps a small share of the runs
# Arms in groups, each group given runs by what it paid (at least GROUP_FLOOR of
# them): faults aimed in time (into a phase), in length (at a timeout) or at an
# instant (a lease's expiry), where the deep bugs live and no other arm finds them
# but by chance; the grid's dark
# spells, each on a fresh seed's draw (whole roles out past a clock: found the
# bugs of outages no other arm did); fresh seeds, what random search runs (it
# finds the medium bugs); the other mutations.
GROUPS = {
    "aim": ("aim", "timeout", "expiry"),
    "grid": ("grid",),
    "seeds": ("fresh", "front"),
    "mutate": tuple(m for m in MUTATIONS if m not in ("aim", "timeout", "expiry")),
}
GROUP_PRIOR = {"aim": 5.0, "seeds": 3.0, "mutate": 1.5, "grid": 3.0}
# The least share of runs a group keeps however little it pays: aimed faults and
# dark spells pay rarely in features but are where the deep bugs are.
GROUP_FLOOR = {"aim": 0.45, "seeds": 0.2, "mutate": 0.1, "grid": 0.25}


@dataclass
class Member:
    """A schedule in the corpus and how well its children did."""

    seed: int
    faults: tuple[Fault, ...]
    new: int  # features it brought
    picked: int = 0
    paid: int = 0  # features its children brought
    windows: tuple[Window, ...] = ()  # when its run was in each phase
    renewals: tuple[Renewal, ...] = ()  # a sample of its run's lease renewals

    def energy(self) -> float:
        return (1.0 + self.new + 2.0 * self.paid) / (1.0 + self.picked) ** 0.5


def payoff(new: frozenset[str] | set[str]) -> float:
    """What new features are worth to the arm that found them: a decision's count
    in a new power of two (`D:`) or a new mix of phases (`P:`) says little, and
    any fresh seed brings some; a rare state, or a fault in a new phase, much."""
    return sum(0.25 if feature.startswith(("D:", "P:")) else 1.0 for feature in new)


@dataclass
class Arm:
    """How one way of making schedules has paid: runs made and features they brought."""

    tries: int = 0
    paid: float = 0.0

    def worth(self, prior: float) -> float:
        # The mean payoff with the prior counted as two runs' worth: one lucky or
        # unlucky run does not decide an arm's share.
        return (2.0 * prior + self.paid) / (2.0 + self.tries)
