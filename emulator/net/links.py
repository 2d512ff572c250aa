"""Each directed host pair's random stream, in memory bounded however many pairs talk.

A message's jitter, loss and duplication are drawn from its link's own named
stream (`("link", src, dst)`), so a link's numbers never depend on traffic
elsewhere. A `random.Random` holds 2.5 KB of state, and a week of `meta-day`
sends messages over hundreds of thousands of host pairs, most of them a job
agent's handful: one stream per pair kept for the whole run was most of the
growth of its memory. So only the `live_max` streams used most recently are
kept; an evicted one leaves its count of draws behind and, when its link is
used again, is rebuilt from its name and moved past that many draws. Every
link draws exactly the numbers its own stream would have drawn, kept or not.
"""

from __future__ import annotations

import random
from collections import OrderedDict

from emulator.rng import RngStreams

# Busy links (a CM and its RMS, the GMS and each RMS) stay among these; a link
# rebuilt after its eviction costs one seeding and a pass over its old draws.
LIVE_MAX = 4096


class CountedStream:
    """A link's stream and how many numbers it has drawn (its position in the stream)."""

    __slots__ = ("drawn", "rng")

    def __init__(self, rng: random.Random, drawn: int = 0) -> None:
        self.rng = rng
        self.drawn = drawn

    def random(self) -> float:
        self.drawn += 1
        return self.rng.random()


class LinkStreams:
    """The streams of the links that drew recently, and the draw counts of the rest."""

    def __init__(self, rng: RngStreams, live_max: int | None = None) -> None:
        live_max = LIVE_MAX if live_max is None else live_max
        if live_max < 1:
            raise ValueError(f"live_max must be >= 1, got {live_max}")
        self._rng = rng
        self.live_max = live_max
        self._live: OrderedDict[tuple[str, str], CountedStream] = OrderedDict()
        self._drawn: dict[tuple[str, str], int] = {}  # evicted links' positions
        self.rebuilt = 0  # streams rebuilt after an eviction (for tests and profiles)

    def __call__(self, src: str, dst: str) -> CountedStream:
        """The stream of the link `src` → `dst`, where its last draw left it."""
        key = (src, dst)
        stream = self._live.get(key)
        if stream is not None:
            self._live.move_to_end(key)
            return stream
        rng = self._rng.fresh("link", src, dst)
        drawn = self._drawn.pop(key, 0)
        if drawn:
            self.rebuilt += 1
            for _ in range(drawn):
                rng.random()
        stream = self._live[key] = CountedStream(rng, drawn)
        if len(self._live) > self.live_max:
            old_key, old = self._live.popitem(last=False)
            self._drawn[old_key] = old.drawn
        return stream

    def __len__(self) -> int:
        return len(self._live)
