"""Named, seeded random streams.

Every source of randomness in a run is a stream named by what it serves
(`("link", "us-east/ctl0", "eu-west/ctl0")`, `("faults",)`, `("actor", addr)`),
seeded from the run seed and the name. `random.Random` hashes a str seed with
SHA-512, so the streams do not depend on PYTHONHASHSEED, and adding a new
stream never shifts the numbers drawn by an existing one.
"""

from __future__ import annotations

import random


class RngStreams:
    """Lazily created, cached `random.Random` per name.

    `salt` gives a second, independent family of streams for the same seed
    (a resumed run must not replay the draws its killed process made).
    """

    __slots__ = ("_streams", "salt", "seed")

    def __init__(self, seed: int, salt: str = "") -> None:
        self.seed = seed
        self.salt = salt
        self._streams: dict[tuple[str, ...], random.Random] = {}

    def stream(self, *name: str) -> random.Random:
        rng = self._streams.get(name)
        if rng is None:
            rng = self._streams[name] = self.fresh(*name)
        return rng

    def fresh(self, *name: str) -> random.Random:
        """The stream `name` from its start, not cached: its owner keeps it (or not)."""
        return random.Random(f"mastemu:{self.seed}{self.salt}:" + "\x1f".join(name))

    def names(self) -> list[tuple[str, ...]]:
        return sorted(self._streams)
