"""Small actors that kernel and network tests run on `tests.support.harness` kernels."""

from __future__ import annotations

import msgspec

from emulator.actor import Actor, on
from emulator.units import MS


class Beat(msgspec.Struct, frozen=True, tag=True):
    n: int


class Beater(Actor):
    """Sends Beat(n) to `params` every 100 ms and records what it receives."""

    kind = "test-beater"

    async def on_start(self) -> None:
        self.n = 0
        self.got: list[tuple[int, int]] = []
        self.set_timer(100 * MS, "tick")

    @on(str)
    def tick(self, _: str) -> None:
        self.n += 1
        self.send(self.params, Beat(self.n))
        self.set_timer(100 * MS, "tick")

    @on(Beat)
    def beat(self, msg: Beat) -> None:
        self.got.append((self.now_us, msg.n))
