"""The trace: every delivery, drop, timer, crash, fault, store write and decision.

Each event is encoded once, as the msgpack array `[t_us, kind, src, dst,
type, payload]` with deterministic key order (sets and dicts sorted); its seq
is its position. The trace hash covers those exact bytes for every event, so
two runs of one scenario and seed can be compared by one line, and the same
bytes go to the run database in chunks (an awaited insert per event would cap
the kernel near 45k events/s).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from typing import Any

import msgspec

from store.trace import TraceRow


def _enc_hook(obj: Any) -> Any:
    # int subclasses such as scenario Durations are plain integers on the wire.
    if isinstance(obj, int):
        return int(obj)
    raise NotImplementedError(f"cannot trace objects of type {type(obj).__name__}")


_ENCODER = msgspec.msgpack.Encoder(order="deterministic", enc_hook=_enc_hook)
_DECODER = msgspec.msgpack.Decoder()


# What a trace of level "decisions" leaves out: the message traffic (about
# three quarters of a MAST run's events). Decisions, store writes, faults,
# crashes, violations and the run's own events stay, so reports and `check`
# read such a run as any other; `replay` shows no deliveries and `resume`
# cannot continue its hash.
MESSAGE_KINDS = frozenset({"deliver", "timer", "timeout", "drop"})

# One decoded trace event, as online and offline checkers see it.
TraceEvent = TraceRow


def encode(obj: Any) -> bytes:
    return _ENCODER.encode(obj)


def decode(data: bytes) -> Any:
    return _DECODER.decode(data)


Observer = Callable[[TraceEvent], None]


def fault_key(payload: Any) -> Any:
    """What identifies a fault window across its start and end events (its target)."""
    if isinstance(payload, dict):
        for key in ("regions", "hosts", "actor", "rule", "node"):
            if key in payload:
                return payload[key]
    return payload


class Tracer:
    """Hashes every event, buffers rows for the store, feeds online observers.

    `writer` is a `store.trace.TraceWriter` (or None for hash-only runs, as in
    the untraced benchmark). Observers subscribe per event kind and receive the
    decoded payload, exactly what an offline checker reading the database gets.
    """

    def __init__(self, writer: Any = None) -> None:
        self.seq = 0
        self._hash = hashlib.blake2b(digest_size=16)
        self._writer = writer
        self._rows: list[bytes] | None = writer.records if writer is not None else None
        self._batch = writer.batch_size if writer is not None else 0
        # A sparse writer (`[trace] level = "decisions"`) stores the events of
        # `KEPT_SPARSE` kinds only, with their seqs; every event is hashed.
        self._seqs: list[int] | None = getattr(writer, "seqs", None)
        # Per kind: its observers, each with the event types it reads (None: all),
        # and the union of those types (None: some observer reads every type).
        self._observers: dict[str, list[tuple[Observer, frozenset[str] | None]]] = {}
        self._wanted: dict[str, frozenset[str] | None] = {}
        self.flushing: asyncio.Future[None] | None = None

    def subscribe(self, kind: str, observer: Observer, types: frozenset[str] | None = None) -> None:
        """Hand `observer` every event of `kind` (only those of `types`, if given)."""
        self._observers.setdefault(kind, []).append((observer, types))
        wanted = self._wanted.get(kind, frozenset())
        self._wanted[kind] = None if wanted is None or types is None else wanted | types

    def record(self, t_us: int, kind: str, src: str, dst: str, type_: str, payload: Any) -> int:
        self.seq += 1
        data = _ENCODER.encode((t_us, kind, src, dst, type_, payload))
        self._hash.update(data)
        if self._rows is not None:
            if self._seqs is None:
                self._rows.append(data)
            elif kind not in MESSAGE_KINDS:
                self._rows.append(data)
                self._seqs.append(self.seq)
        observers = self._observers.get(kind)
        if observers:
            wanted = self._wanted[kind]
            if wanted is None or type_ in wanted:
                event = TraceEvent(self.seq, t_us, kind, src, dst, type_, _DECODER.decode(data)[5])
                for observer, types in observers:
                    if types is None or type_ in types:
                        observer(event)
        return self.seq

    def needs_flush(self) -> bool:
        rows = self._rows
        return rows is not None and len(rows) >= self._batch and self.flushing is None

    def start_flush(self) -> None:
        """Write buffered rows in the background while the kernel goes on.

        The trace is not emulated state, so overlapping its writes with event
        processing cannot change the run; the kernel calls `settle` before any
        actor store call so statements never interleave with the flush.
        """
        self.flushing = asyncio.ensure_future(self._writer.flush(durable=False))

    async def settle(self) -> None:
        """Wait for a background flush (re-raising its error, if any)."""
        flushing = self.flushing
        if flushing is not None:
            try:
                await flushing
            finally:
                self.flushing = None

    def check_flush(self) -> None:
        """Surface a finished background flush (and its error) without waiting."""
        flushing = self.flushing
        if flushing is not None and flushing.done():
            self.flushing = None
            flushing.result()

    async def flush(self) -> None:
        """Everything buffered is in the database when this returns."""
        await self.settle()
        if self._writer is not None:
            await self._writer.flush()  # commits chunks a background flush left uncommitted

    def hexdigest(self) -> str:
        return self._hash.hexdigest()
