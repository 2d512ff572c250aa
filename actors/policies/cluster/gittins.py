"""The Gittins index of a job over a discrete distribution of job services (Tiresias §3.2.2).

A job that has attained service `a` and is served for up to `Δ` more
finishes within the quantum with probability P(S − a ≤ Δ | S > a) and uses
E[min(S − a, Δ) | S > a] of service in expectation; their ratio is the
completion rate the quantum buys. The Gittins index is the best such rate
over all quanta, G(a) = sup_Δ ratio(a, Δ): the higher, the likelier the job
is nearly done, the sooner it should run. Service is whatever unit the
caller uses (Tiresias: GPU-seconds, its 2D attained service).

The distribution is discrete: `values` (distinct, ascending, > 0) with
`probs` (summing to 1), given directly or built from a sample of finished
jobs' services. Between two support points the completion probability is
flat while the expected use grows with Δ, so the supremum is reached at a
support point `s − a` (or at a cap on Δ): `gittins_index` only looks there.
A job that has outlived every support point has index 0 (nothing is known
about it; Tiresias's simulator does the same).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate

import msgspec

__all__ = [
    "ServiceDistribution",
    "ServiceTable",
    "distribution",
    "from_sample",
    "gittins_index",
    "gittins_ratio",
]

# Probabilities that sum to 1 within this are accepted (floating sums of 1/3s).
_PROB_SUM_TOLERANCE = 1e-9


class ServiceDistribution(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A discrete distribution of job service: P(S = values[i]) = probs[i]."""

    values: tuple[float, ...]
    probs: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("gittins.values must not be empty")
        if len(self.values) != len(self.probs):
            raise ValueError(
                f"gittins.probs has {len(self.probs)} entries for {len(self.values)} values"
            )
        for i, v in enumerate(self.values):
            if not v > 0:
                raise ValueError(f"gittins.values[{i}] must be > 0, got {v}")
            if i and v <= self.values[i - 1]:
                raise ValueError(
                    f"gittins.values[{i}] must be > values[{i - 1}] (sorted, distinct)"
                )
        for i, p in enumerate(self.probs):
            if not p > 0:
                raise ValueError(f"gittins.probs[{i}] must be > 0, got {p}")
        if abs(sum(self.probs) - 1.0) > _PROB_SUM_TOLERANCE:
            raise ValueError(f"gittins.probs must sum to 1, got {sum(self.probs)}")


def distribution(
    values: Sequence[float], probs: Sequence[float] | None = None
) -> ServiceDistribution:
    """A distribution from services and their weights (None: equal weights, i.e. a sample).

    Weights are normalised and repeated values merged, so any positive
    weights will do.
    """
    weights = [1.0] * len(values) if probs is None else list(probs)
    if len(weights) != len(values):
        raise ValueError(f"gittins.probs has {len(weights)} entries for {len(values)} values")
    for i, w in enumerate(weights):
        if not w > 0:
            raise ValueError(f"gittins.probs[{i}] must be > 0, got {w}")
    merged: dict[float, float] = {}
    for v, w in zip(values, weights, strict=True):
        merged[float(v)] = merged.get(float(v), 0.0) + w
    total = sum(merged.values())
    ordered = sorted(merged)
    return ServiceDistribution(
        values=tuple(ordered), probs=tuple(merged[v] / total for v in ordered)
    )


def from_sample(services: Iterable[float]) -> ServiceDistribution:
    """The empirical distribution of a sample of finished jobs' services."""
    return distribution(list(services))


class ServiceTable:
    """Prefix sums over a distribution, so each ratio costs one binary search.

    Build one per scheduling decision and query it for every job; it holds
    no state beyond the distribution it was built from.
    """

    __slots__ = ("_mass", "_total", "_values", "_weighted")

    def __init__(self, dist: ServiceDistribution) -> None:
        self._values = dist.values
        # _mass[i] = P(S <= values[i-1]); _weighted[i] = E[S; S <= values[i-1]].
        self._mass = (0.0, *accumulate(dist.probs))
        pairs = zip(dist.values, dist.probs, strict=True)
        self._weighted = (0.0, *accumulate(v * p for v, p in pairs))
        self._total = self._mass[-1]

    def _ratio_upto(self, a: float, first: int, last: int, quantum: float) -> float:
        """Ratio when the jobs of support points first..last-1 finish within `quantum`."""
        done = self._mass[last] - self._mass[first]
        # Unnormalised E[min(S − a, Δ); S > a]: the finishers use S − a, the rest Δ.
        used = (self._weighted[last] - self._weighted[first]) - a * done
        used += quantum * (self._total - self._mass[last])
        return done / used

    def ratio(self, attained: float, quantum: float, slack: float = 0.0) -> float:
        """P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a]; 0 once a job outlived the support.

        Support points at most `slack` above `a` count as outlived too.
        """
        if not quantum > 0:
            raise ValueError(f"gittins quantum must be > 0, got {quantum}")
        first = bisect_right(self._values, attained + slack)
        if first == len(self._values):
            return 0.0
        return self._ratio_upto(
            attained, first, bisect_right(self._values, attained + quantum), quantum
        )

    def index(self, attained: float, quantum_max: float | None = None) -> float:
        """sup over 0 < Δ ≤ quantum_max (None: unbounded) of `ratio(attained, Δ)`."""
        if quantum_max is not None and not quantum_max > 0:
            raise ValueError(f"gittins quantum_max must be > 0, got {quantum_max}")
        first = bisect_right(self._values, attained)
        best = 0.0
        for j in range(first, len(self._values)):
            quantum = self._values[j] - attained
            if quantum_max is not None and quantum > quantum_max:
                # The cap itself lies between two support points: one last candidate.
                best = max(best, self.ratio(attained, quantum_max))
                break
            # Evaluated by index, not by a + Δ, so rounding cannot drop values[j].
            best = max(best, self._ratio_upto(attained, first, j + 1, quantum))
        return best


def gittins_ratio(dist: ServiceDistribution, attained: float, quantum: float) -> float:
    """Completion probability over expected service for one quantum `quantum` (see module doc)."""
    return ServiceTable(dist).ratio(attained, quantum)


def gittins_index(
    dist: ServiceDistribution, attained: float, quantum_max: float | None = None
) -> float:
    """The Gittins index G(a) = sup_Δ ratio(a, Δ), Δ capped at `quantum_max` if given."""
    return ServiceTable(dist).index(attained, quantum_max)
