"""The Gittins index as the Tiresias simulator computes it (`gittins = "tiresias-sim"`).

The paper's index (actors/policies/cluster/gittins.py) is, for a job with
attained service a and a quantum Δ, P(S − a ≤ Δ | S > a) over
E[min(S − a, Δ) | S > a]. The authors' simulator (run_sim.py,
`cal_r_gittins_index` and `get_gittins_index`) differs in three ways, which
this module reproduces so a run can be compared with its numbers:

1. The expected service averages the *full* service S of the jobs that
   finish within the quantum, not what is left of it (S − a), plus Δ for
   the others: e = (Σ_{a < s ≤ a+Δ} s·P(s) + Δ·P(S > a + Δ)) / P(S > a).
2. The index is tabulated once per support point: a job's attained service
   is snapped up to the first sample point s_k above it, and the index
   evaluated at s_k − 1 (GPU·s). It is therefore flat between sample
   points: with the smallest sample near 120 GPU·s, every job below it has
   the same, highest index, and an arrival (a = 0) outranks a job that ran
   longer. A job at or past the largest sample point has index 0.
3. When a + Δ passes the largest sample point less 1, the largest point is
   counted as not finishing within the quantum (the simulator's search
   stops one short), and the three numbers are rounded as it rounds them
   (P and e to 5 decimals, the index P·10⁶/e to 4), so ties fall where its
   ties fall.

Δ is fixed (the simulator's `gittins_delta`, which equals its first queue
limit); the Tiresias policy passes its first queue threshold.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

from actors.policies.cluster.gittins import ServiceDistribution

__all__ = ["PEER_DELTA_GPU_S", "SimGittinsTable"]

# The simulator's `gittins_delta` (GPU·s), used when a policy has no queue threshold.
PEER_DELTA_GPU_S = 3250.0
# The simulator snaps attained service to a sample point less this (GPU·s).
_SNAP_GPU_S = 1.0


class SimGittinsTable:
    """The simulator's Gittins index at each support point, for one distribution and Δ.

    Build once per decision (or keep while the distribution does not
    change): it holds no state beyond its inputs.
    """

    __slots__ = ("_delta", "_mass", "_ranks", "_total", "_values", "_weighted")

    def __init__(self, dist: ServiceDistribution, delta: float) -> None:
        if not delta > 0:
            raise ValueError(f"gittins quantum must be > 0, got {delta}")
        self._values = dist.values
        self._delta = delta
        # _mass[i] = P(S < values[i]); _weighted[i] = Σ_{j < i} values[j]·P(values[j]).
        self._mass = (0.0, *accumulate(dist.probs))
        pairs = zip(dist.values, dist.probs, strict=True)
        self._weighted = (0.0, *accumulate(v * p for v, p in pairs))
        self._total = self._mass[-1]
        self._ranks = tuple(self._rank(v - _SNAP_GPU_S) for v in self._values)

    def _rank(self, attained: float) -> float:
        """The simulator's `cal_r_gittins_index` at `attained` (GPU·s)."""
        values, last = self._values, self._values[-1] - _SNAP_GPU_S
        if attained > last:
            return 0.0
        first = bisect_right(values, attained)
        reach = attained + self._delta
        # Past the last sample point less 1 the simulator stops one short.
        end = len(values) - 1 if reach > last else bisect_right(values, reach)
        survivors = self._total - self._mass[first]
        done = self._mass[end] - self._mass[first]
        used = (self._weighted[end] - self._weighted[first]) + self._delta * (
            self._total - self._mass[end]
        )
        p = round(done / survivors, 5)
        e = round(used / survivors, 5)
        return round(p * 1_000_000 / e, 4) if e > 0 else 0.0

    def index(self, attained: float, slack: float = 0.0) -> float:
        """The index at `attained` GPU·s: its snapped support point's; 0 past the last point.

        Support points at most `slack` above `attained` count as passed.
        """
        k = bisect_right(self._values, attained + slack)
        return self._ranks[k] if k < len(self._values) else 0.0
