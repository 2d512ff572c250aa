"""`[system.tetris]`: when Tetris runs, its policy knobs, and the warehouse it works on.

Value types only: the Tetris actor (`actors.mast.tetris`) runs with these
settings, the warehouse model (`actors.mast.warehouse.build_warehouse`)
takes `WarehouseParams`, and a MAST policy's `slow_path` may rewrite them
(the `tetris-v*` policies turn Tetris on at their version).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from actors.policies.mast.tetris.cost import TetrisParams
from emulator.units import US_PER_S, Duration, at_least

__all__ = ["TetrisSettings", "WarehouseParams"]

DAY_S = 86_400.0

Count = Annotated[int, Meta(ge=1, le=1_000_000)]
Probability = Annotated[float, Meta(ge=0.0, le=1.0)]
Sigma = Annotated[float, Meta(ge=0.0, le=10.0)]


class WarehouseParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Knobs of `build_warehouse` (`actors.mast.warehouse`); defaults suit the emulator's scale.

    MAST has hundreds of namespaces for millions of tables; our worlds have
    thousands of tables, so the default 20 tables per namespace gives tens to
    hundreds of namespaces. Sizes are bytes, rates bytes/s, CPU in CPU-hours.
    """

    tables_per_namespace: Count = 20
    namespaces_max: Count = 1_000
    namespace_size_sigma: Sigma = 1.0
    partitions_per_table_min: Count = 1
    partitions_per_table_max: Count = 90  # a quarter of daily partitions
    partition_size_sigma: Sigma = 0.3
    partitions_max: Count = 1_000_000  # over all tables
    readers_per_extra_replica: Count = 15
    extra_replicas_max: Annotated[int, Meta(ge=0, le=256)] = 4
    copying_share: Probability = 0.05
    lag_base_s: Annotated[float, Meta(ge=0.0, le=30 * DAY_S)] = 7_200.0
    refresh_bytes_s: Annotated[float, Meta(gt=0.0, le=1e13)] = 750e6
    analytics_only_share: Annotated[float, Meta(ge=0.0, le=10.0)] = 0.25
    tables_per_app: Count = 10
    apps_max: Count = 10_000
    jobs_per_app_min: Count = 2
    jobs_per_app_max: Count = 8
    tables_per_analytics_job_max: Annotated[int, Meta(ge=1, le=64)] = 4
    analytics_ml_share: Probability = 0.8
    cpu_hours_median: Annotated[float, Meta(gt=0.0, le=1e7)] = 50.0
    cpu_hours_sigma: Sigma = 1.5
    cpu_hours_max: Annotated[float, Meta(gt=0.0, le=1e9)] = 100_000.0
    cpu_capacity_headroom: Annotated[float, Meta(ge=1.0, le=100.0)] = 1.25
    # Period of a recurring template seen only once in the input.
    recurring_period_s: Annotated[float, Meta(ge=60.0, le=365 * DAY_S)] = DAY_S
    # Days of past first-time workloads in the access history (module docstring).
    history_days: Annotated[float, Meta(ge=0.0, le=30.0)] = 7.0
    # Limits on the history's draw: past workloads in all, tries per table drawn.
    history_workloads_max: Count = 200_000
    history_tries_per_table: Count = 16

    def __post_init__(self) -> None:
        for key in ("partitions_per_table", "jobs_per_app"):
            if getattr(self, f"{key}_min") > getattr(self, f"{key}_max"):
                raise ValueError(f"warehouse.{key}_min must be <= warehouse.{key}_max")


class TetrisSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[system.tetris]`: Tetris's schedule, its policy knobs and the warehouse model."""

    enabled: bool = False
    interval: at_least(60 * US_PER_S) = 86_400 * US_PER_S
    first_pass: Duration = 600 * US_PER_S
    policy: TetrisParams = TetrisParams()
    warehouse: WarehouseParams = WarehouseParams()
