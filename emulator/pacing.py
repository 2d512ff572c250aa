"""Clock modes. Virtual mode has no pacer at all; scaled mode paces wall time.

Both modes process the same events in the same order, so they give the same
trace: the pacer only decides how long the kernel waits before an instant.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Pacer:
    """Scaled mode: emulated time runs `speed` times faster than wall time.

    Before the events of emulated instant t the kernel waits until
    `wall0 + (t - t0) / speed`. When the kernel is behind it runs flat out and
    never skips an event; the largest lag is reported.
    """

    def __init__(self, speed: float, t0_us: int = 0) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        self.speed = speed
        self.t0_us = t0_us
        self.wall0 = time.monotonic()
        self.lag_s_max = 0.0

    # A long wait is taken in slices so a stop request (Ctrl-C) is seen promptly.
    slice_s = 0.1

    async def wait_until(self, t_us: int, stopping: Callable[[], bool] = lambda: False) -> None:
        target = self.wall0 + (t_us - self.t0_us) / 1e6 / self.speed
        delay = target - time.monotonic()
        if delay <= 0:
            self.lag_s_max = max(self.lag_s_max, -delay)
            return
        while delay > 0 and not stopping():
            await asyncio.sleep(min(delay, self.slice_s))
            delay = target - time.monotonic()
