"""Jobs' batch sizes and batch-size schedules as Gavel's/Shockwave's simulator derives them.

Under `semantics.batch_size = "trace"` (the `gavel-sim` profile) a job
starts at the batch size B its trace's job type names ("LM (batch size
80)") and follows the peer's per-epoch pattern for its model, B, gang size
and mode (Shockwave artifact, `utils.get_accordion_bs_pattern` and
`get_gns_bs_pattern`):

- epochs: n = ⌈total_steps / ⌈samples per epoch / B⌉⌉ (the dataset sizes
  of the peer, `SAMPLES_PER_EPOCH`);
- static: B throughout;
- accordion: the model's largest batch size outside its critical regimes
  and past the first 30% of the epochs; the Transformer (and every model
  without a critical-regime rule) never scales, and neither does a job
  that starts at its model's largest batch size;
- gns: B times 2, 4, 8, 16 from given epochs on, per (model, B, GPUs)
  (`_GNS`), capped at the model's largest batch size; a combination the
  peer does not list never scales. Past its first stretch the peer's loop
  leaves the last epoch at B, and so does this.

An epoch at batch size b takes (samples / b) / iterations-per-second(b)
seconds when a throughput table gives the speeds (`throughputs.py`); the
job's run time at B is then n epochs at B (the trace's `duration` is not
used), and each stretch of equal b becomes a `Regime` of relative speed
epoch(B) / epoch(b). Without a table the trace's duration is kept and a
doubling speeds training up by perf_model's GAIN_PER_DOUBLING.

The peer's round simulation reaches a larger batch size by doubling once
per round; here a job jumps to it at the pattern's epoch. Under
`batch_size = "model"` every job starts at Shockwave Table 2's size for its
model with its mode's regimes, and the batch sizes a trace names are listed
as not honoured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from actors.cluster.throughputs import ThroughputTable
from actors.cluster.traces import NotHonoured
from actors.policies.cluster import perf_model
from actors.policies.cluster.api import Regime, TraceJob

__all__ = [
    "BATCH_MAX",
    "SAMPLES_PER_EPOCH",
    "accordion_pattern",
    "apply_batch_sizes",
    "epochs_of",
    "gns_pattern",
    "regimes_of",
]

# Samples per epoch of each model's dataset, as the peer counts them
# (CIFAR-10, its ImageNet subset, Multi30k, Wikitext-2, ML-20M).
SAMPLES_PER_EPOCH = {
    "resnet18": 50_000,
    "resnet50": 100_000,
    "transformer": 10_000,
    "lstm": 59_675,
    "recoder": 117_907,
}
# The largest batch size the peer scales each model to.
BATCH_MAX = {"resnet18": 256, "resnet50": 128, "transformer": 128, "lstm": 80, "recoder": 8192}
ACCORDION_HEAD_FRACTION = 0.3  # the peer keeps the first 30% of epochs at B
# Put a limit on everything: a job of more epochs than this is a unit typo.
EPOCHS_MAX = 1_000_000

# GNS: (model, B, GPUs) → (more epochs than this needed, ((first, end or None, ×B), …)).
_GNS: dict[tuple[str, int, int], tuple[int, tuple[tuple[int, int | None, int], ...]]] = {
    ("resnet18", 16, 1): (31, ((31, 41, 2), (41, 51, 4), (51, 71, 8), (71, None, 16))),
    ("resnet18", 32, 1): (21, ((21, 31, 2), (31, 51, 4), (51, None, 8))),
    ("resnet18", 64, 1): (11, ((11, 31, 2), (31, None, 4))),
    ("resnet18", 128, 1): (11, ((11, None, 2),)),
    ("resnet18", 16, 2): (21, ((21, 31, 2), (31, 91, 4), (91, 111, 8), (111, None, 16))),
    ("resnet18", 32, 2): (11, ((11, 21, 2), (21, 41, 4), (41, None, 8))),
    ("resnet18", 64, 2): (21, ((21, 41, 2), (41, None, 4))),
    ("resnet18", 128, 2): (41, ((41, None, 2),)),
    ("resnet18", 16, 4): (11, ((11, 21, 2), (21, 81, 4), (81, 91, 8), (91, None, 16))),
    ("resnet18", 32, 4): (21, ((21, 31, 2), (31, 61, 4), (61, None, 8))),
    ("resnet18", 64, 4): (11, ((11, 61, 2), (61, None, 4))),
    ("resnet18", 128, 4): (11, ((11, None, 2),)),
    ("resnet50", 64, 1): (101, ((101, None, 2),)),
    ("resnet50", 32, 2): (101, ((101, 111, 2), (111, None, 4))),
    ("resnet50", 64, 2): (81, ((81, None, 2),)),
    ("resnet50", 32, 4): (131, ((131, 221, 2), (221, None, 4))),
    ("resnet50", 64, 4): (191, ((191, None, 2),)),
    ("lstm", 5, 1): (31, ((31, 41, 2), (41, 61, 4), (61, 71, 8), (71, None, 16))),
    ("lstm", 10, 1): (11, ((11, 21, 2), (21, 41, 4), (41, None, 8))),
    ("lstm", 20, 1): (11, ((11, 41, 2), (41, None, 4))),
    ("lstm", 40, 1): (11, ((11, None, 2),)),
    ("lstm", 5, 2): (31, ((31, 51, 2), (51, 61, 4), (61, 71, 8), (71, None, 16))),
    ("lstm", 10, 2): (11, ((11, 31, 2), (31, 41, 4), (41, None, 8))),
    ("lstm", 20, 2): (31, ((31, 41, 2), (41, None, 4))),
    ("lstm", 40, 2): (11, ((11, None, 2),)),
    ("lstm", 5, 4): (11, ((11, 31, 2), (31, 71, 4), (71, 91, 8), (91, None, 16))),
    ("lstm", 10, 4): (11, ((11, 31, 2), (31, 61, 4), (61, None, 8))),
    ("lstm", 20, 4): (11, ((11, 61, 2), (61, None, 4))),
    ("lstm", 40, 4): (61, ((61, None, 2),)),
    ("recoder", 512, 1): (21, ((21, 41, 2), (41, 71, 4), (71, 91, 8), (91, None, 16))),
    ("recoder", 1024, 1): (21, ((21, 51, 2), (51, 91, 4), (91, None, 8))),
    ("recoder", 2048, 1): (21, ((21, 41, 2), (41, None, 4))),
    ("recoder", 4096, 1): (41, ((41, None, 2),)),
}


def _critical(model: str, batch: int, epoch: int) -> bool:
    """Whether `epoch` is in one of Accordion's critical regimes for the model (kept at B)."""
    if model == "resnet18":
        head = 20 if batch == 256 else 10
        return epoch < head or 150 <= epoch < 160 or 250 <= epoch < 260
    if model == "resnet50":
        return epoch < 600 and epoch % 30 < 10
    if model == "lstm":
        return epoch < 10
    head = 30 if batch in (512, 1024) else 40 if batch == 2048 else 10  # recoder
    return epoch < head or 60 <= epoch < 70 or 80 <= epoch < 90


