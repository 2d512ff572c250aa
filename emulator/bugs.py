"""Seeded protocol bugs: a catalogue of known-wrong behaviours a scenario switches on by name.

A scenario lists them at its top level (`bugs = ["rms-no-hold"]`); the run's
kernel carries the set and an actor asks `self.bug(name)` next to the right
behaviour, doing the wrong thing instead when the run enables it (the
run's store carries it too, for a repository function's `store.bug(name)`). With no
bug enabled nothing changes: same decisions, same trace hash. They exist to
measure how fast a search of fault schedules (random seeds, `explore`) finds
a bug that an existing invariant checker catches: the bug zoo.

The catalogue is registered by the plugin that owns the actors
(`actors/plugin.py`), as the emulator never imports them. Each entry says
what the bug is, how deep it hides (`depth`: how much of a fault schedule it
takes to show, measured with random seeds), which invariant catches it, and
a witness: a scenario file whose run with the bug enabled violates that
invariant, and without it is clean.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from emulator.errors import InputError

Depth = Literal["shallow", "medium", "deep"]
DEPTHS: tuple[Depth, ...] = ("shallow", "medium", "deep")


@dataclass(frozen=True)
class Bug:
    """One seeded bug of the zoo."""

    name: str
    description: str
    depth: Depth
    # The invariant (checker name) that catches it, or "crash" for an actor error.
    invariant: str = ""
    # A scenario that catches it when `bugs = [name]` is added (None: none yet).
    witness: Path | None = None
    # Measured: of random `chaos` seeds 1..chaos_seeds_tried, how many caught it.
    chaos_caught: int | None = None
    chaos_seeds_tried: int | None = None


BUGS: dict[str, Bug] = {}


def register_bug(
    name: str,
    description: str,
    depth: Depth,
    *,
    invariant: str = "",
    witness: Path | None = None,
    chaos_caught: int | None = None,
    chaos_seeds_tried: int | None = None,
) -> Bug:
    """Add a bug to the catalogue; a name registered twice with other facts is refused."""
    if depth not in DEPTHS:
        raise ValueError(f"bug {name!r}: depth {depth!r} is not one of {DEPTHS}")
    bug = Bug(name, description, depth, invariant, witness, chaos_caught, chaos_seeds_tried)
    known = BUGS.get(name)
    if known is not None and known != bug:
        raise ValueError(f"bug {name!r} registered twice")
    BUGS[name] = bug
    return bug


def check_bugs(names: Iterable[str], source: str) -> None:
    """Every name is a registered bug; else `InputError` at the key path `bugs[i]`.

    The catalogue is filled by the plugins (`emulator.registry.load_plugins`).
    """
    for i, name in enumerate(names):
        if name not in BUGS:
            known = ", ".join(sorted(BUGS)) or "none"
            raise InputError(source, f"bugs[{i}]", f"unknown bug {name!r} (known: {known})")


def known_bugs() -> dict[str, Bug]:
    """Every registered bug, by name (after `emulator.registry.load_plugins`)."""
    return dict(sorted(BUGS.items()))
