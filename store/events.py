"""Marking repository calls whose effects are part of the emulated history.

A repository coroutine function decorated with `store_event("lease.acquire")`
carries the plain attribute `__store_event__ = "lease.acquire"`. When an actor
hands such a call to the kernel, the kernel records it in the trace with its
arguments and its result, so the checkers can see every committed protocol
write (who took which lease epoch, which fenced effect landed).

The decorator does not wrap the function: the call stays as fast as an
undecorated one, and `inspect.signature` still shows the real parameters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

ATTR = "__store_event__"


def store_event(name: str) -> Callable[[F], F]:
    """Tag a repository coroutine function with the trace event name `name`."""
    if not name:
        raise ValueError("store_event name must be a non-empty string")

    def mark(fn: F) -> F:
        setattr(fn, ATTR, name)
        return fn

    return mark


def event_name(fn: Callable[..., Any]) -> str | None:
    """Return the trace event name of a tagged repository function, else None."""
    return getattr(fn, ATTR, None)
