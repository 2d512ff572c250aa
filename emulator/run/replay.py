"""Reading a run back: step-by-step replay, JSON Lines and Chrome/Perfetto export
(`chrome.py`),
and the offline invariant check.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TextIO

import msgspec

from emulator.errors import InputError
from emulator.invariants import check_events, make_checkers
from emulator.liveness import judge_liveness, liveness_lines
from emulator.registry import EXPORTERS, Exporter, load_plugins
from emulator.run.chrome import GenericExport, write_chrome
from emulator.run.coverage import system_kind
from emulator.run.failures import actor_errors, failing_errors
from emulator.run.scenario import decode_scenario, parse_raw
from emulator.run.stepper import status_for, step_through
from emulator.sometimes import catalogue, coverage_json, coverage_lines, merge, tally
from emulator.trace import MESSAGE_KINDS, TraceEvent
from emulator.units import format_us
from store import Store
from store.runs import get_run_meta
from store.trace import iter_trace
from store.verify import verify_run

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
    """Open a whole run database (`store/verify.py`); StoreError says what is wrong if not."""
    verify_run(db)
    store = await Store.open(db)
    try:
        if await get_run_meta(store) is None:
            raise InputError(str(db), "", "no run metadata: not a finished or started run")
    except BaseException:
        await store.close()
        raise
    return store


async def trace_events(
    db: Path, t_from: int | None = None, t_to: int | None = None
) -> AsyncIterator[TraceEvent]:
    """A run database's trace as events, as the checkers see them (InputError if not a run)."""
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
    if step:
        # Keys, a status line and 100 columns: `emulator/run/stepper.py`.
        status = await status_for(db)
        return await step_through(
            trace_events(db, t_from, t_to), status, out=out, stdin=stdin, grep=grep
        )
    async for event in trace_events(db, t_from, t_to):
        line = format_event(event)
        if grep and grep not in line:
            continue
        out.write(line + "\n")
    return 0


# ---- export --------------------------------------------------------------
async def export(db: Path, *, fmt: str, out: Path | None = None, level: str = "messages") -> int:
    """Write the run's trace as JSON Lines, or as a Chrome trace grouped by its system.

    `level` (chrome only): "messages" draws every delivery as an arrow;
    "decisions" leaves the message traffic out, for a small file.
    """
    # Check the run database before creating (or truncating) the output file.
    store = await _open_run(db)
    try:
        meta = await get_run_meta(store)
    finally:
        await store.close()
    assert meta is not None  # _open_run checked
    try:
        handle = out.open("w", encoding="utf-8") if out else sys.stdout
    except OSError as error:
        raise InputError(str(out), "", f"cannot write: {error.strerror or error}") from None
    try:
        if fmt == "jsonl":
            async for event in trace_events(db):
                row = msgspec.structs.asdict(event)
                row["payload"] = _jsonable(row["payload"])
                handle.write(_JSON.encode(row).decode() + "\n")
        else:
            # Timers are how actors wake themselves: no export shows them.
            left_out = {"timer"} | (MESSAGE_KINDS if level == "decisions" else set())
            events = [e async for e in trace_events(db) if e.kind not in left_out]
            exporter = _exporter(meta.scenario_text, db)
            write_chrome(handle, exporter.chrome_events(events, level))
    finally:
        if out:
            handle.close()
    return 0


def _exporter(scenario_text: str, db: Path) -> Exporter:
    """The exporter of the run's system (registered by its plugin), else the generic one."""
    load_plugins()
    raw = parse_raw(scenario_text, f"{db} (stored scenario)")
    system = raw.get("system") if isinstance(raw, dict) else None
    kind = system.get("kind", "") if isinstance(system, dict) else ""
    found = EXPORTERS.get(kind) if isinstance(kind, str) else None
    return found if found is not None else GenericExport()


async def run_meta(db: Path) -> Any:
    """The run's metadata (scenario text, seed, status…); InputError if not a run."""
    store = await _open_run(db)
    try:
        return await get_run_meta(store)
    finally:
        await store.close()


# ---- offline check -----------------------------------------------------------
async def check(db: Path, out: TextIO | None = None, *, as_json: bool = False) -> int:
    """Re-run the scenario's invariant checkers over the recorded trace; 1 if any fails.

    Prints the violations, the actor errors, the liveness verdict and the
    sometimes properties the run reached (`emulator.sometimes`), as text or
    (`as_json`) as one JSON object: {"events", "checkers", "violations",
    "actor_errors", "liveness", "sometimes", "reproduce", "status"}.
    """
    out = out or sys.stdout
    store = await _open_run(db)
    try:
        meta = await get_run_meta(store)
    finally:
        await store.close()
    assert meta is not None  # _open_run checked
    scenario = decode_scenario(meta.scenario_text, f"{db} (stored scenario)")
    checkers = make_checkers(scenario.invariants.enabled)
    events = [e async for e in trace_events(db)]
    found = check_events(events, checkers)
    errors = actor_errors(events)
    failing = failing_errors(errors, scenario.invariants.tolerate_errors)
    reproduce = f"mastemu run {meta.scenario_name} --seed {meta.seed}"
    verdicts = judge_liveness(events, scenario.invariants.may_wait)
    system = system_kind(scenario.system)
    cover = merge([tally(events, system)], catalogue(system))
    failed = bool(found or failing)
    if as_json:
        result = {
            "sometimes": coverage_json(cover),
            "status": meta.status,
            "events": len(events),
            "checkers": [c.name for c in checkers],
            "violations": [
                {"seq": seq, "t_us": t_us, "invariant": invariant, "message": message}
                for seq, t_us, invariant, message in found
            ],
            "actor_errors": [
                {
                    "seq": e.seq,
                    "t_us": e.t_us,
                    "actor": e.address,
                    "error": e.error,
                    "message": e.message,
                    "tolerated": e not in failing,
                }
                for e in errors
            ],
            "liveness": [v.to_json() for v in verdicts],
            "reproduce": reproduce if failed else None,
        }
        out.write(json.dumps(result, sort_keys=True) + "\n")
        return 1 if failed else 0
    for seq, t_us, invariant, message in found:
        out.write(f"VIOLATION {invariant} at #{seq} ({format_us(t_us)}): {message}\n")
    for e in errors:
        what = "ACTOR ERROR" if e in failing else "actor error (tolerated)"
        out.write(
            f"{what} at #{e.seq} ({format_us(e.t_us)}): {e.address} died on {e.error}: "
            f"{e.message}\n"
        )
    if failed:
        out.write(f"reproduce: {reproduce}\n")
    names = ", ".join(c.name for c in checkers) or "none"
    out.write(
        f"checked {len(events)} events against {names}: {len(found)} violation(s), "
        f"{len(failing)} actor error(s)\n"
    )
    # Liveness is reported, not enforced: the exit code stays that of the invariants.
    for line in liveness_lines(verdicts):
        out.write(line + "\n")
    for line in coverage_lines(cover, 1, unit="run"):
        out.write(line + "\n")
    return 1 if failed else 0
