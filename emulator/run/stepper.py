"""`mastemu replay RUN.db --step`: walk a recorded run in the terminal, one stop at a time.

At each stop it prints the event (one line of at most 100 columns), a
status line from the run's system (`emulator.registry.Viewer.status_line`:
leaders, queue, GPUs held; none for a run whose system has no viewer) and a
prompt. Keys: Enter or `n` the next event, `d` the next decision, `f` the
next fault (faults, crashes, restarts, pauses), `v` the next violation
(or actor error), `q` quit. In a terminal a key acts at once; from a pipe
each line is one key (an empty line is Enter), and the end of input stops.
The events skipped on the way to the next stop still feed the status line.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import msgspec

from emulator.errors import InputError
from emulator.trace import TraceEvent
from emulator.units import format_us

WIDTH_MAX = 100
PROMPT = "⏎ next · d decision · f fault · v violation · q quit › "
_JSON = msgspec.json.Encoder(order="deterministic")

_FAULT_KINDS = frozenset({"fault", "crash", "restart", "pause", "unpause", "gave-up"})
# What each key stops at (Enter: any event).
_STOPS: dict[str, Callable[[TraceEvent], bool]] = {
    "n": lambda e: True,
    "d": lambda e: e.kind == "decision",
    "f": lambda e: e.kind in _FAULT_KINDS,
    "v": lambda e: e.kind in ("violation", "actor-error"),
}


def short_line(event: TraceEvent) -> str:
    """The event in at most 100 columns: time, kind, who, type, the start of its payload."""
    who = event.src or "·"
    if event.dst and event.dst != event.src:
        who += f"→{event.dst}"
    payload = event.payload
    if event.kind == "deliver" and isinstance(payload, dict):
        payload = payload.get("msg")
    text = "" if payload is None else _JSON.encode(_plain(payload)).decode()
    line = f"{format_us(event.t_us):>13} {event.kind:<8} {who[:36]:<36} {event.type} {text}"
    line = line.rstrip()
    return line if len(line) <= WIDTH_MAX else line[: WIDTH_MAX - 1] + "…"


def _plain(obj: Any) -> Any:
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


async def status_for(db: Path) -> Any:
    """The status line of the run's system, or None if its system registered no viewer."""
    from emulator.registry import VIEWERS, load_plugins
    from emulator.run.scenario import parse_raw
    from store import Store
    from store.runs import get_run_meta

    load_plugins()
    async with Store.open_ctx(db) as store:
        meta = await get_run_meta(store)
    if meta is None:
        raise InputError(str(db), "", "no run metadata: not a finished or started run")
    raw = parse_raw(meta.scenario_text, f"{db} (stored scenario)")
    system = raw.get("system") if isinstance(raw, dict) else None
    kind = system.get("kind", "") if isinstance(system, dict) else ""
    viewer = VIEWERS.get(kind) if isinstance(kind, str) else None
    return None if viewer is None else await viewer.status_line(db)


def keys(stdin: TextIO) -> Iterator[str]:
    """The keys typed: single keys at once in a terminal, else one per line; ends at EOF."""
    if stdin.isatty():
        yield from _tty_keys(stdin)
        return
    for line in stdin:
        yield line.strip()[:1].lower() or "n"


def _tty_keys(stdin: TextIO) -> Iterator[str]:
    import termios
    import tty

    fd = stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        # cbreak, not raw: Ctrl-C still interrupts (exit 130) and output is unchanged.
        tty.setcbreak(fd)
        while True:
            ch = stdin.read(1)
            if ch == "" or ch == "\x04":  # EOF, Ctrl-D
                return
            yield "n" if ch in "\r\n " else ch.lower()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def step_through(
    events: AsyncIterator[TraceEvent],
    status: Any,
    *,
    out: TextIO | None = None,
    stdin: TextIO | None = None,
    grep: str | None = None,
) -> int:
    """Stop at the first event, then where each key says; 0 at the end, at `q` or at EOF."""
    out = out or sys.stdout
    typed = keys(stdin or sys.stdin)
    stop: Callable[[TraceEvent], bool] = _STOPS["n"]
    async for event in events:
        if status is not None:
            status.feed(event)
        line = short_line(event)
        if not stop(event) or (grep and grep not in line):
            continue
        out.write(line + "\n")
        said = status.status() if status is not None else ""
        if said.strip():
            out.write(said + "\n")
        out.write(PROMPT)
        out.flush()
        key = _next_key(typed, out)
        if key in ("", "q"):
            out.write("\n")
            return 0
        stop = _STOPS[key]
    out.write("\n(end of the run)\n")
    return 0


def _next_key(typed: Iterator[str], out: TextIO) -> str:
    """The next key that means something ("" at EOF); others are answered with the keys."""
    for key in typed:
        if key in _STOPS or key == "q":
            out.write("\n")  # the key is not echoed: end the prompt's line
            return key
        out.write(f"\n(unknown key {key!r}) {PROMPT}")
        out.flush()
    return ""