def accordion_pattern(model: str, batch: int, epochs: int) -> list[int]:
    """The batch size of every epoch under Accordion (see the module docstring)."""
    if model not in ("resnet18", "resnet50", "lstm", "recoder"):
        return [batch] * epochs  # the Transformer and the rest never scale
    big = BATCH_MAX[model]
    head = epochs * ACCORDION_HEAD_FRACTION
    return [big if not _critical(model, batch, e) and e > head else batch for e in range(epochs)]


def gns_pattern(model: str, batch: int, epochs: int, gpus: int) -> list[int]:
    """The batch size of every epoch under GNS (see the module docstring)."""
    sizes = [batch] * epochs
    rule = _GNS.get((model, batch, gpus))
    if rule is None or epochs <= rule[0]:
        return sizes
    for k, (first, end, times) in enumerate(rule[1]):
        # The peer's loops: the first stretch may reach the last epoch, later ones stop short.
        stop = min(end if end is not None else epochs, epochs if k == 0 else epochs - 1)
        for e in range(first, stop):
            sizes[e] = batch * times
    cap = BATCH_MAX.get(model, batch)
    return [min(b, cap) for b in sizes]


def epochs_of(job: TraceJob) -> int | None:
    """The job's epochs, ⌈steps / ⌈samples / B⌉⌉, or None without steps, B or a known dataset."""
    samples = SAMPLES_PER_EPOCH.get(job.model)
    if samples is None or job.batch_size < 1 or job.iterations < 1:
        return None
    return min(EPOCHS_MAX, math.ceil(job.iterations / math.ceil(samples / job.batch_size)))


