"""The error vocabulary of mastemu: one class per meaning, all of them here.

Who raises what, and what becomes of it:

- `InputError`: what a person gave is wrong (a scenario key, a CLI argument,
  a trace row, a policy parameter, a file that is not a run database). It
  names the source and the key path; the CLI prints it and exits 2.
- `PolicyContractError`: a policy's decision breaks the contract its
  interface states (a start beyond the free GPUs, an order that is not a
  permutation, a policy that never lets time advance). The actor that asked
  crashes with it; the reference engine raises it to its caller.
- `ComponentBug`: an emulated component (an actor or a policy of ours) met a
  state its own logic rules out. It crashes that actor, which is a failure
  of the run, never of the emulator.
- `EmulatorInternalError`: the mechanism itself (kernel, network, store
  plumbing) is wrong. It ends the run.
- `ForeignAwait` and `CallTimeout` are what an actor sees from the kernel.
- `InputWarning` is not raised: input that is allowed but will not do what
  a person probably meant (a job no single region can hold). A system's
  `check` returns them; `run` prints each once and the run records them.

Code decides on the class, never on an error's message text.
"""

from __future__ import annotations

from dataclasses import dataclass


class EmulatorInternalError(RuntimeError):
    """Something that should never happen inside the mechanism: a bug of ours."""


class ComponentBug(RuntimeError):
    """An actor or policy of an emulated system met a state its own logic rules out."""


class PolicyContractError(RuntimeError):
    """A policy's decision breaks the contract of its interface; the message names it."""


class ForeignAwait(RuntimeError):
    """An actor awaited something that is not a kernel command (e.g. `asyncio.sleep`)."""


class CallTimeout(TimeoutError):
    """A request made with `Actor.call` got no reply within its emulated timeout.

    The request may or may not have been processed (an indefinite outcome).
    """

    definite = False


class InputError(ValueError):
    """Bad user input: the source (file, argument, `file:line`), the key path below it, why.

    Raised where the problem is found, often before the source is known (a
    policy parameter, a system's own check): `within` adds what the caller
    knows. The CLI prints `source: path: message` and exits with 2.
    """

    def __init__(self, source: str, path: str, message: str) -> None:
        self.source = source
        self.path = path
        self.message = message
        where = ": ".join(part for part in (source, path) if part)
        super().__init__(f"{where}: {message}" if where else message)

    def within(self, source: str = "", prefix: str = "") -> InputError:
        """The same error with `source` filled in (if it had none) and `prefix.` before its path.

        An error that names a source of its own (another file: a CSV trace
        a scenario imports) stays as it is: its path is in that file.
        """
        if self.source and source and self.source != source:
            return self
        path = ".".join(part for part in (prefix, self.path) if part)
        return InputError(self.source or source, path, self.message)


@dataclass(frozen=True)
class InputWarning:
    """Input that is accepted but suspicious, at `path` below the scenario: `path: message`."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message
