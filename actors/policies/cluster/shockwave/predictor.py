"""Shockwave's Bayesian predictor of a job's batch-size regimes (Shockwave §5).

A *regime* is a stretch of training at one batch size; a job's *trajectory*
is its sequence of regimes. The scaling rule fixes which batch size comes
next (GNS only doubles; Accordion alternates between a small and a large
size), so the only unknown is how long each regime lasts. Shockwave puts a
Dirichlet prior over the K regimes' shares of the job's N epochs,
Dir(N/K, …, N/K), and updates it with its *restatement rule*: when regime k
ends after m_k epochs, the parameters of the finished regimes become their
observed lengths m_1..m_k, and the ongoing and future regimes evenly split
what is left, S_k = (N − Σ m_i) / (K − k). The scheduler plans with the
posterior mean, a single trajectory per job (§5, "computational
tractability"); since the parameters always sum to N, the mean length of
regime i is exactly its parameter.

Everything here is a pure function over a small frozen `RegimeBelief`.
Throughput per batch size comes from the performance model's profile
(`perf_model.GAIN_PER_DOUBLING`): Shockwave, like Gavel, profiles each
job's throughput per configuration, which is what the scheduler may know;
what it may not know is *when* the regimes change.
"""

from __future__ import annotations

import math

import msgspec

from actors.policies.cluster import perf_model
from actors.policies.cluster.api import BatchMode

__all__ = [
    "RegimeBelief",
    "Segment",
    "exclusive_s",
    "expected_lengths",
    "history",
    "observe",
    "prior",
    "progress_after",
    "restate",
    "throughput",
    "trajectory",
]

# A regime longer than the job's remaining epochs by float noise must not
# leave a zero or negative Dirichlet parameter.
_ALPHA_MIN = 1e-9


class RegimeBelief(msgspec.Struct, frozen=True, kw_only=True):
    """The posterior over one job's regime lengths, in epochs.

    `alphas` are the Dirichlet parameters, one per potential regime (they sum
    to `epochs`); `done` regimes have finished, the one at index `done` is
    ongoing and began at epoch `regime_start`. `scales` is the batch size of
    every regime seen so far over the initial one (the last is the current);
    `large_scale` is Accordion's large batch over its small one, as the user
    configured it (replaced by the observed ratio once seen).
    """

    mode: BatchMode
    epochs: float
    alphas: tuple[float, ...]
    done: int = 0
    regime_start: float = 0.0
    scales: tuple[int, ...] = (1,)
    large_scale: int = 4


class Segment(msgspec.Struct, frozen=True, kw_only=True):
    """A predicted stretch [start, end) of progress (fractions of the job) at one batch scale."""

    start: float
    end: float
    scale: int


def throughput(scale: int) -> float:
    """Progress speed at `scale` × the initial batch size, relative to the initial one."""
    return perf_model.GAIN_PER_DOUBLING ** math.log2(max(1, scale))


def prior(
    mode: BatchMode, epochs: float, regimes_max: int, large_scale: int = 4, scale: int = 1
) -> RegimeBelief:
    """Dir(N/K, …, N/K) over K = `regimes_max` regimes of N = `epochs` epochs, now at `scale`."""
    if epochs <= 0:
        raise ValueError(f"shockwave predictor: epochs must be > 0, got {epochs}")
    if regimes_max < 1:
        raise ValueError(f"shockwave predictor: regimes_max must be >= 1, got {regimes_max}")
    k = 1 if mode == "static" else regimes_max
    return RegimeBelief(
        mode=mode, epochs=epochs, alphas=(epochs / k,) * k, scales=(scale,), large_scale=large_scale
    )


