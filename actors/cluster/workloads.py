"""Seeded synthetic workloads for single-cluster runs, after three papers' evaluations.

Each generator is a pure function of its params and the `random.Random` the
caller passes in (a named stream of `emulator.rng.RngStreams`), and returns
a tuple of `TraceJob` sorted by submit time. What is modelled:

- `philly_jobs` (Tiresias §5.1, Table 3, Appendices A–B): the 480-job
  testbed workload scaled down from Microsoft's Philly trace. GPU counts are
  drawn in the testbed's proportions (240 one-GPU jobs, then 40/80/90/25/5
  jobs of 2/4/8/16/32 GPUs); models uniformly from the ten models of Table 6
  (48 jobs each); Poisson arrivals, 30 s mean gap. Durations follow the
  trace's shape as far as the paper states it: Table 3 puts 63.5/12.5/16.5/
  7.5 % of jobs in the small-short/small-long/large-short/large-long bins,
  where (scaled down) "small" is at most 4 GPUs and "short" under 800 s,
  and run times span 2 min to 2 h. So a job is short with probability
  63.5/(63.5+12.5) if small and 16.5/(16.5+7.5) if large. Within its bin
  the duration follows one bounded Pareto law over [2 min, 2 h], density
  ∝ x^-(α+1), cut at the bin edge: the trace is heavy-tailed (Tiresias
  §5.4.3, citing the FB-queue survey [33]; Appendix A and Figure 19 — only
  a picture — show minutes to days). α = 0.76 is the one value that puts
  Table 3's 80% of jobs below 800 s on that range; with it the paper's
  other published numbers follow (see `PhillyParams.duration_tail_alpha`).
  α = 0 is log-uniform within each bin (this generator before: too much
  long work, so every policy queued and LAS fell far behind SRTF).
  `duration_scale` stretches every duration; 18 brings the 800 s bin edge
  back to the unscaled trace's 4 h.
- `gavel_jobs` (Shockwave §8.1, Table 2): Gavel's generator as Shockwave
  used it. 1/2/4/8 workers; a size class by total GPU-time, small/medium/
  large/xlarge = 0.2–8/8–16/16–72/>72 GPU-hours with probabilities 0.72/
  0.2/0.05/0.03, GPU-hours log-uniform within the class (the paper gives no
  upper bound for xlarge: 144 is ours), duration = GPU-hours / workers; a
  batch-size mode static/accordion/gns; models uniformly from Table 2.
  Poisson arrivals: the paper's "λ from 0.1 to 0.2" gives no unit; the
  published traces' generator takes the *mean gap in seconds* (5 and 10 s
  for its 900- and 460-job traces), i.e. 0.2 and 0.1 jobs per second, so
  `rate_per_s` is λ. The paper says jobs run 0.2–5 h yet also that xlarge
  jobs exceed 72 GPU-hours, more than 8 workers can do in 5 h: we follow
  the size classes, so long 1-GPU jobs exceed 5 h.
- `dally_jobs` (Dally §V-A, Table I): 500 jobs at t=0 (batch) or about 400
  Poisson arrivals, models uniformly from Table I's six. The SenseTime trace
  the paper sampled is not public and the paper gives neither its GPU
  demands, nor durations, nor the Poisson rate: the defaults below (Tiresias's
  GPU mix, log-uniform 5 min–4 h, one job a minute) are ours.

Arrivals (`Arrivals`) are a batch at t=0 or a Poisson process whose clock
starts at the first arrival (a job at t=0, as in both published traces),
given by two of: rate, job count, window.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Literal

import msgspec

from actors.policies.cluster.api import BatchMode, TraceJob
from emulator.units import US_PER_S

__all__ = [
    "DALLY_MODELS",
    "DALLY_POISSON",
    "GAVEL_MODELS",
    "MODES",
    "SIZE_CLASSES",
    "TIRESIAS_MODELS",
    "Arrivals",
    "DallyParams",
    "GavelParams",
    "PhillyParams",
    "arrival_times_us",
    "dally_jobs",
    "gavel_jobs",
    "gavel_size_class",
    "philly_jobs",
]

HOUR_S = 3600.0
# Put a limit on everything: no generator makes more jobs than this.
JOBS_MAX = 1_000_000

# Tiresias Table 6, keys lower-cased as in the Tiresias simulator's traces.
TIRESIAS_MODELS: tuple[str, ...] = (
    "vgg19",
    "vgg16",
    "vgg11",
    "alexnet",
    "resnet152",
    "resnet101",
    "resnet50",
    "inception4",
    "inception3",
    "googlenet",
)
# Shockwave Table 2 (the trace files call the LSTM "LM" and Recoder "Recommendation").
GAVEL_MODELS: tuple[str, ...] = ("resnet50", "resnet18", "lstm", "transformer", "recoder")
# Dally Table I.
DALLY_MODELS: tuple[str, ...] = (
    "vgg11",
    "alexnet",
    "mobilenetv3",
    "resnet18",
    "resnet50",
    "bertlarge",
)


class _Params(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the params here: frozen, keyword-only, unknown keys rejected."""


