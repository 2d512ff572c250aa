"""Scripted MAST worlds: a scenario of a few workloads, built in a few lines.

The world: regions (east and west by default), each one dynamic cluster of 4
A100 machines (32 GPUs) and 4 CPU machines. Tenants `hi` (priority 1) and
`lo` (priority 5) with quotas far above the world. `workload`, `job` and
`scenario` build the scenario as a dict, which `emulator.testing.run_scenario`
(or the `mastemu` fixture) runs like any other: every invariant checker of
`CHECKERS` runs online.

    run = mastemu.run(scenario([workload("W", "hi", 0, job(gpus=8))]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emulator.units import MIN, H, S

CHECKERS = [
    "lease-safety",
    "allocation",
    "gang",
    "auction",
    "preemption",
    "colocation",
    "quota",
    "no-lost-workload",
    "progress",
]
# How long a replicated role may go without a leader after its leader's crash:
# MAST's lease ttl (30 s) plus its renewal period (10 s).
TAKEOVER_US_MAX = 30 * S + 10 * S


# ---- building a scenario --------------------------------------------------------------------
def region(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "gpu_machines": {"A100": 4},
        "cpu_machines": 4,
        "datacenters": 1,
        "fault_domains": 1,
        "machines_per_rack": 4,
    }


def job(
    name: str = "trainer",
    *,
    gpus: int = 0,
    cpus: int = 0,
    work: int = H,
    tables: Sequence[str] = ("t",),
) -> dict[str, Any]:
    """A trainer of `gpus` A100 GPUs, or (without GPUs) a preprocess job of `cpus` machines."""
    out: dict[str, Any] = {"name": name, "work_us": work, "checkpoint_every_us": 20 * MIN}
    if gpus:
        out.update(role="trainer", gpu_type="A100", gpus=gpus)
    else:
        out.update(role="preprocess", cpu_machines=cpus)
    out["input_tables"] = list(tables)
    return out


def workload(wid: str, tenant: str, at_us: int, *jobs: dict[str, Any]) -> dict[str, Any]:
    return {"id": wid, "tenant": tenant, "submit_at_us": at_us, "jobs": list(jobs)}


def scenario(
    workloads: list[dict[str, Any]],
    *,
    regions: tuple[str, ...] = ("east", "west"),
    tables: list[dict[str, Any]] | None = None,
    kind: str = "mast",
    duration: str = "6h",
) -> dict[str, Any]:
    """The scenario as a dict; by default one table `t`, home in the first region, replicated."""
    return {
        "name": "scripted",
        "duration": duration,
        "system": {
            "kind": kind,
            "world_model": {"regions": [region(r) for r in regions], "clusters_per_region": 1},
            "tenant_list": [
                {"name": "hi", "priority": 1, "gpu_quota": 10_000, "cpu_quota": 10_000},
                {"name": "lo", "priority": 5, "gpu_quota": 10_000, "cpu_quota": 10_000},
            ],
            "workload_list": workloads,
            "table_list": tables
            if tables is not None
            else [
                {
                    "name": "t",
                    "size_bytes": 1,
                    "home_region": regions[0],
                    "replicas": list(regions[1:]),
                }
            ],
            "data_placement": "home-only",
            "scan_interval": "1m",
        },
        "invariants": {"enabled": list(CHECKERS)},  # a copy: callers add to it
    }


def preemption_story(
    *, kind: str = "mast", duration: str = "2h", extra: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """One region of 32 GPUs: L (priority 5) fills it; at 1 h H (priority 1) needs 16 of them."""
    return scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=3 * H)),
            *extra,
            workload("H", "hi", 60 * MIN, job(gpus=16)),
        ],
        regions=("east",),
        kind=kind,
        duration=duration,
    )


def pause(target: str, at: str, duration: str) -> dict[str, Any]:
    """A `pause` fault of `target` at `at` for `duration` (its state kept)."""
    return {"action": "pause", "at": at, "target": target, "duration": duration}


def crash(target: str, at: str, restart_after: str | None = None) -> dict[str, Any]:
    """A `crash` fault of `target` at `at`, restarted `restart_after` later if given."""
    fault: dict[str, Any] = {"action": "crash", "at": at, "target": target}
    if restart_after is not None:
        fault["restart_after"] = restart_after
    return fault
