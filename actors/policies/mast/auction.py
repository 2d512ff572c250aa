"""MAST's own policies: late binding by an auction over every region.

`mast` is the fast path as the paper describes it (§3.2, §3.3): every
queued workload is auctioned to every region's RMS, which bids the P_score
of its best plan. `tetris-v0`, `tetris-v1` and `tetris-v2` are the same fast
path with the slow path on: Tetris at that version plans the data placement
daily (§5.6 compares the versions).
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors.policies.mast.api import MastDefaults
from actors.policies.mast.migration import MigrationSettings
from actors.policies.mast.tetris.settings import TetrisSettings


class MastAuction(MastDefaults):
    """Late binding: an auction over every region, P_score placement in each."""

    name = "mast"


class MastWithTetris(MastDefaults):
    """MAST with the slow path's Tetris at one version (and the migration service)."""

    def __init__(self, version: str) -> None:
        self.name = version

    def slow_path(
        self, tetris: TetrisSettings, migration: MigrationSettings, params: Any
    ) -> tuple[TetrisSettings, MigrationSettings]:
        del params
        version = msgspec.structs.replace(tetris.policy, version=self.name)
        # The system adds the migration service, which Tetris orders its copies from.
        return msgspec.structs.replace(tetris, enabled=True, policy=version), migration
