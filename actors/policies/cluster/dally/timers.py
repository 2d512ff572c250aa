"""Dally's parameters and delay timers: job agent (Algorithm 1), auto-tuner (Algorithm 2).

Delay scheduling over network tiers (Dally §IV-B2): a job takes a
machine-tier offer at once; it turns down looser offers until it has
starved for its machine timer, then takes rack tier, and once its rack
timer has run out too, anything. Starvation counts from when the job last
entered the wait queue (arrival or preemption, `JobView.queued_since_us`);
both timers count from that moment (paper defaults: 12 h, and 24 h in all).

The agent holds no state: the scheduler puts the job's two timers in the
offer's `note` (`machine_timer_us`, `rack_timer_us`), and `agent_accepts`
decides from the offer, the job's wait and nothing else.

The auto-tuner (§IV-B3) keeps, per (tier, GPU demand), the waits of jobs
that accepted an offer at that tier (machine or rack; network starts are
not recorded, as in Algorithm 1), and sets a timer to the mean plus two
sample standard deviations of the recent waits (once there are two).
"Recent" is a history
window: samples recorded longer ago than `window_us` are dropped (our
reading of Algorithm 2's HISTORY_TIME_LIMIT; the text also calls it the
size of the wait list, so at most `count_max` newest samples per list are
kept as well). With fewer than two samples the initial (manual) timer
applies.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Literal

import msgspec

from actors.policies.cluster.api import Tier

__all__ = [
    "FOREVER_US",
    "DallyParams",
    "DallyState",
    "Timers",
    "WaitSample",
    "agent_accepts",
    "loosest_accepted",
    "note_of",
    "record_wait",
    "tuned_timer_us",
]

# "Wait as long as it takes" (Dally-fullyConsolidated). A finite sentinel, not
# math.inf, so that notes and state survive a JSON round trip; 2**53 µs is
# about 285 years and exact as a float.
FOREVER_US = float(2**53)

TimerMode = Literal["auto", "manual", "no-wait", "fully-consolidated"]


class DallyParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Dally's knobs, with the paper's defaults where it gives them.

    `machine_timer_s` / `rack_timer_s` are the manual timers (12 h, and 24 h
    in all: §IV-B2), also the auto-tuner's start before any wait is seen.
    The paper leaves the history limit to the operator; one week and 100
    samples per list are our defaults. `preempt_margin` is how much higher
    (relative) a runner's Nw_sens must be for a waiting job to preempt it.
    The default, 0, is the paper's "higher" (beyond float noise). Equal jobs
    measured a few ms apart differ by ~1e-5, and under control-plane latency
    preempt each other on that: 0.001 ends it (on `dally-racks`, 120 instead
    of 130 preemptions, makespan +0.5%; a generated trace whose actors and
    engine parted by 5.2% then agree within 0.3%). `rank_resolution` is how
    close two Nw_sens must be to rank as equal in the orders (victims highest
    first, waiting jobs lowest first; ties to the job id; `ties.py`). The
    default, 0, ranks them exactly but for float noise. 1e-4 is above those
    milliseconds, so that which of two equal runners is preempted does not
    hang on them (a generated trace whose actors and engine parted by 39% on
    that then agree within 0.0001%); on `dally-racks` it brings them no closer
    (seeds 1-10: the runs part as often either way, Dally's timers and spread
    gangs amplifying any difference).
    """

    timers: TimerMode = "auto"
    machine_timer_s: float = 43_200.0
    rack_timer_s: float = 86_400.0
    history_window_s: float = 604_800.0
    history_count_max: int = 100
    preemption: bool = True
    preempt_margin: float = 0.0
    rank_resolution: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.preempt_margin <= 1:
            raise ValueError(f"dally.preempt_margin must be in [0, 1], got {self.preempt_margin}")
        if not 0 <= self.rank_resolution <= 1:
            raise ValueError(f"dally.rank_resolution must be in [0, 1], got {self.rank_resolution}")
        for name in ("machine_timer_s", "rack_timer_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"dally.{name} must be finite and >= 0, got {value}")
        if self.rack_timer_s < self.machine_timer_s:
            # Both count from the same moment: a shorter rack timer would never be waited.
            raise ValueError(
                f"dally.rack_timer_s must be >= dally.machine_timer_s "
                f"({self.machine_timer_s}), got {self.rack_timer_s}"
            )
        if not math.isfinite(self.history_window_s) or self.history_window_s <= 0:
            raise ValueError(f"dally.history_window_s must be > 0, got {self.history_window_s}")
        if not 1 <= self.history_count_max <= 10_000:
            raise ValueError(
                f"dally.history_count_max must be in 1..10000, got {self.history_count_max}"
            )


MACHINE_KEY = "machine_timer_us"
RACK_KEY = "rack_timer_us"

ConsolidatedTier = Literal["machine", "rack"]


class _Frozen(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of Dally's state Structs (msgspec-encodable, immutable)."""


class WaitSample(_Frozen, kw_only=True):
    """A job of `gpus` GPUs took a `tier` offer at `at_us` after waiting `wait_us`."""

    tier: ConsolidatedTier
    gpus: int
    at_us: int
    wait_us: int


class DallyState(_Frozen, kw_only=True):
    """Dally's memory between calls: the auto-tuner's wait lists, oldest sample first."""

    waits: tuple[WaitSample, ...] = ()


class Timers(_Frozen, kw_only=True):
    """A job's two delay timers, both counted from when it entered the wait queue."""

    machine_us: float
    rack_us: float


def note_of(timers: Timers) -> tuple[tuple[str, float], ...]:
    """The offer note that carries the timers to the job's agent."""
    return ((MACHINE_KEY, timers.machine_us), (RACK_KEY, timers.rack_us))


def _timers_from(note: Iterable[tuple[str, float]]) -> Timers:
    values = dict(note)
    missing = [k for k in (MACHINE_KEY, RACK_KEY) if k not in values]
    if missing:
        # An offer without timers is a bug of whoever built it, not a reason to accept.
        raise ValueError(f"dally offer note lacks {', '.join(missing)}: {values}")
    return Timers(machine_us=values[MACHINE_KEY], rack_us=values[RACK_KEY])


def agent_accepts(tier: Tier, note: Iterable[tuple[str, float]], starved_us: int) -> bool:
    """Algorithm 1: does a job that has waited `starved_us` take an offer at `tier`?

    Machine tier: always. Otherwise reject while the machine timer runs;
    then rack tier is taken, and network tier only once the rack timer has
    run out too.
    """
    if tier == "machine":
        return True
    timers = _timers_from(note)
    if starved_us < timers.machine_us:
        return False
    if tier == "rack":
        return True
    return starved_us >= timers.rack_us


def loosest_accepted(timers: Timers, starved_us: int) -> Tier:
    """The loosest tier the agent would take now (what `agent_accepts` allows)."""
    if starved_us < timers.machine_us:
        return "machine"
    if starved_us < timers.rack_us:
        return "rack"
    return "network"


def _recent(waits: Iterable[WaitSample], now_us: int, window_us: int) -> list[WaitSample]:
    return [w for w in waits if now_us - w.at_us <= window_us]


def tuned_timer_us(
    state: DallyState, tier: ConsolidatedTier, gpus: int, now_us: int, window_us: int,
    initial_us: float,
) -> float:  # fmt: skip
    """Algorithm 2 for one list: mean + 2 sample std of the recent waits, or `initial_us`.

    A sample standard deviation needs two samples: with fewer, the list says
    nothing yet and the initial timer stands. (Taking one wait of 0 s as the
    timer would stop every later job of that demand from waiting at all.)
    """
    waits = [
        float(w.wait_us)
        for w in _recent(state.waits, now_us, window_us)
        if w.tier == tier and w.gpus == gpus
    ]
    if len(waits) < 2:
        return initial_us
    return statistics.fmean(waits) + 2.0 * statistics.stdev(waits)


def record_wait(
    state: DallyState, sample: WaitSample, window_us: int, count_max: int
) -> DallyState:
    """The state with `sample` appended and the lists trimmed to the window and size limit.

    Trimming here (not only when reading) keeps the state bounded however
    long the run: at most `count_max` samples per (tier, GPU demand).
    """
    kept = _recent((*state.waits, sample), sample.at_us, window_us)
    per_list: dict[tuple[str, int], int] = {}
    out: list[WaitSample] = []
    # Walk newest first so the newest `count_max` of each list survive.
    for w in reversed(kept):
        key = (w.tier, w.gpus)
        if per_list.get(key, 0) < count_max:
            per_list[key] = per_list.get(key, 0) + 1
            out.append(w)
    return DallyState(waits=tuple(reversed(out)))
