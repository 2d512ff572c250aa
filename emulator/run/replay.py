"""Reading a run back: step-by-step replay, JSON Lines and Chrome/Perfetto export,
and the offline invariant check.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import msgspec

from emulator.errors import InputError
from emulator.invariants import check_events, make_checkers
from emulator.kernel import ActorError
from emulator.liveness import judge_liveness, liveness_lines
from emulator.run.runner import failing_errors
from emulator.run.scenario import decode_scenario
from emulator.trace import TraceEvent, fault_key
from emulator.units import format_us
from store import Store, StoreError
from store.runs import get_run_meta
from store.trace import iter_trace

_JSON = msgspec.json.Encoder(order="deterministic")


def _jsonable(obj: Any) -> Any:
    """msgpack builtins → JSON-friendly (bytes become hex)."""
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj


async def _open_run(db: Path) -> Store:
    """Open a run database that holds a run (its metadata row), or raise InputError."""
    try:
        store = await Store.open(db)
    except StoreError as error:
        raise InputError(str(db), "", str(error)) from None
    try:
        if await get_run_meta(store) is None:
            raise InputError(str(db), "", "no run metadata: not a finished or started run")
    except BaseException:
        await store.close()
        raise
    return store


async def _events(
    db: Path, t_from: int | None = None, t_to: int | None = None
) -> AsyncIterator[TraceEvent]:
    store = await _open_run(db)
    try:
        async for row in iter_trace(store, t_from_us=t_from, t_to_us=t_to):
            yield TraceEvent(row.seq, row.t_us, row.kind, row.src, row.dst, row.type, row.payload)
    finally:
        await store.close()


def _message_of(event: TraceEvent) -> Any:
    """The interesting part of a payload: a delivery's message, a drop's reason and message."""
    p = event.payload
    if event.kind == "deliver" and isinstance(p, dict):
        msg = p.get("msg")
        if isinstance(msg, dict) and msg.get("type") == "Reliable":
            return msg.get("msg")  # what a reliable message carries
        return msg
    if event.kind == "drop" and isinstance(p, list) and len(p) == 2:
        inner = p[1].get("msg") if isinstance(p[1], dict) and "msg" in p[1] else p[1]
        return {"reason": p[0], "msg": inner}
    return p


def format_event(event: TraceEvent) -> str:
    """One readable line: time, kind, from → to, type, message."""
    arrow = f"{event.src or '·'} → {event.dst or '·'}"
    body = _message_of(event)
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k != "type"}
    text = "" if body is None else _JSON.encode(_jsonable(body)).decode()
    if len(text) > 200:
        text = text[:197] + "..."
    when = format_us(event.t_us)
    return f"{when:>16}  #{event.seq:<7} {event.kind:<9} {arrow:<44} {event.type:<18} {text}"


async def replay(
    db: Path,
    *,
    step: bool = False,
    t_from: int | None = None,
    t_to: int | None = None,
    grep: str | None = None,
    out: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    stdin = stdin or sys.stdin
    async for event in _events(db, t_from, t_to):
        line = format_event(event)
        if grep and grep not in line:
            continue
        out.write(line + "\n")
        if step:
            out.flush()
            if stdin.readline() == "":
                break
    return 0


# ---- export --------------------------------------------------------------
async def export(db: Path, *, fmt: str, out: Path | None = None) -> int:
    # Check the run database before creating (or truncating) the output file.
    await (await _open_run(db)).close()
    try:
        handle = out.open("w", encoding="utf-8") if out else sys.stdout
    except OSError as error:
        raise InputError(str(out), "", f"cannot write: {error.strerror or error}") from None
    try:
        if fmt == "jsonl":
            async for event in _events(db):
                row = msgspec.structs.asdict(event)
                row["payload"] = _jsonable(row["payload"])
                handle.write(_JSON.encode(row).decode() + "\n")
        else:
            events = [e async for e in _events(db)]
            json.dump({"traceEvents": list(chrome_events(events)), "displayTimeUnit": "ms"}, handle)
            handle.write("\n")
    finally:
        if out:
            handle.close()
    return 0


def chrome_events(events: list[TraceEvent]) -> Iterator[dict[str, Any]]:
    """Chrome trace event format (opens in Perfetto): one track per actor,
    deliveries as flow arrows from the sender's track to the receiver's,
    fault windows as slices on a `faults` track."""
    tids: dict[str, int] = {"faults": 1}

    def tid(name: str) -> int:
        if name not in tids:
            tids[name] = len(tids) + 1
        return tids[name]

    body: list[dict[str, Any]] = []
    # (action, identity) → (start, slice name) of fault windows not yet ended.
    open_faults: dict[tuple[str, str], tuple[int, str]] = {}
    end_t = events[-1].t_us if events else 0

    def close(key: tuple[str, str], t_us: int) -> None:
        opened = open_faults.pop(key, None)
        if opened is not None:
            t0, name = opened
            body.append(
                {"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": t0, "dur": max(1, t_us - t0)}
            )

    for e in events:
        if e.kind == "deliver" and isinstance(e.payload, dict):
            sent = int(e.payload.get("sent_us", e.t_us))
            args = {"msg": _jsonable(_message_of(e))}
            body.append(
                {
                    "ph": "X",
                    "name": f"send {e.type}",
                    "pid": 1,
                    "tid": tid(e.src),
                    "ts": sent,
                    "dur": 1,
                }
            )
            body.append(
                {
                    "ph": "s",
                    "id": e.seq,
                    "name": e.type,
                    "cat": "msg",
                    "pid": 1,
                    "tid": tid(e.src),
                    "ts": sent,
                }
            )
            body.append(
                {
                    "ph": "X",
                    "name": e.type,
                    "pid": 1,
                    "tid": tid(e.dst),
                    "ts": e.t_us,
                    "dur": 1,
                    "args": args,
                }
            )
            body.append(
                {
                    "ph": "f",
                    "bp": "e",
                    "id": e.seq,
                    "name": e.type,
                    "cat": "msg",
                    "pid": 1,
                    "tid": tid(e.dst),
                    "ts": e.t_us,
                }
            )
        elif e.kind == "fault":
            if "." in e.type:
                action, _, phase = e.type.rpartition(".")
                payload = e.payload
            else:  # the kernel's own `down`/`up` of a node (named in dst)
                action, payload = "down", {"node": e.dst}
                phase = "start" if e.type == "down" else "end"
            ident = _JSON.encode(fault_key(payload)).decode()
            name = f"{action} {ident}"
            if action in _LINK_RULES:
                # Loss/duplicate/delay windows are matched by their rule id.
                ident = _JSON.encode(payload.get("rule")).decode()
            if action == "restart":
                body.append({"ph": "i", "name": name, "pid": 1, "tid": 1, "ts": e.t_us, "s": "t"})
            elif phase == "start":
                open_faults[(action, ident)] = (e.t_us, name)
            elif action in ("heal", "final-heal"):
                for key in sorted(open_faults):
                    if key[0] == "partition" or key[0] in _LINK_RULES:
                        close(key, e.t_us)
            else:
                close((action, ident), e.t_us)
        elif e.kind in ("unpause", "crash"):
            # A pause has no `pause.end`: it ends when the kernel unfreezes the
            # actor (or when the actor crashes, which cancels the unfreeze).
            close(("pause", _JSON.encode(e.dst).decode()), e.t_us)
        if e.kind in ("crash", "restart", "start", "pause", "drop", "violation", "decision"):
            track = e.dst or e.src or "kernel"
            body.append(
                {
                    "ph": "i",
                    "name": f"{e.kind} {e.type}".strip(),
                    "pid": 1,
                    "tid": tid(track),
                    "ts": e.t_us,
                    "s": "t",
                    "args": {"payload": _jsonable(_message_of(e))},
                }
            )
    for key in sorted(open_faults):
        close(key, end_t)
    yield {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "mastemu"}}
    for name, number in sorted(tids.items(), key=lambda kv: kv[1]):
        yield {"ph": "M", "name": "thread_name", "pid": 1, "tid": number, "args": {"name": name}}
        yield {
            "ph": "M",
            "name": "thread_sort_index",
            "pid": 1,
            "tid": number,
            "args": {"sort_index": number},
        }
    yield from body


_LINK_RULES = ("loss", "duplicate", "delay")


async def run_meta(db: Path) -> Any:
    """The run's metadata (scenario text, seed, status…); InputError if not a run."""
    store = await _open_run(db)
    try:
        return await get_run_meta(store)
    finally:
        await store.close()


