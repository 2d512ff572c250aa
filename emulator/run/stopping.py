"""How a run is stopped before its end: Ctrl-C, and the kill switch of tests.

Both act at an event boundary of the kernel, so what the run database keeps
is whole: Ctrl-C ends the run `interrupted` through its normal exit path; the
kill switch ends the process outright, as a power loss would, for `resume`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator

from emulator.errors import InputError
from emulator.kernel import Kernel
from emulator.units import parse_duration_us

# The testing hook of `mastemu run` and `mastemu resume`: an emulated time at
# which the process kills itself with SIGKILL (no flush, no cleanup), so tests
# can kill a run at a chosen point of emulated time instead of by wall clock.
# It first waits for a trace write already under way (it would land a few
# milliseconds later anyway), so what the database keeps is the same on
# every machine: every chunk begun before the kill, nothing buffered after.
KILL_AT_ENV = "MASTEMU_KILL_AT"
KILLED = "killed by MASTEMU_KILL_AT"


def kill_at_us() -> int | None:
    """The emulated time of `MASTEMU_KILL_AT` (e.g. `20m`), or None if unset."""
    text = os.environ.get(KILL_AT_ENV)
    if not text:
        return None
    try:
        return parse_duration_us(text)
    except InputError as error:
        raise InputError(KILL_AT_ENV, "", f"not a duration: {error}") from None


def arm_kill_switch(kernel: Kernel) -> None:
    """Schedule the SIGKILL of `MASTEMU_KILL_AT`, if it is set and not already past."""
    t_us = kill_at_us()
    if t_us is not None and t_us >= kernel.now_us:
        kernel.at(t_us, kernel.request_stop, KILLED)


@contextlib.contextmanager
def stop_on_interrupt(kernel: Kernel, handle_signals: bool) -> Iterator[None]:
    """Ctrl-C (SIGINT) asks `kernel` to stop at its next event boundary, while inside.

    Entered before the run's setup: a press during a long setup (meta-scale's
    world) lets the setup finish, and the run stops at the first event
    boundary after the event loop reads the signal (it reads it when the
    kernel waits for the store, so virtual time may run on a little) and
    ends `interrupted` like any other, its database whole.
    """
    loop = asyncio.get_running_loop()
    installed = False
    if handle_signals:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, kernel.request_stop, "interrupted")
            installed = True
    try:
        yield
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