def restate(belief: RegimeBelief, at_epoch: float, new_scale: int) -> RegimeBelief:
    """The restatement rule: the ongoing regime ended at `at_epoch`; the next runs at `new_scale`.

    Finished regimes get their observed lengths; the remaining epochs are
    split evenly over the regimes still to come. A change beyond the K-th
    regime (more changes than the user declared) adds one regime holding
    whatever is left, so the parameters keep summing to N.
    """
    observed = (*belief.alphas[: belief.done], max(_ALPHA_MIN, at_epoch - belief.regime_start))
    k = len(observed)
    left = max(_ALPHA_MIN, belief.epochs - sum(observed))
    future = max(1, len(belief.alphas) - k)
    alphas = observed + (left / future,) * future
    large = belief.large_scale
    if belief.mode == "accordion" and new_scale > min(belief.scales):
        large = max(1, new_scale // max(1, min(belief.scales)))
    return msgspec.structs.replace(
        belief,
        alphas=alphas,
        done=k,
        regime_start=at_epoch,
        scales=(*belief.scales, new_scale),
        large_scale=large,
    )


def observe(belief: RegimeBelief, progress: float, scale: int) -> tuple[RegimeBelief, bool]:
    """Fold in one observation (progress fraction, current batch scale); True if a regime ended.

    The scheduler sees a job at its decisions only, so a change is dated at
    the first decision that shows it (at most a round late); a regime that
    began and ended between two decisions is not seen at all.
    """
    if scale == belief.scales[-1]:
        return belief, False
    return restate(belief, progress * belief.epochs, scale), True


def expected_lengths(belief: RegimeBelief) -> tuple[float, ...]:
    """The posterior mean length of every regime in epochs: N · α_i / Σα (= α_i here)."""
    total = sum(belief.alphas)
    return tuple(belief.epochs * a / total for a in belief.alphas)


def _future_scale(belief: RegimeBelief, steps_ahead: int) -> int:
    current = belief.scales[-1]
    if belief.mode == "gns":  # GNS only doubles the batch size
        return current * 2**steps_ahead
    if belief.mode == "accordion" and steps_ahead % 2:  # Accordion alternates small/large
        small = min(belief.scales)
        return small * belief.large_scale if current == small else small
    return current


def trajectory(belief: RegimeBelief, progress: float) -> tuple[Segment, ...]:
    """The posterior-mean trajectory from `progress` (fraction) to the end of the job.

    The ongoing regime ends at its mean end, or now if it has already
    outlived it (then the regimes to come share the rest in proportion to
    their parameters): the predicted path never goes back in time.
    """
    n = belief.epochs
    now = min(n, max(0.0, progress * n))
    lengths = expected_lengths(belief)
    current = belief.done
    if current >= len(lengths) - 1:
        return (Segment(start=now / n, end=1.0, scale=belief.scales[-1]),) if now < n else ()
    end = max(now, belief.regime_start + lengths[current])
    rest = lengths[current + 1 :]
    squeeze = (n - end) / sum(rest) if sum(rest) > 0 else 0.0
    out = []
    if end > now:
        out.append(Segment(start=now / n, end=end / n, scale=belief.scales[-1]))
    at = end
    for i, length in enumerate(rest, start=1):
        nxt = min(n, at + length * squeeze)
        if nxt > at:
            out.append(Segment(start=at / n, end=nxt / n, scale=_future_scale(belief, i)))
        at = nxt
    return tuple(out)


def history(belief: RegimeBelief, progress: float) -> tuple[Segment, ...]:
    """The regimes as observed from the start of the job up to `progress` (fraction)."""
    n, at, out = belief.epochs, 0.0, []
    for length, scale in zip(belief.alphas[: belief.done], belief.scales, strict=False):
        out.append(Segment(start=at / n, end=(at + length) / n, scale=scale))
        at += length
    if progress * n > at:
        out.append(Segment(start=at / n, end=progress, scale=belief.scales[-1]))
    return tuple(out)


def exclusive_s(segments: tuple[Segment, ...], duration_s: float) -> float:
    """Run time alone, consolidated, of `segments` for a job taking `duration_s` at scale 1."""
    return sum((s.end - s.start) * duration_s / throughput(s.scale) for s in segments)


def progress_after(segments: tuple[Segment, ...], duration_s: float, service_s: float) -> float:
    """The progress fraction reached after `service_s` of exclusive running along `segments`."""
    if not segments:
        return 1.0
    at, left = segments[0].start, service_s
    for s in segments:
        need = (s.end - s.start) * duration_s / throughput(s.scale)
        if left < need:
            return at + left * throughput(s.scale) / duration_s
        left -= need
        at = s.end
    return 1.0
