"""What the `mastemu` fixture gives a test (kept apart from the plugin: no pytest import)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulator.testing.runs import Run, run_scenario


class MastemuFixture:
    """What the `mastemu` fixture gives a test: `run`, and the runs it made."""

    def __init__(self, folder: Path, seed: int | None) -> None:
        self.folder = folder
        self.seed = seed
        self.runs: list[Run] = []

    def run(
        self,
        scenario: Any,
        seed: int | None = None,
        until: int | str | None = None,
        **overrides: Any,
    ) -> Run:
        chosen = seed if seed is not None else self.seed
        run = run_scenario(
            scenario, seed=chosen, until=until, out_dir=self.folder, overrides=overrides
        )
        self.runs.append(run)
        return run
