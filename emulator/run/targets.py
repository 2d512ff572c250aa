"""Actor targets of faults: their forms, and their check against a scenario.

Crash, restart, pause and slow-store faults name their actors; the names are
resolved when the fault fires (`emulator/run/faults.py`). Besides an actor's
address:

  leader of ROLE      the instance holding ROLE's lease at that instant;
  a follower of ROLE  one instance of ROLE that is up and does not hold it;
  a minority of ROLE  max(1, floor((n - 1) / 2)) of ROLE's n instances (1 of 2
                      or 3, 2 of 5): the most a majority survives, at least one;
  all of ROLE         every instance of ROLE;
  region NAME         every actor on region NAME's control hosts (its control
                      plane; its machines go down with a `down` fault on
                      `node = "NAME"` or `"region NAME"`);
  a live KIND         one actor of kind KIND that is up at that instant, also
                      one a system spawned while the run goes on (a job's agent:
                      `a live cluster-job-agent`), which no scenario can name.
The instances of ROLE are the actors addressed `ROLE/N` (N a number: `gms/0`,
`gms/1`); `leader of` also takes a role that actors name in their `role`
parameter (the lease demo's candidates). Random picks use the run's
`fault-targets` stream, so a seed always picks the same instances.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from emulator.actor import actor_kinds
from emulator.registry import load_plugins

# The prefixes code writes targets with (explore's aimed and worker faults).
LEADER_OF = "leader of "
ALL_OF = "all of "
LIVE = "a live "
TARGET_FORMS = {
    LEADER_OF: "leader",
    "a follower of ": "follower",
    "a minority of ": "minority",
    ALL_OF: "all",
    "region ": "region",
    LIVE: "live",
}
# What follows each form's prefix, as an error message names it.
PLACEHOLDER = {"region": "NAME", "live": "KIND"}


def split_target(target: str) -> tuple[str, str] | None:
    """(form, role or region) of a role-relative target; None for an actor address."""
    for prefix, form in TARGET_FORMS.items():
        if target.startswith(prefix):
            return form, target[len(prefix) :]
    return None


def instance_role(address: str) -> str | None:
    """The role an address `ROLE/N` is an instance of, or None."""
    role, _, number = address.rpartition("/")
    return role if role and number.isdigit() else None


def listed(names: Iterable[str], shown_max: int = 8) -> str:
    """`names` sorted and joined, the first `shown_max` of them."""
    ordered = sorted(names)
    more = f", … ({len(ordered)} in all)" if len(ordered) > shown_max else ""
    return ", ".join(ordered[:shown_max]) + more if ordered else "none"


def check_target(
    target: str,
    path: str,
    addresses: set[str],
    roles: tuple[set[str], set[str]],
    regions: set[str],
    fail: Callable[[str, str], None],
) -> None:
    """An actor target names an actor, a role (with instances `ROLE/N` unless
    it asks for the leader: `roles` is (every role, those with instances)), a
    region, or a kind of actor (of any Actor class loaded, the systems' own
    included)."""
    split = split_target(target)
    if split is None:
        if target not in addresses:
            forms = ", ".join(f"'{p}{PLACEHOLDER.get(f, 'ROLE')}'" for p, f in TARGET_FORMS.items())
            fail(path, f"unknown actor {target!r} (or use one of {forms})")
        return
    form, name = split
    if form == "live":
        load_plugins()  # the systems, and their actors, come with the plugins
        kinds = actor_kinds()
        if name not in kinds:
            fail(path, f"unknown actor kind {name!r} (kinds: {listed(kinds)})")
    elif form == "region":
        if name not in regions:
            fail(path, f"unknown region {name!r} (regions: {listed(regions)})")
    elif name not in roles[0]:
        fail(path, f"unknown role {name!r} (roles: {listed(roles[0])})")
    elif form != "leader" and name not in roles[1]:
        fail(path, f"role {name!r} has no instances addressed '{name}/N'; only its leader is known")
