"""A campaign's run that does far more work than its peers: a livelock, stopped and reported.

explore met one: a scheduler re-sent a plan its CM refused every network round
trip, a thousand times per emulated second, and the run (and the campaign)
never ended. Emulated time crept on, so no same-instant check saw it. A
campaign knows what a run of its scenario costs (its first run), so a run that
handles many times more events is stopped at an event boundary and counted as
a failure of its own. Events, not CPU seconds: the verdict is the same on
every machine, so the search stays deterministic.
"""

from __future__ import annotations

from typing import Any

RUNAWAY = "runaway"
EVENTS_FACTOR = 50  # a run this many times busier than the campaign's first one
EVENTS_FLOOR = 1_000_000  # and never fewer: short first runs vary the most


def events_cap(first_run_events: int) -> int:
    """The most events a run may handle, given its campaign's first run's."""
    return max(EVENTS_FLOOR, EVENTS_FACTOR * first_run_events)


class EventCap:
    """The kernel's progress hook (called every few hundred events): stops the run
    past `events_max` events."""

    def __init__(self, events_max: int | None) -> None:
        self.events_max = events_max
        self.tripped_at_us: int | None = None

    def check(self, kernel: Any) -> None:
        if self.events_max is None or self.tripped_at_us is not None:
            return
        if kernel.events > self.events_max:
            self.tripped_at_us = kernel.now_us
            kernel.request_stop(RUNAWAY)

    def detail(self) -> str:
        """What the failure says (one per campaign: the cap is the campaign's)."""
        return f"over {self.events_max:,} events"
