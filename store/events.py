"""Marking repository calls whose effects are part of the emulated history.

A repository coroutine function decorated with `store_event("lease.acquire")`
carries the plain attribute `__store_event__ = "lease.acquire"`. When an actor
hands such a call to the kernel, the kernel records it in the trace with its
arguments and its result, so the checkers can see every committed protocol
write (who took which lease epoch, which fenced effect landed).

The trace keeps the arguments as the positional tuple the actor passed (the
bytes, and so the trace hash, stay what they always were). To read them back
by name, the decorator also records the function's parameter names after
`store`, once per event name, in `PARAMETERS`; `emulator.run.events.named`
pairs them with the recorded arguments. What must stay true for that: every
function tagged with one name has the same parameter names (a deliberately
broken stand-in of a repository function takes its signature too), every
parameter can be passed by position, and none is called `result` (the
named view's name for the return value).

The decorator does not wrap the function: the call stays as fast as an
undecorated one, and `inspect.signature` still shows the real parameters.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

ATTR = "__store_event__"

# Event name -> the tagged function's parameter names after `store`, in call order.
# Filled as tagged functions are defined, so a name is known once its module is imported.
PARAMETERS: dict[str, tuple[str, ...]] = {}

# The named view of a store event keeps the return value under this name.
RESULT = "result"

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def store_event(name: str) -> Callable[[F], F]:
    """Tag a repository coroutine function with the trace event name `name`.

    Raises ValueError if the function's parameters cannot be named in the
    trace (see the module docstring), or if `name` already tags a function
    with other parameter names.
    """
    if not name:
        raise ValueError("store_event name must be a non-empty string")

    def mark(fn: F) -> F:
        params = _parameter_names(name, fn)
        known = PARAMETERS.setdefault(name, params)
        if known != params:
            raise ValueError(
                f"store event {name!r} already names its arguments {list(known)}; "
                f"{fn.__qualname__} takes {list(params)}"
            )
        setattr(fn, ATTR, name)
        return fn

    return mark


def _parameter_names(name: str, fn: Callable[..., Any]) -> tuple[str, ...]:
    """The names of `fn`'s parameters after its first (the store)."""
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].kind not in _POSITIONAL:
        raise ValueError(f"store event {name!r}: {fn.__qualname__} must take the store first")
    rest = params[1:]
    for p in rest:
        # The kernel records the call's positional arguments only.
        if p.kind not in _POSITIONAL:
            raise ValueError(
                f"store event {name!r}: parameter {p.name!r} of {fn.__qualname__} "
                "must be positional (the trace records arguments by position)"
            )
        if p.name == RESULT:
            raise ValueError(
                f"store event {name!r}: parameter name {RESULT!r} is reserved for the return value"
            )
    return tuple(p.name for p in rest)


def event_name(fn: Callable[..., Any]) -> str | None:
    """Return the trace event name of a tagged repository function, else None."""
    return getattr(fn, ATTR, None)


def parameter_names(name: str) -> tuple[str, ...] | None:
    """The parameter names (after `store`) of the functions tagged `name`, if one is defined."""
    return PARAMETERS.get(name)
