"""Entry point `mastemu.plugins`: registers the emulated system with the emulator."""

from __future__ import annotations

from pathlib import Path

import scenarios

# Imported for what they register: invariant checkers and benchmarks.
from actors import (  # noqa: F401
    bench,
    bench_tetris,
    checkers,
    data_checkers,
    liveness,
    progress_checker,
)
from actors.cluster_report import ClusterReporter
from actors.cluster_system import ClusterSystem
from actors.lease_demo import LeaseCandidate, LeaseClient
from actors.mast import MastSystem
from actors.report import MastReporter
from emulator.registry import (
    register_actor,
    register_reporter,
    register_scenario_dir,
    register_system,
)


def register() -> None:
    for cls in (LeaseCandidate, LeaseClient):
        register_actor(cls)
    register_system(MastSystem())
    register_system(ClusterSystem())
    register_reporter("cluster", ClusterReporter())
    register_reporter("mast", MastReporter())
    register_scenario_dir(Path(scenarios.__file__).parent)
