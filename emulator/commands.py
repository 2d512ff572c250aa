"""The only things an actor may await: commands the kernel understands.

An actor coroutine runs until it awaits one of these; the kernel receives the
command object from `coro.send(...)` and decides when to resume the actor and
with what value. Anything else an actor awaits (an asyncio future, a bare
`yield`) is a foreign await and crashes that actor.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any

import msgspec


class Envelope(msgspec.Struct, gc=False):
    """A message in flight: who sent it, to whom, and how replies are matched.

    `dst` is the address the sender used (a role or an actor); `to` is the actor
    it was delivered to. `corr` is set on requests made with `call`, and
    `reply_to` on their replies.
    """

    src: str
    dst: str
    to: str
    msg: Any
    sent_us: int
    corr: int = 0
    reply_to: int = 0


class Command:
    """Base of kernel commands; awaiting one hands it to the kernel."""

    __slots__ = ()

    def __await__(self) -> Generator[Command, Any, Any]:
        return (yield self)


class Receive(Command):
    """Park until a message is in the mailbox: any message (`reply_to` 0), the
    reply to one request (an int), or to any of several (a frozenset).

    With `timeout_us`, the actor is resumed with `TIMED_OUT` if nothing matching
    arrived in time.
    """

    __slots__ = ("reply_to", "timeout_us")

    def __init__(self, reply_to: int | frozenset[int] = 0, timeout_us: int | None = None) -> None:
        self.reply_to = reply_to
        self.timeout_us = timeout_us


class Sleep(Command):
    """Park for `delay_us` of emulated time; messages wait in the mailbox."""

    __slots__ = ("delay_us",)

    def __init__(self, delay_us: int) -> None:
        self.delay_us = delay_us


class StoreCall(Command):
    """Run a store repository coroutine while emulated time stands still."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args


RECEIVE_ANY = Receive()


class _TimedOut:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TIMED_OUT"


TIMED_OUT = _TimedOut()
