"""The RMS negative cache (MAST §4.3): requests known to fail during one GMS scan.

When a job cannot be placed, its scheduling properties are recorded; a later
request with the same GPU type and priority that needs at least as many GPUs
and at least as many CPU machines is then known to fail too (placement
feasibility only gets harder as a request grows), and the RMS abstains
without searching. The cache only holds for the cluster state of one scan:
the actor replaces it with `empty()` at every scan start. The state is a
frozen value; every update returns the next one.

Only the minimal failures are kept per (gpu_type, priority): a failure of 16
GPUs adds nothing once 8 GPUs are known to fail, and replaces a recorded 32.

With pipelined auctions an RMS holds the machines of its open bids; a
failure found while some are held (`held=True`) may not survive a hold
given back, so such failures are kept apart and forgotten when a hold ends
without a dispatch (`forget_held`); an award turns the hold into the
dispatch's own reservation and keeps them. Dropping them altogether, as the
cache once did, left MAST's pipelined presets with a hit rate of ~10%
(87% without a pipeline), and every scan pass searched again for every
queued workload that could not run.
"""

from __future__ import annotations

import msgspec

from actors.policies.mast.placement.snapshot import JobRequest


class SchedProps(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What decides whether a request can be placed: hardware type, size, priority."""

    gpu_type: str | None
    gpus: int
    cpu_machines: int
    priority: int

    @classmethod
    def from_request(cls, req: JobRequest) -> SchedProps:
        return cls(
            gpu_type=req.gpu_type,
            gpus=req.gpus,
            cpu_machines=req.cpu_machines,
            priority=req.priority,
        )

    def covers(self, other: SchedProps) -> bool:
        """Whether a failure of `self` implies a failure of `other` (same kind, no smaller)."""
        return (
            self.gpu_type == other.gpu_type
            and self.priority == other.priority
            and self.gpus <= other.gpus
            and self.cpu_machines <= other.cpu_machines
        )


class NegativeCache(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Failures recorded in this scan (minimal ones only) and lookup counters."""

    failures: tuple[SchedProps, ...] = ()
    held: tuple[SchedProps, ...] = ()  # found while bids held machines (module docstring)
    hits: int = 0
    lookups: int = 0


def empty() -> NegativeCache:
    """A fresh cache, as at the start of a GMS scan."""
    return NegativeCache()


def fails_fast(cache: NegativeCache, props: SchedProps) -> bool:
    """True iff a recorded failure of the same type and priority was no larger than `props`."""
    return any(f.covers(props) for f in cache.failures) or any(f.covers(props) for f in cache.held)


def _minimal(failures: tuple[SchedProps, ...], props: SchedProps) -> tuple[SchedProps, ...]:
    kept = [f for f in failures if not props.covers(f)]
    kept.append(props)
    kept.sort(key=lambda f: (f.gpu_type or "", f.priority, f.gpus, f.cpu_machines))
    return tuple(kept)


def record_failure(cache: NegativeCache, props: SchedProps, held: bool = False) -> NegativeCache:
    """The cache after `props` failed to place (`held`: while bids held machines)."""
    if held:
        if fails_fast(cache, props):
            return cache
        return msgspec.structs.replace(cache, held=_minimal(cache.held, props))
    if any(f.covers(props) for f in cache.failures):
        return cache
    # A failure with nothing held also outlives every hold: it takes over the held
    # failures it covers.
    held_kept = tuple(f for f in cache.held if not props.covers(f))
    return msgspec.structs.replace(cache, failures=_minimal(cache.failures, props), held=held_kept)


def forget_held(cache: NegativeCache) -> NegativeCache:
    """The cache after a hold ended without a dispatch: its machines may fit what failed."""
    if not cache.held:
        return cache
    return msgspec.structs.replace(cache, held=())


def count(cache: NegativeCache, hit: bool) -> NegativeCache:
    """The cache after one lookup, a hit or not (for the hit-rate metric)."""
    return msgspec.structs.replace(cache, hits=cache.hits + int(hit), lookups=cache.lookups + 1)


def lookup(cache: NegativeCache, props: SchedProps) -> tuple[bool, NegativeCache]:
    """`fails_fast` and `count` in one step: (known to fail, next cache)."""
    hit = fails_fast(cache, props)
    return hit, count(cache, hit)


def hit_rate(cache: NegativeCache) -> float:
    """Hits per lookup; 0.0 before any lookup."""
    return cache.hits / cache.lookups if cache.lookups else 0.0
