"""The negative cache: same-or-larger requests fail fast, others do not; hit rate."""

from __future__ import annotations

import pytest

from actors.policies.mast.negative_cache import (
    SchedProps,
    count,
    empty,
    fails_fast,
    forget_held,
    hit_rate,
    lookup,
    record_failure,
)
from actors.policies.mast.placement.snapshot import JobRequest


def props(gpus: int = 16, cpus: int = 0, gpu_type: str | None = "A100", priority: int = 3):
    return SchedProps(gpu_type=gpu_type, gpus=gpus, cpu_machines=cpus, priority=priority)


FAILED = record_failure(empty(), props(gpus=16, cpus=2))  # A100, 16 GPUs + 2 CPU, priority 3

CASES = [
    # (name, query, fails fast)
    ("same size", props(16, 2), True),
    ("more GPUs", props(32, 2), True),
    ("more CPU machines", props(16, 5), True),
    ("larger in both", props(64, 9), True),
    ("fewer GPUs", props(8, 2), False),
    ("fewer CPU machines", props(16, 1), False),
    ("more GPUs but fewer CPU machines", props(32, 1), False),
    ("other GPU type", props(16, 2, gpu_type="H100"), False),
    ("higher priority", props(16, 2, priority=2), False),
    ("lower priority", props(16, 2, priority=4), False),
    ("CPU-only job", props(0, 2, gpu_type=None), False),
]


@pytest.mark.parametrize(("query", "hit"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_or_larger_fails_fast(query: SchedProps, hit: bool) -> None:
    assert fails_fast(FAILED, query) is hit


def test_empty_cache_knows_nothing() -> None:
    assert not fails_fast(empty(), props())
    assert hit_rate(empty()) == 0.0


def test_only_minimal_failures_are_kept() -> None:
    cache = record_failure(empty(), props(32))
    cache = record_failure(cache, props(64))  # already implied by 32: nothing new
    assert cache.failures == (props(32),)
    cache = record_failure(cache, props(8))  # 8 implies 32: replaces it
    assert cache.failures == (props(8),)
    cache = record_failure(cache, props(4, gpu_type="H100"))  # another kind: kept alongside
    assert set(cache.failures) == {props(8), props(4, gpu_type="H100")}


def test_from_request() -> None:
    req = JobRequest(workload_id="w", job="t", gpu_type="A100", gpus=16, cpu_machines=2, priority=3)
    assert SchedProps.from_request(req) == props(16, 2)


def test_hit_rate_counts_lookups() -> None:
    # 4 lookups: 16 (hit), 32 (hit), 8 (miss), 16 (hit) -> 3 / 4
    cache = FAILED
    for gpus in (16, 32, 8, 16):
        _, cache = lookup(cache, props(gpus, 2))
    assert (cache.hits, cache.lookups) == (3, 4)
    assert hit_rate(cache) == 0.75
    assert hit_rate(count(count(empty(), True), False)) == 0.5


def test_the_cache_is_a_value() -> None:
    before = empty()
    after = record_failure(before, props())
    assert before.failures == () and after.failures == (props(),)
    assert record_failure(after, props()) is after  # nothing new: the same value back


# Failures found while bids held machines (`held=True`) last until a hold ends
# without a dispatch (`forget_held`); failures with nothing held last the pass.
HELD_CASES = [
    # (name, failures recorded as (props, held), query, fails fast before, after forget_held)
    ("held failure, same size", [(props(16), True)], props(16), True, False),
    ("held failure, larger query", [(props(16), True)], props(32), True, False),
    ("held failure, smaller query", [(props(16), True)], props(8), False, False),
    ("free failure", [(props(16), False)], props(16), True, True),
    (
        "free failure covers a held one",
        [(props(32), True), (props(16), False)],
        props(32),
        True,
        True,
    ),
    (
        "held failure smaller than a free one",
        [(props(32), False), (props(16), True)],
        props(16),
        True,
        False,
    ),
    (
        "held failure under a free one",
        [(props(16), False), (props(32), True)],
        props(32),
        True,
        True,
    ),
]


@pytest.mark.parametrize(
    ("recorded", "query", "before", "after"),
    [c[1:] for c in HELD_CASES],
    ids=[c[0] for c in HELD_CASES],
)
def test_held_failures_are_forgotten_when_a_hold_ends(
    recorded: list[tuple[SchedProps, bool]], query: SchedProps, before: bool, after: bool
) -> None:
    cache = empty()
    for failed, held in recorded:
        cache = record_failure(cache, failed, held)
    assert fails_fast(cache, query) is before
    assert fails_fast(forget_held(cache), query) is after


def test_a_free_failure_takes_over_the_held_ones_it_covers() -> None:
    cache = record_failure(empty(), props(32), held=True)
    cache = record_failure(cache, props(16))
    assert (cache.failures, cache.held) == ((props(16),), ())
    assert forget_held(empty()) == empty()
