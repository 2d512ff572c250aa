"""Entry point `mastemu.plugins`: the one place that registers what `actors` provides.

Nothing in `actors` registers itself on import; `register()` names every
system, actor kind, reporter, invariant checker, liveness judge, benchmark,
schema part and scenario folder, so reading this file tells what a run can use.
"""

from __future__ import annotations

from pathlib import Path

import scenarios
from actors.checks import liveness
from actors.checks.allocation import AllocationChecker
from actors.checks.auction import AuctionChecker
from actors.checks.colocation import ColocationChecker
from actors.checks.gang import GangChecker
from actors.checks.lost_workload import LostWorkloadChecker
from actors.checks.preemption import PreemptionChecker
from actors.checks.progress import ProgressChecker
from actors.checks.quota import QuotaChecker
from actors.checks.refusals import RefusalChecker
from actors.checks.sometimes import (
    CLUSTER,
    LEASES,
    MAST,
    ClusterDetector,
    ClusterPhase,
    LeaseDetector,
    MastDetector,
    MastPhase,
)
from actors.checks.storage import MigrationCapChecker, StorageChecker
from actors.cluster.report import ClusterReporter
from actors.cluster.system import ClusterSystem
from actors.demo.lease import LeaseCandidate, LeaseClient
from actors.mast.bench import bugzoo, control_plane, day, tetris
from actors.mast.export.chrome import MastExport
from actors.mast.report.reporter import MastReporter
from actors.mast.system import MastSystem
from actors.mast.timeline.viewer import StateViewer
from actors.mast.zoo import SEEDS_TRIED, ZOO, witness_path
from emulator.bugs import register_bug
from emulator.invariants import LeaseSafety, register_checker
from emulator.liveness import register_liveness
from emulator.registry import (
    register_actor,
    register_bench,
    register_exporter,
    register_reporter,
    register_scenario_dir,
    register_schema_part,
    register_system,
    register_viewer,
)
from emulator.sometimes import register_phases, register_sometimes
from store.mast.schema import MAST_SCHEMA


def register() -> None:
    for cls in (LeaseCandidate, LeaseClient):
        register_actor(cls)
    register_system(MastSystem())
    register_system(ClusterSystem())
    register_reporter("cluster", ClusterReporter())
    register_reporter("mast", MastReporter())
    # Both systems keep their state in MAST's tables; "" is a run of declared actors only.
    for kind in ("mast", "cluster", ""):
        register_viewer(kind, StateViewer())
    for kind in ("mast", "cluster"):
        register_exporter(kind, MastExport())
    for checker in (
        LeaseSafety,
        AllocationChecker,
        GangChecker,
        AuctionChecker,
        PreemptionChecker,
        ColocationChecker,
        QuotaChecker,
        LostWorkloadChecker,
        StorageChecker,
        MigrationCapChecker,
        ProgressChecker,
        RefusalChecker,
    ):
        register_checker(checker.name, checker)
    register_liveness(liveness.WorkloadLiveness.name, liveness.WorkloadLiveness)
    register_sometimes("leases", LeaseDetector, LEASES)
    register_sometimes("mast", MastDetector, MAST, systems=["mast"])
    register_sometimes("cluster", ClusterDetector, CLUSTER, systems=["cluster"])
    register_phases("mast", MastPhase)
    register_phases("cluster", ClusterPhase)
    register_bench("gms", control_plane.bench_gms)
    register_bench("rms", control_plane.bench_rms)
    register_bench("day", day.bench_day)
    register_bench("week", day.bench_week)
    register_bench("scale", day.bench_scale)
    register_bench("chaos-sweep", control_plane.bench_chaos_sweep)
    register_bench("bugzoo", bugzoo.bench_bugzoo)
    register_bench("tetris", tetris.bench_tetris)
    register_schema_part(MAST_SCHEMA)
    # The bug zoo: seeded protocol bugs a scenario may switch on (`bugs = [...]`).
    for bug in ZOO:
        register_bug(
            bug.name,
            bug.description,
            bug.depth,
            invariant=bug.invariant,
            witness=witness_path(bug.name),
            chaos_caught=bug.chaos_caught,
            chaos_seeds_tried=SEEDS_TRIED,
        )
    register_scenario_dir(Path(scenarios.__file__).parent)