# ---- offline check -----------------------------------------------------------
async def check(db: Path, out: TextIO | None = None) -> int:
    """Re-run the scenario's invariant checkers over the recorded trace."""
    out = out or sys.stdout
    store = await _open_run(db)
    try:
        meta = await get_run_meta(store)
    finally:
        await store.close()
    assert meta is not None  # _open_run checked
    scenario = decode_scenario(meta.scenario_text, f"{db} (stored scenario)")
    checkers = make_checkers(scenario.invariants.enabled)
    events = [e async for e in _events(db)]
    found = check_events(events, checkers)
    for seq, t_us, invariant, message in found:
        out.write(f"VIOLATION {invariant} at #{seq} ({format_us(t_us)}): {message}\n")
    if found:
        out.write(f"reproduce: mastemu run {meta.scenario_name} --seed {meta.seed}\n")
    errors = actor_errors(events)
    failing = failing_errors(errors, scenario.invariants.tolerate_errors)
    for e in errors:
        what = "ACTOR ERROR" if e in failing else "actor error (tolerated)"
        out.write(
            f"{what} at #{e.seq} ({format_us(e.t_us)}): {e.address} died on {e.error}: "
            f"{e.message}\n"
        )
    if found or failing:
        out.write(f"reproduce: mastemu run {meta.scenario_name} --seed {meta.seed}\n")
    names = ", ".join(c.name for c in checkers) or "none"
    out.write(
        f"checked {len(events)} events against {names}: {len(found)} violation(s), "
        f"{len(failing)} actor error(s)\n"
    )
    # Liveness is reported, not enforced: the exit code stays that of the invariants.
    for line in liveness_lines(judge_liveness(events)):
        out.write(line + "\n")
    return 1 if found or failing else 0


def actor_errors(events: Iterable[TraceEvent]) -> list[ActorError]:
    """The actors that died on exceptions of their own, from a recorded trace."""
    return [
        ActorError(e.seq, e.t_us, e.dst, e.payload["error"], e.payload["message"])
        for e in events
        if e.kind == "actor-error"
    ]
