"""How many examples a property draws: the count its test names, scaled by `MASTEMU_EXAMPLES`.

The counts written in the tests are the default run's, sized so the fast
tier stays within its half minute on CI's two cores; a soak draws more of
every property at once (`MASTEMU_EXAMPLES=20 pytest tests/unit`).
"""

from __future__ import annotations

import os

import pytest

SCALE_BOUNDS = (0.1, 1000.0)


def scale() -> float:
    """`MASTEMU_EXAMPLES` as a number in its bounds (1 when unset)."""
    raw = os.environ.get("MASTEMU_EXAMPLES", "1")
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"MASTEMU_EXAMPLES={raw!r} is not a number") from None
    low, high = SCALE_BOUNDS
    if not low <= value <= high:
        raise pytest.UsageError(f"MASTEMU_EXAMPLES={raw!r} is not between {low:g} and {high:g}")
    return value


def examples(count: int) -> int:
    """`count` examples scaled for this session (at least one)."""
    return max(1, round(count * scale()))
