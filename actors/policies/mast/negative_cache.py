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
    hits: int = 0
    lookups: int = 0


def empty() -> NegativeCache:
    """A fresh cache, as at the start of a GMS scan."""
    return NegativeCache()


def fails_fast(cache: NegativeCache, props: SchedProps) -> bool:
    """True iff a recorded failure of the same type and priority was no larger than `props`."""
    return any(f.covers(props) for f in cache.failures)


def record_failure(cache: NegativeCache, props: SchedProps) -> NegativeCache:
    """The cache after `props` failed to place."""
    if fails_fast(cache, props):
        return cache
    kept = [f for f in cache.failures if not props.covers(f)]
    kept.append(props)
    kept.sort(key=lambda f: (f.gpu_type or "", f.priority, f.gpus, f.cpu_machines))
    return msgspec.structs.replace(cache, failures=tuple(kept))


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