# ---- validation helpers ----------------------------------------------------------
# The sane range of every positive number here (rates, windows, durations, GPU-hours,
# scales): wide enough for any workload, narrow enough that a ratio or a product of
# two of them stays a finite float (a log-uniform draw between 1e-300 and 8 is not).
POSITIVE_MIN = 1e-6
POSITIVE_MAX = 1e9


def _positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and POSITIVE_MIN <= value <= POSITIVE_MAX):
        raise ValueError(
            f"{name} must be a number in [{POSITIVE_MIN:g}, {POSITIVE_MAX:g}], got {value!r}"
        )


def _check_mix(name: str, values: Sequence[int], weights: Sequence[float]) -> None:
    """`values[i]` is drawn with probability `weights[i] / sum(weights)`."""
    if not values:
        raise ValueError(f"{name}: need at least one value")
    if len(values) != len(weights):
        raise ValueError(f"{name}: {len(values)} values but {len(weights)} weights; they pair up")
    for i, w in enumerate(weights):
        if not (math.isfinite(w) and w >= 0):
            raise ValueError(f"{name} weights[{i}] must be finite and >= 0, got {w!r}")
    if not sum(weights) > 0:
        raise ValueError(f"{name} weights must not all be zero")


def _check_gpu_mix(prefix: str, counts: Sequence[int], weights: Sequence[float]) -> None:
    for i, g in enumerate(counts):
        if g < 1:
            raise ValueError(f"{prefix}.gpu_counts[{i}] must be >= 1, got {g}")
    if len(set(counts)) != len(counts):
        raise ValueError(f"{prefix}.gpu_counts must not repeat a count: {tuple(counts)}")
    _check_mix(f"{prefix}.gpu_counts/gpu_weights", counts, weights)


def _check_models(prefix: str, models: Sequence[str]) -> None:
    if not models:
        raise ValueError(f"{prefix}.models must name at least one model")
    for i, m in enumerate(models):
        if not m.strip():
            raise ValueError(f"{prefix}.models[{i}] must not be blank")


def _check_range(prefix: str, lo_name: str, lo: float, hi_name: str, hi: float) -> None:
    _positive(f"{prefix}.{lo_name}", lo)
    _positive(f"{prefix}.{hi_name}", hi)
    if not lo <= hi:
        raise ValueError(f"{prefix}.{lo_name} ({lo}) must be <= {prefix}.{hi_name} ({hi})")


