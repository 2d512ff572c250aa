"""Where the test suite finds its data and the project's built-in scenarios."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SCENARIOS = ROOT / "scenarios"
