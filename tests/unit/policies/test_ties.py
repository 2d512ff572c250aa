"""`near_tie_ranks`: values within the resolution of their neighbour rank as one."""

from __future__ import annotations

import pytest

from actors.policies.cluster.ties import near_tie_ranks

CASES = [
    # (name, values, resolution, ranks)
    ("exact: only equal values tie", {"a": 1.0, "b": 1.0, "c": 2.0}, 0.0, {"a": 0, "b": 0, "c": 1}),
    ("within the resolution", {"a": 1.0, "b": 1.00003, "c": 1.5}, 1e-4, {"a": 0, "b": 0, "c": 1}),
    ("just beyond it", {"a": 1.0, "b": 1.0002}, 1e-4, {"a": 0, "b": 1}),
    # A grid of 1e-4 would split 1.00004 and 1.00006 (either side of 1.00005).
    ("no grid line splits neighbours", {"a": 1.00004, "b": 1.00006}, 1e-4, {"a": 0, "b": 0}),
    ("a chain ties its ends", {"a": 0.0, "b": 0.8e-4, "c": 1.6e-4}, 1e-4, {"a": 0, "b": 0, "c": 0}),
    (
        "order of the mapping does not matter",
        {"z": 3.0, "y": 1.0, "x": 2.0},
        0.5,
        {"y": 0, "x": 1, "z": 2},
    ),
    ("empty", {}, 1e-3, {}),
]


@pytest.mark.parametrize(
    ("values", "resolution", "ranks"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_near_tie_ranks(values: dict[str, float], resolution: float, ranks: dict[str, int]) -> None:
    assert near_tie_ranks(values, resolution) == ranks