def _epoch_s(table: ThroughputTable | None, job: TraceJob, batch: int) -> float | None:
    """Seconds per epoch at `batch` (from the table), None if the table lacks it."""
    if table is None:
        return None
    rate = table.iterations_per_s(job.model, batch, job.gpus)
    return None if rate is None else SAMPLES_PER_EPOCH[job.model] / batch / rate


def regimes_of(sizes: Sequence[int], speed: Sequence[float]) -> tuple[Regime, ...]:
    """Stretches of equal batch size as regimes; `speed[i]` is epoch i's speed relative to B."""
    n, batch = len(sizes), sizes[0]
    out: list[Regime] = []
    start = 0
    for e in range(1, n + 1):
        if e == n or sizes[e] != sizes[start]:
            out.append(
                Regime(
                    start=start / n,
                    end=e / n if e < n else 1.0,
                    batch_scale=max(1, sizes[start] // batch),
                    throughput=speed[start],
                )
            )
            start = e
    return tuple(out)


def _scheduled(job: TraceJob, table: ThroughputTable | None) -> tuple[TraceJob, str]:
    """The job with the peer's batch-size schedule, or as it was and why."""
    n = epochs_of(job)
    if n is None:
        return job, "no batch size, steps or known dataset: its mode's regimes kept"
    b = job.batch_size
    if job.mode == "accordion":
        sizes = accordion_pattern(job.model, b, n)
    elif job.mode == "gns":
        sizes = gns_pattern(job.model, b, n, job.gpus)
    else:
        sizes = [b] * n
    base_s = _epoch_s(table, job, b)
    why = ""
    speeds = []
    for size in sizes:
        at = _epoch_s(table, job, size)
        if base_s is not None and at is not None:
            speeds.append(base_s / at)
        else:
            speeds.append(perf_model.GAIN_PER_DOUBLING ** math.log2(size / b))
            if table is not None:
                why = (
                    "a batch size missing from the throughput table: its speed from the gain model"
                )
    duration_us = job.duration_us
    if base_s is not None:
        duration_us = max(1, round(n * base_s * 1_000_000))
    changed = msgspec.structs.replace(
        job, duration_us=duration_us, regimes=regimes_of(sizes, speeds)
    )
    return changed, why


def apply_batch_sizes(
    jobs: Sequence[TraceJob], convention: str, table: ThroughputTable | None
) -> tuple[tuple[TraceJob, ...], tuple[NotHonoured, ...]]:
    """The jobs under `semantics.batch_size = convention`, and what it could not honour."""
    notes: list[NotHonoured] = []
    named = [j for j in jobs if j.batch_size]
    if convention != "trace":
        if named:
            notes.append(
                NotHonoured(
                    what="batch size (job type)",
                    rows=len(named),
                    why='semantics.batch_size = "model": Shockwave Table 2\'s by model instead',
                )
            )
        if table is not None:
            notes.append(
                NotHonoured(
                    what=f"throughputs {table.source}",
                    rows=len(jobs),
                    why='used only with semantics.batch_size = "trace"',
                )
            )
        return tuple(msgspec.structs.replace(j, batch_size=0) for j in jobs), tuple(notes)
    out = []
    reasons: dict[str, int] = {}
    for job in jobs:
        changed, why = _scheduled(job, table)
        out.append(changed)
        if why:
            reasons[why] = reasons.get(why, 0) + 1
    notes += [NotHonoured(what="batch-size schedule", rows=n, why=w) for w, n in reasons.items()]
    return tuple(out), tuple(notes)
