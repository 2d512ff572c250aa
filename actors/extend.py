"""What a package of one's own imports to plug into mastemu: every registry, one place.

A package declares an entry point in the group `mastemu.plugins` whose
value is a function of no arguments; `mastemu` (the CLI, the pytest plugin,
`emulator.testing.run_scenario`) calls it once, before the first scenario is
read. That function registers what the package brings:

    [project.entry-points."mastemu.plugins"]
    my-scheduler = "my_scheduler.plugin:register"

    def register() -> None:
        register_cluster_policy(SmallestFirst())
        register_checker(SmallestFirstOrder.name, SmallestFirstOrder)
        register_scenario_dir(Path(__file__).parent / "scenarios")

A scenario then names them as it names built-in ones (`policy =
"smallest-first"`, `[invariants] enabled = ["smallest-first-order"]`,
`mastemu run my-scenario`). A checker registered here runs online during
a run and offline in `mastemu check`, in any process where the package is
installed. Names are global: a name a built-in already uses is refused
(policies) or shadowed by the built-in (scenario files), so pick distinct
ones.

The value types a policy decides over (`ClusterView`, `Decision`…) and the
trace reader a checker needs (`named`) are re-exported here too, so a
plugin's imports do not depend on where mastemu keeps them.
"""

from __future__ import annotations

from actors.policies.cluster import registry as _cluster
from actors.policies.cluster.api import (
    AcceptsEveryOffer,
    ClusterPolicy,
    ClusterView,
    Decision,
    JobView,
    Slot,
    Start,
    Tier,
)
from actors.policies.mast import registry as _mast
from actors.policies.mast.api import MastPolicy
from emulator.bugs import register_bug
from emulator.invariants import Checker, register_checker
from emulator.liveness import register_liveness
from emulator.registry import (
    register_actor,
    register_bench,
    register_reporter,
    register_scenario_dir,
    register_schema_part,
    register_system,
)
from emulator.run.events import NamedEvent, named
from emulator.sometimes import Detector, register_sometimes, unregister_sometimes
from emulator.trace import TraceEvent

__all__ = [
    "AcceptsEveryOffer",
    "Checker",
    "ClusterPolicy",
    "ClusterView",
    "Decision",
    "Detector",
    "JobView",
    "MastPolicy",
    "NamedEvent",
    "Slot",
    "Start",
    "Tier",
    "TraceEvent",
    "named",
    "register_actor",
    "register_bench",
    "register_bug",
    "register_checker",
    "register_cluster_policy",
    "register_liveness",
    "register_mast_policy",
    "register_reporter",
    "register_scenario_dir",
    "register_schema_part",
    "register_sometimes",
    "register_system",
    "unregister_cluster_policy",
    "unregister_mast_policy",
    "unregister_sometimes",
]


def register_cluster_policy(policy: ClusterPolicy) -> ClusterPolicy:
    """A cluster policy for `[system] kind = "cluster"`, named by `policy.name`."""
    return _cluster.register(policy)


def register_mast_policy(policy: MastPolicy) -> MastPolicy:
    """A MAST-level policy for `[system] kind = "mast"`, named by `policy.name`."""
    return _mast.register(policy)


def unregister_cluster_policy(name: str) -> None:
    """Remove a cluster policy (a test removes the one it registered)."""
    _cluster.unregister(name)


def unregister_mast_policy(name: str) -> None:
    """Remove a MAST-level policy (a test removes the one it registered)."""
    _mast.unregister(name)
