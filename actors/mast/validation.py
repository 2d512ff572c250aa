"""Cross-checks of a MAST scenario's `[system]` that its types cannot express.

The Structs bound every value on its own (counts, durations, shares). What
is left needs two values at once, and is checked when the run is planned,
before its database exists, each problem an `InputError` at its key path
below `system` (or at the line and column of a CSV trace):

- references resolve: `manual_homes.region` and tables' regions are regions
  of the world, a workload's tenant is one of the run's tenants (those of
  `tenant_list`, else the generated `team000`…), a job's GPU type is one
  the world has;
- sizes fit the world: no job asks for more GPUs of its type, or CPU
  machines, than the whole world has (an error: it could never run);
- sizes fit a region: a job larger than the best-supplied region, or a
  workload larger than any one region holds (a workload runs in one region),
  waits forever. That is allowed, since scenarios use it on purpose (a gang
  that never starts, a queue that always has work), but it is returned as an
  `InputWarning`, which `run` prints and `report` lists;
- names are unique: tenants, tables, workloads, and jobs within a workload;
- a job's work is not negative, and it saves its progress at most once a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from actors.common.cm.state import CMParams
from actors.mast.workload.csv_trace import read_csv_trace
from actors.mast.world import WorldModel
from emulator.errors import InputError, InputWarning
from emulator.units import format_us
from store.mast.records import CHECKPOINT_EVERY_US_MIN, GPUS_PER_MACHINE, JobSpec, WorkloadSpec

# Upper bounds on what a scenario may list or generate (`mastemu schema` shows them).
TENANTS_MAX = 10_000
WORKLOADS_MAX = 1_000_000
TABLES_MAX = 1_000_000


def tenant_names(params: Any) -> set[str]:
    """The run's tenants: `tenant_list`'s, else those `make_tenants` names (`team000`…)."""
    if params.tenant_list is not None:
        return {t.name for t in params.tenant_list}
    width = max(3, len(str(params.tenants - 1)))
    return {f"team{i:0{width}d}" for i in range(params.tenants)}


def _listed(names: Iterable[str], shown_max: int = 8) -> str:
    ordered = sorted(names)
    more = f", … ({len(ordered)} in all)" if len(ordered) > shown_max else ""
    return ", ".join(ordered[:shown_max]) + more if ordered else "none"


# Where a warning goes: (key path below the workload, why).
Warn = Callable[[str, str], None]


class Supply:
    """What each region of the world holds, and the world in all: GPUs per type, CPU machines."""

    def __init__(self, world: WorldModel) -> None:
        self.regions = [r.name for r in world.regions]
        self.gpus = {
            r.name: {t: GPUS_PER_MACHINE * n for t, n in r.gpu_machines.items() if n > 0}
            for r in world.regions
        }
        self.cpus = {r.name: r.cpu_machines for r in world.regions}
        self.types = sorted({t for kinds in self.gpus.values() for t in kinds})
        self.world_gpus = {
            t: sum(kinds.get(t, 0) for kinds in self.gpus.values()) for t in self.types
        }
        self.world_cpus = sum(self.cpus.values())

    def job_problem(self, job: JobSpec, warn: Warn) -> tuple[str, str] | None:
        """(field, why) if the world could never hold `job`; None if it could.

        A job the world holds but no single region does is passed to `warn`.
        """
        if job.gpu_type is not None or job.gpus:
            if job.gpu_type is None:
                return "gpu_type", "a job with GPUs needs a GPU type"
            if job.gpu_type not in self.types:
                return "gpu_type", (
                    f"unknown GPU type {job.gpu_type!r} (the world has: {_listed(self.types)})"
                )
            world = self.world_gpus[job.gpu_type]
            if job.gpus > world:
                return "gpus", (
                    f"{job.gpus:,} {job.gpu_type} GPUs: more than the whole world has ({world:,})"
                )
            most = max(kinds.get(job.gpu_type, 0) for kinds in self.gpus.values())
            if job.gpus > most:
                warn(
                    "gpus",
                    f"{job.gpus:,} {job.gpu_type} GPUs: more than any region has ({most:,}); "
                    "it will wait forever",
                )
        if job.cpu_machines > self.world_cpus:
            return "cpu_machines", (
                f"{job.cpu_machines:,} CPU machines: more than the whole world has "
                f"({self.world_cpus:,})"
            )
        most_cpus = max(self.cpus.values(), default=0)
        if job.cpu_machines > most_cpus:
            warn(
                "cpu_machines",
                f"{job.cpu_machines:,} CPU machines: more than any region has ({most_cpus:,}); "
                "it will wait forever",
            )
        if not job.gpus and not job.cpu_machines:
            return "gpus", "a job asks for GPUs or CPU machines (both are 0)"
        return None

    def workload_fits_a_region(self, jobs: Sequence[JobSpec]) -> bool:
        """Whether some single region can hold the whole gang at once."""
        need: dict[str, int] = {}
        for job in jobs:
            if job.gpu_type is not None:
                need[job.gpu_type] = need.get(job.gpu_type, 0) + job.gpus
        cpus = sum(j.cpu_machines for j in jobs)
        return any(
            cpus <= self.cpus[region]
            and all(self.gpus[region].get(t, 0) >= n for t, n in need.items())
            for region in self.regions
        )


def check_workload(
    w: WorkloadSpec, supply: Supply, tenants: set[str], warn: Warn
) -> tuple[str, str] | None:
    """(key path below the workload, why) of its first problem, or None; warnings to `warn`."""
    if w.tenant not in tenants:
        return "tenant", f"unknown tenant {w.tenant!r} (tenants: {_listed(tenants)})"
    names: set[str] = set()
    warned = False

    def job_warn(path: str, why: str) -> None:
        nonlocal warned
        warned = True
        warn(path, why)

    for j, job in enumerate(w.jobs):
        if job.name in names:
            return f"jobs[{j}].name", f"duplicate job {job.name!r}"
        names.add(job.name)
        if job.work_us < 0:
            return f"jobs[{j}].work_us", "must be >= 0"
        if job.checkpoint_every_us < CHECKPOINT_EVERY_US_MIN:
            return f"jobs[{j}].checkpoint_every_us", (
                f"must be at least {CHECKPOINT_EVERY_US_MIN:,} (a second): a job saving "
                "its progress more often floods the run"
            )
        problem = supply.job_problem(job, lambda path, why, j=j: job_warn(f"jobs[{j}].{path}", why))
        if problem is not None:
            return f"jobs[{j}].{problem[0]}", problem[1]
    # One warning per workload: a job too large already says it never starts.
    if not warned and not supply.workload_fits_a_region(w.jobs):
        warn(
            "jobs",
            "its jobs together need more than any one region has (a workload runs in one); "
            "it will wait forever",
        )
    return None


def check_mast(params: Any, world: WorldModel, base_dir: Path) -> list[InputWarning]:
    """Every cross-check of the module docstring: InputError at the first problem, else the
    warnings, each at its key path below `system`."""
    supply = Supply(world)
    warnings: list[InputWarning] = []
    regions = set(supply.regions)
    home = params.manual_homes
    if home is not None and home.region not in regions:
        raise InputError(
            "",
            "manual_homes.region",
            f"unknown region {home.region!r} (regions: {_listed(regions)})",
        )
    # A CM frees a stopping job's machines after its stop timeout whether or not
    # the checkpoint was saved: a checkpoint that takes longer hands the victim's
    # machines on before it is safe (the preemption invariant flags every one).
    stop_timeout = int(CMParams(cluster="", region="").stop_timeout)  # the CMs it builds
    if int(params.checkpoint_cost) >= stop_timeout:
        raise InputError(
            "",
            "checkpoint_cost",
            f"must be shorter than the cluster manager's stop timeout ({format_us(stop_timeout)}):"
            " a checkpoint still being saved would have its machines freed",
        )
    tenants = tenant_names(params)
    _unique("tenant_list", [t.name for t in params.tenant_list or ()])
    _unique("table_list", [t.name for t in params.table_list or ()])
    for i, table in enumerate(params.table_list or ()):
        for key, region in [("home_region", table.home_region)] + [
            (f"replicas[{k}]", r) for k, r in enumerate(table.replicas)
        ]:
            if region not in regions:
                raise InputError(
                    "",
                    f"table_list[{i}].{key}",
                    f"unknown region {region!r} (regions: {_listed(regions)})",
                )
    if params.workload_csv is not None:

        def csv_check(w: WorkloadSpec) -> tuple[str, str] | None:
            def warn(path: str, why: str) -> None:
                warnings.append(
                    InputWarning("system.workload_csv", f"workload {w.id!r}: {path}: {why}")
                )

            return check_workload(w, supply, tenants, warn)

        read_csv_trace(base_dir / params.workload_csv, check=csv_check, workloads_max=WORKLOADS_MAX)
    elif params.workload_list is not None:
        _unique("workload_list", [w.id for w in params.workload_list], "id")
        for i, w in enumerate(params.workload_list):

            def warn(path: str, why: str, i: int = i) -> None:
                warnings.append(InputWarning(f"system.workload_list[{i}].{path}", why))

            problem = check_workload(w, supply, tenants, warn)
            if problem is not None:
                raise InputError("", f"workload_list[{i}].{problem[0]}", problem[1])
    return warnings


def _unique(path: str, names: list[str], key: str = "name") -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise InputError("", f"{path}[{i}].{key}", f"duplicate {name!r}")
        seen.add(name)