# ---- arrivals ----------------------------------------------------------------------
class Arrivals(_Params):
    """When jobs are submitted: a batch at t=0, or a Poisson process.

    `batch` needs `num_jobs` only. `poisson` needs exactly two of
    `rate_per_s` (jobs per second), `num_jobs` and `window_s`:
    rate + count gives `num_jobs` arrivals with exponential gaps of mean
    1/rate; rate + window runs that process until `window_s` (the count is
    random); count + window puts the first job at 0 and the others uniformly
    in (0, window_s), which is the Poisson process conditioned on its count.
    In every case the first job arrives at t=0.
    """

    pattern: Literal["poisson", "batch"] = "poisson"
    rate_per_s: float | None = None
    num_jobs: int | None = None
    window_s: float | None = None

    def __post_init__(self) -> None:
        if self.num_jobs is not None and not 1 <= self.num_jobs <= JOBS_MAX:
            raise ValueError(f"arrivals.num_jobs must be in 1..{JOBS_MAX}, got {self.num_jobs}")
        if self.rate_per_s is not None:
            _positive("arrivals.rate_per_s", self.rate_per_s)
        if self.window_s is not None:
            _positive("arrivals.window_s", self.window_s)
        if self.pattern == "batch":
            if self.num_jobs is None:
                raise ValueError("arrivals.num_jobs is required for a batch")
            if self.rate_per_s is not None or self.window_s is not None:
                raise ValueError("arrivals: a batch takes num_jobs only, not rate_per_s/window_s")
            return
        given = [n for n in ("rate_per_s", "num_jobs", "window_s") if getattr(self, n) is not None]
        if len(given) != 2:
            raise ValueError(
                "arrivals: a Poisson process takes exactly two of rate_per_s, num_jobs, "
                f"window_s; got {', '.join(given) or 'none'}"
            )
        if self.num_jobs is None:
            assert self.rate_per_s is not None and self.window_s is not None
            expected = self.rate_per_s * self.window_s
            if expected > JOBS_MAX:
                raise ValueError(
                    f"arrivals.rate_per_s × window_s expects {expected:.0f} jobs, "
                    f"more than {JOBS_MAX}"
                )


def arrival_times_us(arrivals: Arrivals, rng: random.Random) -> tuple[int, ...]:
    """Submit times in µs, non-decreasing, the first at 0."""
    n, rate, window = arrivals.num_jobs, arrivals.rate_per_s, arrivals.window_s
    if arrivals.pattern == "batch":
        assert n is not None
        return (0,) * n
    times_s: list[float] = [0.0]
    if n is not None and window is not None:
        times_s += sorted(rng.uniform(0.0, window) for _ in range(n - 1))
    else:
        assert rate is not None
        t = 0.0
        while True:
            if n is not None and len(times_s) >= n:
                break
            t += rng.expovariate(rate)
            if window is not None and t >= window:
                break
            if len(times_s) >= JOBS_MAX:
                raise ValueError(f"arrivals: more than {JOBS_MAX} jobs in the window")
            times_s.append(t)
    # round() is monotone, so the µs times stay in order.
    return tuple(round(s * US_PER_S) for s in times_s)


# ---- draws -------------------------------------------------------------------------
def _pick(rng: random.Random, values: Sequence[int], weights: Sequence[float]) -> int:
    """One weighted draw with one `rng.random()` call (stable across Python versions)."""
    u = rng.random() * sum(weights)
    acc = 0.0
    for v, w in zip(values, weights, strict=True):
        acc += w
        if u < acc:
            return v
    # u landed on the total through rounding: the last value with weight.
    return next(v for v, w in zip(reversed(values), reversed(weights), strict=True) if w > 0)


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    """Uniform in log space on [lo, hi]: as many jobs per decade at every scale."""
    return lo * (hi / lo) ** rng.random()


