"""How fast a training job runs where it is placed: the performance model of the cluster policies.

Pure tables and functions, no state. Four things are modelled:

- **Communication slowdown by placement tier.** Dally's Table I gives, per
  model, communication time as a fraction of compute time for an 8-GPU job
  inside one machine, one rack, or across racks. A trace's `duration_us` is
  the run time on a consolidated placement (one machine), so machine-level
  communication is already in it: `slowdown = (1 + c_tier) / (1 + c_machine)`,
  exactly 1.0 at tier `machine` and for a 1-GPU job (nothing to exchange).
  For other gang sizes the fractions scale with ring all-reduce traffic per
  GPU, 2(n-1)/n of the model, relative to the measured n = 8 (our
  assumption: Table I only has 8-GPU runs).
- **Tensor skew** (largest tensor / model size), Tiresias Table 6, which
  Tiresias compares with PACKLIMIT to decide whether to consolidate.
- **Checkpoint and restore cost**, of the order of Tiresias Figs. 4–5 (see
  `checkpoint_s` / `restore_s`).
- **Batch-size regimes** of Shockwave's job modes (`static`, `accordion`,
  `gns`) as a pure function of the job's progress (see `regime_at`).

Model names from both tables are merged; lookups ignore case and any
non-alphanumeric character ("ResNet-50", "resnet_50" and "ResNet50" agree).
An unknown model gets `DEFAULT_PROFILE`.
"""

from __future__ import annotations

import functools
import math
import re

import msgspec

from actors.policies.cluster.api import Regime, Schedule, Tier

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "ModelProfile",
    "Regime",
    "base_batch_size",
    "checkpoint_s",
    "comm_fraction",
    "exclusive_factor",
    "profile",
    "regime_at",
    "regimes",
    "restore_s",
    "skew",
    "slowdown",
]


class ModelProfile(msgspec.Struct, frozen=True, kw_only=True):
    """Per-model constants: communication/compute at 8 GPUs per tier, skew, checkpoint size.

    `comm_*` are fractions (Dally Table I's percentages / 100); `skew` is the
    largest tensor over the model size; `size_mb` is the checkpoint size.
    `source` says where each number came from.
    """

    comm_machine: float
    comm_rack: float
    comm_network: float
    skew: float
    size_mb: float
    source: str


def _p(tiers: tuple[float, float, float], skew_: float, size_mb: float, src: str) -> ModelProfile:
    m, r, n = tiers
    return ModelProfile(
        comm_machine=m / 100,
        comm_rack=r / 100,
        comm_network=n / 100,
        skew=skew_,
        size_mb=size_mb,
        source=src,
    )


# Dally Table I rows (% of compute time at machine / rack / network tier).
_VGG11 = (1.0, 6.0, 7.0)
_ALEXNET = (2.0, 13.0, 100.0)
_MOBILENETV3 = (42.0, 940.0, 19592.0)
_RESNET18 = (7.0, 116.0, 2749.0)
_RESNET50 = (12.0, 12.0, 38.0)
_BERT_LARGE = (8.0, 23.0, 715.0)

