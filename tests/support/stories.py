"""Scripted stories that several test files tell, built with `tests.support.dsl`.

- The lake: `east` and `west` have A100 machines; `lake` has only CPU
  machines and storage, and is the home of the 10 TB table `big`. A GPU
  workload reading `big` can run nowhere until the migration service copies
  the data to an A100 region.
- The preempted gang: a gang whose preprocess job is preempted must stop
  its trainer too and go back to the queue.
"""

from __future__ import annotations

from typing import Any

from emulator.units import MIN, H
from tests.support.dsl import job, region, scenario, workload

TB = 10**12
BIG_BYTES = 10 * TB  # the size of the lake's table `big`


def lake_story(*, duration: str = "4h", migration: dict[str, Any] | None = None) -> dict[str, Any]:
    """W (8 GPUs, an hour of work) reads `big`, whose only copy is in `lake`."""
    raw = scenario(
        [workload("W", "hi", 0, job(gpus=8, work=H, tables=("big",)))],
        regions=("east", "west"),
        tables=[{"name": "big", "size_bytes": BIG_BYTES, "home_region": "lake"}],
        duration=duration,
    )
    lake = {**region("lake"), "gpu_machines": {}}
    raw["system"]["world_model"]["regions"].append(lake)
    raw["system"]["migration"] = {"enabled": True, **(migration or {})}
    raw["invariants"]["enabled"].append("storage")
    return raw


def preempted_gang(kind: str) -> dict[str, Any]:
    """L's trainer has an hour of work; its preprocess job holds every CPU
    machine of the region until H (priority 1) needs two of them at 10 min
    and preempts it, which must stop L's trainer too."""
    return scenario(
        [
            workload("L", "lo", 0, job(gpus=8), job("prep", cpus=4, work=5 * H)),
            workload("H", "hi", 10 * MIN, job("prep", cpus=2, work=20 * MIN)),
        ],
        regions=("east",),
        kind=kind,
        duration="2h",
    )
