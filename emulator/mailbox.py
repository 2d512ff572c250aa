"""An actor's mailbox: arrival order, and selective receive of replies in constant time.

An actor either takes the next message whatever it is (`Receive(reply_to=0)`)
or waits for the reply to a request it made (`reply_to` a correlation id, or
a set of them while several calls are out). The first scan of the whole
mailbox for a matching reply cost O(mailbox) per receive, and a busy actor's
mailbox grows with the run (messages wait while it is inside a call), so a
day of `meta-day` spent most of its time there.

Here every message keeps its arrival number; replies are also indexed by the
correlation they answer. A reply is taken from its index and left in the
arrival queue marked as taken (skipped when the queue reaches it), so both
kinds of receive cost O(1) amortised (O(k) for a set of k correlations).
What must stay true: either receive returns exactly the message a scan of
the arrival order would (the earliest live match), so traces do not change.
"""

from __future__ import annotations

from collections import deque

from emulator.commands import Envelope


class Mailbox:
    """Messages waiting for one actor incarnation, in arrival order."""

    __slots__ = ("_next", "_queue", "_replies", "_taken", "live")

    def __init__(self) -> None:
        self._queue: deque[tuple[int, Envelope]] = deque()
        self._replies: dict[int, deque[tuple[int, Envelope]]] = {}
        self._taken: set[int] = set()
        self._next = 0
        self.live = 0  # messages waiting (a plain attribute: the kernel reads it per event)

    def __len__(self) -> int:
        return self.live

    def __bool__(self) -> bool:
        return self.live > 0

    def append(self, env: Envelope) -> None:
        entry = (self._next, env)
        self._next += 1
        self.live += 1
        self._queue.append(entry)
        reply_to = env.reply_to
        if reply_to:
            waiting = self._replies.get(reply_to)
            if waiting is None:
                self._replies[reply_to] = deque((entry,))
            else:
                waiting.append(entry)

    def clear(self) -> None:
        self._queue.clear()
        self._replies.clear()
        self._taken.clear()
        self.live = 0

    def take(self, reply_to: int | frozenset[int]) -> Envelope | None:
        """The earliest message matching `reply_to` (0: any message), removed; None if none."""
        if not self.live:
            return None
        if reply_to == 0:
            return self._take_first()
        if type(reply_to) is frozenset:
            best: tuple[int, Envelope] | None = None
            best_key = 0
            for corr in reply_to:
                waiting = self._replies.get(corr)
                if waiting and (best is None or waiting[0][0] < best[0]):
                    best, best_key = waiting[0], corr
            if best is None:
                return None
            return self._take_reply(best_key)
        if reply_to in self._replies:
            return self._take_reply(reply_to)  # type: ignore[arg-type]
        return None

    def _take_first(self) -> Envelope:
        queue, taken = self._queue, self._taken
        while True:
            n, env = queue.popleft()
            if n in taken:
                taken.discard(n)
                continue
            self.live -= 1
            reply_to = env.reply_to
            if reply_to:
                waiting = self._replies[reply_to]
                waiting.popleft()  # the earliest of its correlation: this very message
                if not waiting:
                    del self._replies[reply_to]
            return env

    def _take_reply(self, corr: int) -> Envelope:
        waiting = self._replies[corr]
        n, env = waiting.popleft()
        if not waiting:
            del self._replies[corr]
        self.live -= 1
        if self._queue and self._queue[0][0] == n:
            self._queue.popleft()
        else:
            self._taken.add(n)
        return env
