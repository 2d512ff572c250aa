"""Chrome trace event format (Perfetto, chrome://tracing): what every export shares.

`ChromeTrace` keeps the processes and threads an export names and turns
spans, instants and message arrows into trace events; `FaultWindows`
pairs the fault events of a trace into windows; `GenericExport` is the
export of a run whose system registered no exporter (the lease
demonstration): one process per address prefix (`demo/…`, `client/…`),
one thread per actor, fault windows (async spans: they overlap) on a
`faults` thread (tid 1).

A system's exporter (`emulator.registry.Exporter`) groups the same way
its world is built: MAST's (`actors/mast/export/`) has a process per
region and one for the global roles, and folds job agents into their
cluster's track.

Time: `ts` and `dur` are emulated microseconds, as the trace format's
unit is; `displayTimeUnit` only changes how the viewer prints them.
Spans that may overlap on one thread (jobs of a cluster, copies, fault
windows) cannot be complete (`X`) events there: the format requires the
slices of a thread to nest. `span` writes an `X` event when the thread is
free and otherwise a pair of async events (`b`/`e`, one id), which the
viewers stack on their own track (Perfetto: one per name in the process;
chrome://tracing: under the thread).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TextIO

import msgspec

from emulator.trace import TraceEvent, fault_key

_JSON = msgspec.json.Encoder(order="deterministic")
# The levels of `export --format chrome`: "messages" adds every message delivery
# (an arrow from sender to receiver) to what "decisions" shows.
LEVELS = ("messages", "decisions")
# Loss/duplicate/delay windows end by their rule id (or with a heal).
LINK_RULES = ("loss", "duplicate", "delay")


def jsonable(obj: Any) -> Any:
    """msgpack builtins → JSON-friendly (bytes become hex)."""
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    return obj


def message_type(event: TraceEvent) -> str:
    """The type of what a delivery carries (a reliable message's inner message)."""
    p = event.payload
    msg = p.get("msg") if isinstance(p, dict) else None
    if isinstance(msg, dict):
        if msg.get("type") == "Reliable" and isinstance(msg.get("msg"), dict):
            return str(msg["msg"].get("type", event.type))
        return str(msg.get("type", event.type))
    return event.type


def _message_of(event: TraceEvent) -> Any:
    """What a delivery carries (a reliable message's inner message)."""
    msg = event.payload.get("msg") if isinstance(event.payload, dict) else None
    if isinstance(msg, dict) and msg.get("type") == "Reliable":
        return msg.get("msg")
    return msg


class ChromeTrace:
    """Processes, threads and the trace events written so far, in the order they were made.

    Processes and threads are numbered in the order first named, so equal
    traces give equal files; `sort` puts a process or thread at that place
    in the viewer's list (the name's order otherwise).
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._pids: dict[str, int] = {}
        self._tids: dict[tuple[str, str], int] = {}
        self._sort: dict[tuple[str, str], int] = {}
        # tid → end of its last complete slice (later spans that start before it go async).
        self._busy_until: dict[int, int] = {}
        self._next_id = 0
        self._msg_slices: set[tuple[int, int, str]] = set()

    def process(self, name: str, sort: int | None = None) -> int:
        pid = self._pids.get(name)
        if pid is None:
            pid = self._pids[name] = len(self._pids) + 1
        if sort is not None:
            self._sort[(name, "")] = sort
        return pid

    def thread(self, process: str, name: str, sort: int | None = None) -> tuple[int, int]:
        """(pid, tid) of `name` in `process`; tids are unique across processes."""
        pid = self.process(process)
        tid = self._tids.get((process, name))
        if tid is None:
            tid = self._tids[(process, name)] = len(self._tids) + 1
        if sort is not None:
            self._sort[(process, name)] = sort
        return pid, tid

    def span(
        self,
        where: tuple[int, int],
        name: str,
        start_us: int,
        end_us: int,
        cat: str,
        args: dict[str, Any] | None = None,
    ) -> None:
        """A span from `start_us` to `end_us` (at least 1 µs), complete if its thread is free."""
        pid, tid = where
        dur = max(1, end_us - start_us)
        if start_us >= self._busy_until.get(tid, 0):
            self._busy_until[tid] = start_us + dur
            event: dict[str, Any] = {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": start_us,
                "dur": dur,
            }
            if args:
                event["args"] = args
            self.events.append(event)
            return
        self.async_span(where, name, start_us, start_us + dur, cat, args)

    def async_span(
        self,
        where: tuple[int, int],
        name: str,
        start_us: int,
        end_us: int,
        cat: str,
        args: dict[str, Any] | None = None,
    ) -> None:
        """A span that may overlap others on its thread: a `b`/`e` pair with an id of its own."""
        pid, tid = where
        self._next_id += 1
        begin: dict[str, Any] = {
            "ph": "b",
            "cat": cat,
            "name": name,
            "id": self._next_id,
            "pid": pid,
            "tid": tid,
            "ts": start_us,
        }
        if args:
            begin["args"] = args
        self.events.append(begin)
        self.events.append(
            {
                "ph": "e",
                "cat": cat,
                "name": name,
                "id": self._next_id,
                "pid": pid,
                "tid": tid,
                "ts": max(end_us, start_us + 1),
            }
        )

    def instant(
        self,
        where: tuple[int, int],
        name: str,
        t_us: int,
        cat: str,
        args: dict[str, Any] | None = None,
        scope: str = "t",
    ) -> None:
        """A mark at `t_us` on a thread (`scope` "g": a line across the whole trace)."""
        pid, tid = where
        event: dict[str, Any] = {
            "ph": "i",
            "cat": cat,
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": t_us,
            "s": scope,
        }
        if args:
            event["args"] = args
        self.events.append(event)

    def message(
        self,
        src: tuple[int, int],
        dst: tuple[int, int],
        name: str,
        sent_us: int,
        t_us: int,
        n: int,
        args: dict[str, Any] | None = None,
    ) -> None:
        """A delivery: a 1 µs slice at each end and an arrow (flow `n`) between them.

        A sender that sends one message to several receivers at one instant
        gets one slice, where every arrow starts (a third of a run's slices).
        `args` (the message, say) go on the receiver's slice.
        """
        for (pid, tid), ts, more in ((src, sent_us, None), (dst, t_us, args)):
            if (tid, ts, name) in self._msg_slices and not more:
                continue
            self._msg_slices.add((tid, ts, name))
            event = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": 1}
            if more:
                event["args"] = more
            self.events.append(event)
        self.events.append(
            {"ph": "s", "id": n, "cat": "msg", "name": name, "pid": src[0], "tid": src[1]}
            | {"ts": sent_us}
        )
        self.events.append(
            {"ph": "f", "bp": "e", "id": n, "cat": "msg", "name": name, "pid": dst[0]}
            | {"tid": dst[1], "ts": t_us}
        )

    def metadata(self) -> Iterator[dict[str, Any]]:
        """Names and places of every process and thread (`ph: "M"` events)."""
        for name, pid in self._pids.items():
            yield {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}
            sort = self._sort.get((name, ""), pid)
            yield {
                "ph": "M",
                "name": "process_sort_index",
                "pid": pid,
                "args": {"sort_index": sort},
            }
        for (process, name), tid in self._tids.items():
            pid = self._pids[process]
            yield {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": tid,
                "args": {"name": name},
            }
            sort = self._sort.get((process, name), tid)
            yield {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": pid,
                "tid": tid,
                "args": {"sort_index": sort},
            }


class FaultWindows:
    """Pairs a trace's fault events into windows: `feed` returns those it closes.

    A window is (start_us, end_us, action, label); a heal ends every
    partition and link rule still open, a pause ends when the actor is
    unfrozen or crashes, `finish` ends what is still open at the run's end.
    """

    def __init__(self) -> None:
        # (action, identity) → (start, label) of windows not yet ended.
        self._open: dict[tuple[str, str], tuple[int, str]] = {}
        self.instants: list[tuple[int, str, str]] = []

    def _close(self, key: tuple[str, str], t_us: int) -> list[tuple[int, int, str, str]]:
        opened = self._open.pop(key, None)
        return [] if opened is None else [(opened[0], t_us, key[0], opened[1])]

    def feed(self, e: TraceEvent) -> list[tuple[int, int, str, str]]:
        if e.kind in ("unpause", "crash"):
            # A pause has no `pause.end`: it ends when the kernel unfreezes the
            # actor (or when the actor crashes, which cancels the unfreeze).
            return self._close(("pause", _JSON.encode(e.dst).decode()), e.t_us)
        if e.kind != "fault":
            return []
        if "." in e.type:
            action, _, phase = e.type.rpartition(".")
            payload = e.payload
        else:  # the kernel's own `down`/`up` of a node (named in dst)
            action, payload = "down", {"node": e.dst}
            phase = "start" if e.type == "down" else "end"
        target = fault_key(payload)
        label = f"{action} {target if isinstance(target, str) else _JSON.encode(target).decode()}"
        ident = _JSON.encode(target).decode()
        if action in LINK_RULES:
            ident = _JSON.encode(payload.get("rule")).decode()
            between = payload.get("between")
            if phase == "start" and isinstance(between, list):
                label = f"{action} {'↔'.join(str(r) for r in between)}"
        if action == "restart":
            self.instants.append((e.t_us, action, label))
            return []
        if phase == "start":
            self._open[(action, ident)] = (e.t_us, label)
            return []
        if action in ("heal", "final-heal"):
            closed: list[tuple[int, int, str, str]] = []
            for key in sorted(self._open):
                if key[0] == "partition" or key[0] in LINK_RULES:
                    closed += self._close(key, e.t_us)
            return closed
        return self._close((action, ident), e.t_us)

    def finish(self, end_us: int) -> list[tuple[int, int, str, str]]:
        closed: list[tuple[int, int, str, str]] = []
        for key in sorted(self._open):
            closed += self._close(key, end_us)
        return closed


class GenericExport:
    """The export of a run of scenario-declared actors: grouped by address prefix."""

    def chrome_events(self, events: Iterable[TraceEvent], level: str) -> Iterator[dict[str, Any]]:
        trace = ChromeTrace()
        faults = trace.thread("run", "faults", sort=0)

        def where(address: str) -> tuple[int, int]:
            return trace.thread(address.split("/", 1)[0] or "run", address)

        windows = FaultWindows()
        end_t = 0
        for e in events:
            end_t = e.t_us
            for start, end, action, label in windows.feed(e):
                trace.async_span(faults, label, start, end, "fault", {"action": action})
            if e.kind == "deliver" and isinstance(e.payload, dict):
                sent = int(e.payload.get("sent_us", e.t_us))
                args = {"msg": jsonable(_message_of(e))}
                trace.message(where(e.src), where(e.dst), e.type, sent, e.t_us, e.seq, args)
            elif e.kind in ("crash", "restart", "start", "pause", "drop", "violation", "decision"):
                track = e.dst or e.src or "kernel"
                args = {"payload": jsonable(e.payload)}
                trace.instant(where(track), f"{e.kind} {e.type}".strip(), e.t_us, e.kind, args)
            yield from trace.events
            trace.events.clear()
        for start, end, action, label in windows.finish(end_t):
            trace.async_span(faults, label, start, end, "fault", {"action": action})
        for t_us, action, label in windows.instants:
            trace.instant(faults, label, t_us, "fault", {"action": action})
        yield from trace.events
        yield from trace.metadata()


def write_chrome(handle: TextIO, events: Iterable[dict[str, Any]]) -> None:
    """One JSON object {"traceEvents": [...], "displayTimeUnit": "ms"}, written as made."""
    handle.write('{"displayTimeUnit":"ms","traceEvents":[')
    first = True
    for event in events:
        if not first:
            handle.write(",\n")
        first = False
        handle.write(_JSON.encode(event).decode())
    handle.write("]}\n")
