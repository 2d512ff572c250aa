"""The error vocabulary of the emulator.

`EmulatorInternalError` is a bug of ours and ends the run; everything an actor
does wrong (raising, awaiting something foreign) is a crash of that actor only.
"""

from __future__ import annotations


class EmulatorInternalError(RuntimeError):
    """Something that should never happen inside the kernel: a bug of ours."""


class ForeignAwait(RuntimeError):
    """An actor awaited something that is not a kernel command (e.g. `asyncio.sleep`)."""


class CallTimeout(TimeoutError):
    """A request made with `Actor.call` got no reply within its emulated timeout.

    The request may or may not have been processed (an indefinite outcome).
    """

    definite = False


class ScenarioError(ValueError):
    """Bad user input: names the file and the key path; the CLI exits with 2."""

    def __init__(self, source: str, path: str, message: str) -> None:
        self.source = source
        self.path = path
        self.message = message
        where = f"{source}: {path}" if path else source
        super().__init__(f"{where}: {message}")