_T1 = "Dally Table I"
_T6 = "Tiresias Table 6"
# Skew and size of the three Dally-only models are ours, computed from their
# published architectures (largest weight tensor / all parameters, fp32):
# ResNet-18 layer4 3x3x512x512 conv 2.36M of 11.69M; MobileNetV3-large
# classifier 1280x1000 of 5.48M; BERT-large word embeddings 30522x1024 of 335M.
_ARCH = "skew and size computed from the published architecture"
PROFILES: dict[str, ModelProfile] = {
    "vgg11": _p(_VGG11, 0.773, 506.8, f"{_T1}; {_T6}"),
    "vgg16": _p(_VGG11, 0.743, 527.8, f"{_T6}; comm from VGG11 (same largest tensor)"),
    "vgg19": _p(_VGG11, 0.715, 548.1, f"{_T6}; comm from VGG11 (same largest tensor)"),
    "alexnet": _p(_ALEXNET, 0.610, 235.9, f"{_T1}; {_T6}"),
    "mobilenetv3": _p(_MOBILENETV3, 0.233, 21.9, f"{_T1}; {_ARCH}"),
    "resnet18": _p(_RESNET18, 0.202, 46.8, f"{_T1}; {_ARCH}"),
    "resnet50": _p(_RESNET50, 0.092, 97.7, f"{_T1}; {_T6}"),
    "resnet101": _p(_RESNET50, 0.053, 170.4, f"{_T6}; comm from ResNet-50"),
    "resnet152": _p(_RESNET50, 0.039, 230.2, f"{_T6}; comm from ResNet-50"),
    # Tiresias Fig. 3 finds the Inception family placement-insensitive like
    # the ResNets, so they borrow ResNet-50's low-skew communication row.
    "inception3": _p(_RESNET50, 0.086, 91.0, f"{_T6}; comm from ResNet-50"),
    "inception4": _p(_RESNET50, 0.036, 162.9, f"{_T6}; comm from ResNet-50"),
    "googlenet": _p(_RESNET50, 0.146, 26.7, f"{_T6}; comm from ResNet-50"),
    "bertlarge": _p(_BERT_LARGE, 0.093, 1340.6, f"{_T1}; {_ARCH}"),
}
_ALIASES = {
    "inceptionv3": "inception3",
    "inceptionv4": "inception4",
    "bert": "bertlarge",
    "mobilenet": "mobilenetv3",
    "mobilenetv3large": "mobilenetv3",
}

# Unknown model: the per-tier median of Dally Table I's six rows, the median
# skew (11.9%) and median size (200.3 MB) of Tiresias Table 6 — a model in the
# middle of both tables, neither the most nor the least sensitive.
DEFAULT_PROFILE = _p((7.5, 18.0, 407.5), 0.119, 200.3, "median of Dally Table I / Tiresias Table 6")

_NON_ALNUM = re.compile(r"[^a-z0-9]")


def profile(model: str) -> ModelProfile:
    """The profile of `model` (normalised name), or DEFAULT_PROFILE if the tables lack it."""
    key = _NON_ALNUM.sub("", model.lower())
    return PROFILES.get(_ALIASES.get(key, key), DEFAULT_PROFILE)


def skew(model: str) -> float:
    """Largest tensor over model size (Tiresias's S_J), a fraction in 0..1."""
    return profile(model).skew


def comm_fraction(model: str, tier: Tier, gpus: int) -> float:
    """Communication time over compute time for a gang of `gpus` at `tier`.

    Table I's 8-GPU value scaled by ring all-reduce traffic per GPU,
    (n-1)/n relative to 7/8; 0 for a single GPU.
    """
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    if gpus == 1:
        return 0.0
    p = profile(model)
    at8 = {"machine": p.comm_machine, "rack": p.comm_rack, "network": p.comm_network}[tier]
    return at8 * ((gpus - 1) / gpus) / (7 / 8)


def slowdown(model: str, tier: Tier, gpus: int) -> float:
    """Iteration time at `tier` over iteration time on one machine (>= 1.0).

    1.0 for tier `machine` (the trace duration already includes it) and for
    one GPU. A gang wider than one machine never reaches 1.0: it pays at
    least the rack tier, as in Dally's simulator.
    """
    if gpus == 1 or tier == "machine":
        return 1.0
    return (1.0 + comm_fraction(model, tier, gpus)) / (1.0 + comm_fraction(model, "machine", gpus))


# Checkpoint/restore cost. Tiresias Fig. 4 (pause: the chief worker writes the
# model to shared GPFS) is a few seconds and grows with model size; Fig. 5
# (resume: every worker relaunches, rebuilds its graph and reads the
# checkpoint) is several seconds to a few tens and grows with model size and
# worker count. The figures' bar values are not in the paper's text, so we fit
# their order with a linear model in the checkpoint size (Table 6 sizes) and a
# log2 term in workers: VGG19 pauses in 0.5 + 548/200 = 3.2 s and resumes on
# 8 GPUs in 5 + 2.7 + 3 = 10.7 s; GoogLeNet on 1 GPU in 0.6 s and 5.1 s.
# (Tiresias §5 reports ~60 s lost per preemption end to end, 13724 s for 221
# preemptions, an upper bound that also counts warm-up after resuming.)
CHECKPOINT_BASE_S = 0.5
RESTORE_BASE_S = 5.0
SHARED_FS_MB_PER_S = 200.0
RESTORE_PER_WORKER_DOUBLING_S = 1.0


