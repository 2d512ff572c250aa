"""Near ties: values a control plane's milliseconds can reorder rank as one.

A policy that orders jobs by a figure of their progress (Dally's Nw_sens,
Themis's ρ) sees, under control-plane latency, figures a few parts in 10⁵
apart for jobs whose figures are exactly equal in the reference engine (the
ms before an agent started count in one and not the other). Ordered
exactly, those ms pick which job is preempted, and the two machineries part.
Rounding to a grid would tie them but split values on either side of a grid
line, which the same ms move across: every value is near some line.
Instead values are chained: in ascending order, a value within `resolution`
of the one before it shares its rank, so only values that close together
tie, wherever they fall.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["near_tie_ranks"]


def near_tie_ranks(values: Mapping[str, float], resolution: float) -> dict[str, int]:
    """Each key's rank (0 = lowest value), values within `resolution` of the previous
    one in ascending order sharing its rank."""
    ranks: dict[str, int] = {}
    rank = 0
    last: float | None = None
    for key, value in sorted(values.items(), key=lambda kv: (kv[1], kv[0])):
        if last is not None and value - last > resolution:
            rank += 1
        ranks[key] = rank
        last = value
    return ranks