def _bounded_pareto(rng: random.Random, lo: float, hi: float, alpha: float) -> float:
    """Density ∝ x^-(alpha+1) on [lo, hi], by inverting its CDF; alpha 0 is log-uniform.

    F(x) = (1 − (lo/x)^α) / (1 − (lo/hi)^α), so x = lo·(1 − u·(1 − (lo/hi)^α))^(−1/α).
    One `rng.random()` call, like `_log_uniform`, so the draws after it do not shift.
    """
    if alpha == 0:
        return _log_uniform(rng, lo, hi)
    u = rng.random()
    return lo * (1.0 - u * (1.0 - (lo / hi) ** alpha)) ** (-1.0 / alpha)


def _ids(prefix: str, n: int) -> list[str]:
    width = max(4, len(str(n - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(n)]


def _build(
    prefix: str,
    arrivals: Arrivals,
    rng: random.Random,
    draw: Callable[[random.Random], tuple[int, str, float, int, BatchMode]],
) -> tuple[TraceJob, ...]:
    """Arrivals first, then one `draw` per job (gpus, model, duration_s, iterations, mode)."""
    submits = arrival_times_us(arrivals, rng)
    jobs = []
    for job_id, submit_us in zip(_ids(prefix, len(submits)), submits, strict=True):
        gpus, model, duration_s, iterations, mode = draw(rng)
        jobs.append(
            TraceJob(
                job_id=job_id,
                submit_us=submit_us,
                gpus=gpus,
                model=model,
                duration_us=max(1, round(duration_s * US_PER_S)),
                iterations=iterations,
                mode=mode,
            )
        )
    return tuple(jobs)


# ---- Tiresias / Philly ----------------------------------------------------------------
class PhillyParams(_Params):
    """Tiresias's testbed workload (§5.1); see the module docstring."""

    arrivals: Arrivals = Arrivals(rate_per_s=1 / 30, num_jobs=480)
    gpu_counts: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    gpu_weights: tuple[float, ...] = (240, 40, 80, 90, 25, 5)  # jobs of each size, of 480
    models: tuple[str, ...] = TIRESIAS_MODELS
    # Table 3: % of jobs small-short, small-long, large-short, large-long.
    bin_weights: tuple[float, float, float, float] = (63.5, 12.5, 16.5, 7.5)
    small_gpus_max: int = 4
    short_s_max: float = 800.0
    duration_s_min: float = 120.0
    duration_s_max: float = 7200.0
    # The tail exponent α of the duration law (module docstring). Solving
    # F(800 s) = 0.80 (Table 3: SS + LS = 80% of jobs short) for a bounded
    # Pareto on [120 s, 7200 s] (§5.1: "2 mins to 2 hours") gives α = 0.763.
    # Checks against what the paper publishes of the testbed run (§5.2):
    # - median duration 281 s; Tiresias-L's median JCT is 27x shorter than
    #   YARN-CS's with median queueing delays of 13 s and 7464 s (Table 4),
    #   which puts the median duration near (7464 - 27·13) / 26 = 274 s;
    # - mean SS duration 287 s; Bin 1's average JCT under Tiresias-L is 300 s;
    # - mean duration 662 s; Tiresias-L's average JCT is 5.5x YARN-CS's
    #   (Fig. 10; 5.11x simulated, §5.3.1) with average queueing delays of
    #   963 s and 8146 s (Table 4): a mean of 630–790 s;
    # - 480 jobs × 4 GPUs on average × 662 s = 1.27M GPU-s, 21,200 s of the
    #   60 GPUs, under the 27,400–33,270 s makespans of §5.2.2.
    # α = 0 (log-uniform, this generator's law before) has a 392 s median,
    # a 358 s SS mean and a 952 s mean: 1.7x the work, makespans of 43–52k s.
    duration_tail_alpha: float = 0.76
    duration_scale: float = 1.0
    id_prefix: str = "philly-"

    def __post_init__(self) -> None:
        _check_gpu_mix("philly", self.gpu_counts, self.gpu_weights)
        _check_models("philly", self.models)
        for i, w in enumerate(self.bin_weights):
            if not (math.isfinite(w) and w >= 0):
                raise ValueError(f"philly.bin_weights[{i}] must be finite and >= 0, got {w!r}")
        ss, sl, ls, ll = self.bin_weights
        if not (ss + sl > 0 and ls + ll > 0):
            raise ValueError("philly.bin_weights: small (ss+sl) and large (ls+ll) must be > 0")
        if self.small_gpus_max < 1:
            raise ValueError(f"philly.small_gpus_max must be >= 1, got {self.small_gpus_max}")
        _check_range(
            "philly", "duration_s_min", self.duration_s_min, "short_s_max", self.short_s_max
        )
        _check_range(
            "philly", "short_s_max", self.short_s_max, "duration_s_max", self.duration_s_max
        )
        _positive("philly.duration_scale", self.duration_scale)
        alpha = self.duration_tail_alpha
        if not (math.isfinite(alpha) and 0 <= alpha <= 10):
            raise ValueError(f"philly.duration_tail_alpha must be in [0, 10], got {alpha!r}")


def philly_jobs(params: PhillyParams, rng: random.Random) -> tuple[TraceJob, ...]:
    """A Philly-like workload: see the module docstring."""
    p = params
    ss, sl, ls, ll = p.bin_weights
    short_if_small, short_if_large = ss / (ss + sl), ls / (ls + ll)

    def draw(r: random.Random) -> tuple[int, str, float, int, BatchMode]:
        gpus = _pick(r, p.gpu_counts, p.gpu_weights)
        short_p = short_if_small if gpus <= p.small_gpus_max else short_if_large
        alpha = p.duration_tail_alpha
        if r.random() < short_p:
            duration_s = _bounded_pareto(r, p.duration_s_min, p.short_s_max, alpha)
        else:
            duration_s = _bounded_pareto(r, p.short_s_max, p.duration_s_max, alpha)
        model = p.models[r.randrange(len(p.models))]
        return gpus, model, duration_s * p.duration_scale, 0, "static"

    return _build(p.id_prefix, p.arrivals, rng, draw)


# ---- Shockwave / Gavel ------------------------------------------------------------------
SIZE_CLASSES: tuple[str, ...] = ("small", "medium", "large", "xlarge")
MODES: tuple[BatchMode, ...] = ("static", "accordion", "gns")


class GavelParams(_Params):
    """Gavel's generator as Shockwave §8.1 used it; see the module docstring.

    `gpu_weights` (the paper gives none) and `mode_weights` default to the
    mixes named in the Shockwave artifact's reproduction traces; the default
    arrivals are its 460-job trace's (10 s mean gap, λ = 0.1/s).
    """

    arrivals: Arrivals = Arrivals(rate_per_s=0.1, num_jobs=460)
    gpu_counts: tuple[int, ...] = (1, 2, 4, 8)
    gpu_weights: tuple[float, ...] = (0.6, 0.3, 0.09, 0.01)
    class_weights: tuple[float, float, float, float] = (0.72, 0.2, 0.05, 0.03)
    # Class edges in GPU-hours: small is [b0, b1), medium [b1, b2), …, xlarge [b3, b4].
    class_gpu_hours: tuple[float, float, float, float, float] = (0.2, 8.0, 16.0, 72.0, 144.0)
    mode_weights: tuple[float, float, float] = (0.0, 0.5, 0.5)  # static, accordion, gns
    models: tuple[str, ...] = GAVEL_MODELS
    duration_scale: float = 1.0
    id_prefix: str = "gavel-"

    def __post_init__(self) -> None:
        _check_gpu_mix("gavel", self.gpu_counts, self.gpu_weights)
        _check_mix("gavel.class_weights", range(4), self.class_weights)
        _check_mix("gavel.mode_weights", range(3), self.mode_weights)
        edges = self.class_gpu_hours
        for i, e in enumerate(edges):
            _positive(f"gavel.class_gpu_hours[{i}]", e)
            if i and not edges[i - 1] < e:
                raise ValueError(
                    f"gavel.class_gpu_hours[{i}] must be > class_gpu_hours[{i - 1}] "
                    f"({edges[i - 1]}), got {e}"
                )
        _check_models("gavel", self.models)
        _positive("gavel.duration_scale", self.duration_scale)


_GAVEL_DEFAULTS = GavelParams()


def gavel_jobs(params: GavelParams, rng: random.Random) -> tuple[TraceJob, ...]:
    """A Gavel/Shockwave-like workload: see the module docstring."""
    p = params
    edges = p.class_gpu_hours

    def draw(r: random.Random) -> tuple[int, str, float, int, BatchMode]:
        gpus = _pick(r, p.gpu_counts, p.gpu_weights)
        k = _pick(r, range(4), p.class_weights)
        gpu_hours = _log_uniform(r, edges[k], edges[k + 1])
        mode = MODES[_pick(r, range(3), p.mode_weights)]
        model = p.models[r.randrange(len(p.models))]
        return gpus, model, gpu_hours * HOUR_S / gpus * p.duration_scale, 0, mode

    return _build(p.id_prefix, p.arrivals, rng, draw)


def gavel_size_class(job: TraceJob, params: GavelParams | None = None) -> str:
    """The size class of a job by its GPU-hours (for reports and tests)."""
    p = params or _GAVEL_DEFAULTS
    gpu_hours = job.gpus * job.duration_us / US_PER_S / HOUR_S / p.duration_scale
    for name, upper in zip(SIZE_CLASSES[:3], p.class_gpu_hours[1:4], strict=True):
        if gpu_hours < upper:
            return name
    return SIZE_CLASSES[3]


# ---- Dally ---------------------------------------------------------------------------
# Dally §V-A: "about 400" jobs for the Poisson runs; the rate is ours.
DALLY_POISSON = Arrivals(rate_per_s=1 / 60, num_jobs=400)


class DallyParams(_Params):
    """Dally's batch (500 jobs at t=0) or Poisson workload; see the module docstring.

    Each job also gets a compute time per iteration, log-uniform in
    [iteration_s_min, iteration_s_max] (ours), and `iterations` = duration
    over that time, the I_total-expected Dally's priority uses.
    """

    arrivals: Arrivals = Arrivals(pattern="batch", num_jobs=500)
    gpu_counts: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    gpu_weights: tuple[float, ...] = (240, 40, 80, 90, 25, 5)
    models: tuple[str, ...] = DALLY_MODELS
    duration_s_min: float = 300.0
    duration_s_max: float = 14_400.0
    iteration_s_min: float = 0.05
    iteration_s_max: float = 1.0
    duration_scale: float = 1.0
    id_prefix: str = "dally-"

    def __post_init__(self) -> None:
        _check_gpu_mix("dally", self.gpu_counts, self.gpu_weights)
        _check_models("dally", self.models)
        _check_range(
            "dally", "duration_s_min", self.duration_s_min, "duration_s_max", self.duration_s_max
        )
        _check_range(
            "dally",
            "iteration_s_min",
            self.iteration_s_min,
            "iteration_s_max",
            self.iteration_s_max,
        )
        _positive("dally.duration_scale", self.duration_scale)


def dally_jobs(params: DallyParams, rng: random.Random) -> tuple[TraceJob, ...]:
    """A Dally-like workload: see the module docstring."""
    p = params

    def draw(r: random.Random) -> tuple[int, str, float, int, BatchMode]:
        gpus = _pick(r, p.gpu_counts, p.gpu_weights)
        duration_s = _log_uniform(r, p.duration_s_min, p.duration_s_max) * p.duration_scale
        iteration_s = _log_uniform(r, p.iteration_s_min, p.iteration_s_max)
        model = p.models[r.randrange(len(p.models))]
        return gpus, model, duration_s, max(1, round(duration_s / iteration_s)), "static"

    return _build(p.id_prefix, p.arrivals, rng, draw)