def checkpoint_s(model: str) -> float:
    """Seconds to pause a job and write its checkpoint (the chief worker only)."""
    return CHECKPOINT_BASE_S + profile(model).size_mb / SHARED_FS_MB_PER_S


def restore_s(model: str, gpus: int) -> float:
    """Seconds to relaunch `gpus` workers and load the checkpoint before training resumes."""
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    return (
        RESTORE_BASE_S
        + profile(model).size_mb / SHARED_FS_MB_PER_S
        + RESTORE_PER_WORKER_DOUBLING_S * math.log2(gpus)
    )


# Shockwave Fig. 2(a): doubling the batch size three times (32 -> 256) speeds
# training up to 1.7x, so one doubling gains 1.7^(1/3) ~ 1.19x.
GAIN_PER_DOUBLING = 1.7 ** (1 / 3)


def _regime(start: float, end: float, doublings: int) -> Regime:
    return Regime(
        start=start, end=end, batch_scale=2**doublings, throughput=GAIN_PER_DOUBLING**doublings
    )


# GNS (Shockwave §5): the batch size only doubles, never shrinks. Three
# doublings (Fig. 2's 32 -> 256) at evenly split progress, which is the mean
# of Shockwave's Dir(N/K, ..., N/K) prior over K = 4 regimes.
# Accordion (Shockwave §5, Accordion's critical regimes): small batch in the
# critical phases — the first 10% of training and 10% after each learning-rate
# decay (at 50% and 75%, the usual step schedule) — and 4x the batch size
# (two doublings) elsewhere.
_REGIMES: dict[str, tuple[Regime, ...]] = {
    "static": (_regime(0.0, 1.0, 0),),
    "gns": tuple(_regime(k / 4, (k + 1) / 4, k) for k in range(4)),
    "accordion": (
        _regime(0.0, 0.10, 0),
        _regime(0.10, 0.50, 2),
        _regime(0.50, 0.60, 0),
        _regime(0.60, 0.75, 2),
        _regime(0.75, 0.85, 0),
        _regime(0.85, 1.0, 2),
    ),
}


def regimes(mode: Schedule) -> tuple[Regime, ...]:
    """The batch-size schedule of `mode`, covering progress 0..1 without gaps.

    A job with its own regimes (`TraceJob.schedule`) passes them instead of
    a mode's name; they come back as they are.
    """
    if isinstance(mode, tuple):
        return mode
    try:
        return _REGIMES[mode]
    except KeyError:
        raise ValueError(f"unknown batch mode {mode!r}; known: {sorted(_REGIMES)}") from None


def regime_at(mode: Schedule, progress: float) -> Regime:
    """The regime a job of `mode` is in at `progress` (the last one at progress >= 1)."""
    for r in regimes(mode):
        if progress < r.end:
            return r
    return regimes(mode)[-1]


def exclusive_factor(mode: Schedule) -> float:
    """Run time alone under `mode`'s schedule over run time at the initial batch size.

    The integral of 1/throughput over progress: static 1.0, GNS ~0.782,
    Accordion ~0.791. Finish-time fairness uses it for t_exclusive.
    """
    return sum((r.end - r.start) / r.throughput for r in regimes(mode))


# Initial batch sizes of Shockwave Table 2's workloads (the low end of each
# range); other models start at 32.
_BASE_BATCH = {"resnet50": 16, "resnet18": 16, "lstm": 5, "transformer": 16, "recoder": 512}


@functools.lru_cache(maxsize=1024)
def base_batch_size(model: str) -> int:
    """A job's initial batch size (Shockwave Table 2, else 32)."""
    return _BASE_BATCH.get(_NON_ALNUM.sub("", model.lower()), 32)
