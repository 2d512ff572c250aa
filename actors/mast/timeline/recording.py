"""A run database read into the state fold: the state at T, or the whole run as player steps.

`state_at(db, t_us)` folds every event up to and including `t_us` (None:
the whole trace). `record(db)` folds the whole trace once and keeps, for
the player, one *step* per event worth a line in its log (decisions, store
writes that change what the page shows, faults, crashes, violations), each
with the changes of the rows the page shows since the step before, as
field-level patches, and a full snapshot of those rows every
`snapshot_every` steps: the page seeks to any step by taking the snapshot
before it and applying at most that many steps' patches.

What the player leaves out to stay small: message deliveries (three
quarters of a run's events; the bids and abstentions they carry are folded
into the next step), lease renewals (the holder and epoch stay; only the
expiry moves), auctions' openings and closings as steps of their own (the
decision that ends each auction is one), checkpoints, and the start and exit
of every actor (job agents: hundreds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from actors.mast.timeline.fold import StateFold
from actors.mast.timeline.state import SEP, SystemState
from emulator.errors import InputError
from emulator.run.events import named
from emulator.run.scenario import parse_raw
from store import Store
from store.runs import get_run_meta
from store.trace import TraceRow, iter_trace

SNAPSHOT_EVERY = 1500
# A log line's text is cut here: a ranking of the whole queue is one store write.
TEXT_MAX = 160
_JSON = msgspec.json.Encoder(order="deterministic")
# Kinds whose events are listed even when they change nothing the player shows.
_LISTED_KINDS = frozenset({"decision", "fault", "crash", "restart", "pause", "unpause", "gave-up"})
_LISTED_KINDS |= {"violation", "run", "actor-error", "slow-store", "hardware-replay"}
# Store writes that happen thousands of times a run and that the decisions around
# them already tell (an auction's opening and closing, lease renewals, checkpoints).
_HIDDEN_STORE = frozenset(
    {"auction.open", "auction.close", "kv.put", "kv.delete", "fleet.checkpoint", "tetris.pass"}
)
# Where a step sits for "next decision / fault / violation".
CATEGORY = {
    "decision": "d",
    "fault": "f",
    "crash": "f",
    "restart": "f",
    "pause": "f",
    "unpause": "f",
    "gave-up": "f",
    "violation": "v",
    "actor-error": "v",
    "store": "s",
}


async def new_fold(store: Store) -> StateFold:
    """A fold primed with what the setup facts may not say (membership of static clusters)."""
    names = {r[0] for r in await store.fetchall("SELECT name FROM sqlite_master")}
    machines: list[Any] = []
    clusters: list[Any] = []
    if "machines" in names:
        machines = [
            tuple(r)
            for r in await store.fetchall(
                "SELECT host, region, gpu_type, gpus, cluster FROM machines ORDER BY host"
            )
        ]
        clusters = [
            (cid, region, bool(ml))
            for cid, region, ml in await store.fetchall(
                "SELECT id, region, ml FROM clusters ORDER BY id"
            )
        ]
    # The RAS moves machines between clusters: the setup facts give where they
    # started, and the store's final membership only fills what they leave out.
    return StateFold(store_machines=machines, clusters=clusters)


async def state_at(db: Path, t_us: int | None = None) -> SystemState:
    """The state after every event at or before `t_us` (the whole run if None)."""
    async with Store.open_ctx(db) as store:
        fold = await new_fold(store)
        t_to = None if t_us is None else t_us + 1
        async for row in iter_trace(store, t_to_us=t_to, batch=64):
            fold.feed(row)
        fold.changes()
        if t_us is not None:
            fold.state.t_us = t_us
        return fold.state


@dataclass
class Recording:
    """A whole run as the player plays it (see the module docstring)."""

    meta: dict[str, Any]
    # One per step: [t_us, category, source, text].
    steps: list[list[Any]] = field(default_factory=list)
    # One per step: [[table, key, row or None], ...].
    deltas: list[list[list[Any]]] = field(default_factory=list)
    # (step index, tables) after that step; the first is the state before step 0.
    snapshots: list[tuple[int, dict[str, dict[str, Any]]]] = field(default_factory=list)
    # [start_us, end_us or None, label, kind] of every fault window.
    windows: list[list[Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "steps": self.steps,
            "deltas": self.deltas,
            "snapshots": [[i, tables] for i, tables in self.snapshots],
            "windows": self.windows,
            "sep": SEP,
        }


async def record(db: Path, snapshot_every: int = SNAPSHOT_EVERY) -> Recording:
    """Fold the whole run into player steps, deltas, snapshots and fault windows."""
    async with Store.open_ctx(db) as store:
        meta = await get_run_meta(store)
        fold = await new_fold(store)
        rec = Recording(meta={})
        view: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in sorted(_VIEW)}
        touched: dict[tuple[str, str], None] = {}
        open_windows: dict[tuple[str, str], int] = {}
        started = False
        async for row in iter_trace(store, batch=64):
            fold.feed(row)
            own = [(t, k) for t, k, _row in fold.changes() if t in _VIEW]
            touched.update(dict.fromkeys(own))
            if row.kind == "setup" or (row.kind == "run" and row.type == "start"):
                continue  # facts before the first event: the starting state, not steps
            if not started:
                started = True
                _patch(view, touched, fold.state)
                rec.snapshots.append((-1, _copy(view)))
            if not _listed(row):
                continue  # its changes go with the next step that is listed
            if row.kind == "store" and not any(_differs(view, t, k, fold.state) for t, k in own):
                continue  # a write the player cannot see (a job's state, a replica)
            delta = _patch(view, touched, fold.state)
            _note_windows(rec, open_windows, row.t_us, delta)
            rec.steps.append(
                [row.t_us, CATEGORY.get(row.kind, "o"), row.src or row.dst, _text(row)]
            )
            rec.deltas.append(delta)
            if len(rec.steps) % snapshot_every == 0:
                rec.snapshots.append((len(rec.steps) - 1, _copy(view)))
        if not started:
            _patch(view, touched, fold.state)
            rec.snapshots.append((-1, _copy(view)))
        end_us = fold.state.t_us
        if meta is not None and meta.end_t_us is not None:
            end_us = max(end_us, meta.end_t_us)
        for (table, k), start in open_windows.items():
            action, target = _split_window(table, k)
            rec.windows.append([start, None, f"{action} {target}".strip(), action])
        rec.windows.sort(key=lambda w: (w[0], w[2]))
        hosts = {
            host: [m["region"], m["gpu_type"], m["gpus"]]
            for host, m in sorted(fold.state.table("machines").items())
        }
        rec.meta = {
            "scenario": meta.scenario_name if meta else "",
            "description": _description(meta.scenario_text if meta else ""),
            "seed": meta.seed if meta else 0,
            "status": meta.status if meta else "",
            "end_us": end_us,
            "machines": hosts,
            "events": fold.state.seq,
        }
        return rec


# What the player shows of each table: a row's fields it reads, compacted.
def _workload(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "tenant": r["tenant"],
        "state": r["state"],
        "priority": r["priority"],
        # Three digits: the credit grows with age at every scan, and each change is a delta.
        "credit": float(f"{r['credit']:.3g}"),
        "within": r["within_quota"],
        "region": r["region"],
        "gpus": r["gpus"],
        "attempts": r["attempts"],
        "preemptions": r["preemptions"],
    }


_VIEW: dict[str, Any] = {
    "workloads": _workload,
    "allocations": lambda r: {"g": r["gpus"], "c": int(r["cpu"])},
    "leases": lambda r: {"holder": r["holder"], "epoch": r["epoch"]},
    "auctions": lambda r: {
        "w": r["workload_id"],
        "at": r["opened_us"],
        "out": r["outcome"],
        "win": r["winner"],
        "bids": r["bids"],
        "why": r["reasons"],
    },
    "machines": lambda r: {"cluster": r["cluster"], "healthy": r["healthy"]},
    "clusters": lambda r: {"region": r["region"], "ml": r["ml"]},
    "actors": lambda r: {"state": r["state"]},
    "down": lambda r: {"since_us": r["since_us"]},
    "faults": lambda r: r,
    "flows": lambda r: r,
    "copies": lambda r: {k: v for k, v in r.items() if k not in ("created_us", "finished_us")},
    "counters": lambda r: r,
}


def _patch(
    view: dict[str, dict[str, dict[str, Any]]],
    touched: dict[tuple[str, str], None],
    state: SystemState,
) -> list[list[Any]]:
    """Bring `view` up to `state` for the touched rows; the changes as [table, key, fields].

    `fields` holds only what changed in a row the view had (the page merges
    it in), the whole row for a new one, and None for a row gone.
    """
    delta: list[list[Any]] = []
    for table, k in touched:
        full = state.tables.get(table, {}).get(k)
        old = view[table].get(k)
        if full is None:
            if old is not None:
                del view[table][k]
                delta.append([table, k, None])
            continue
        new = _VIEW[table](full)
        if old is None:
            view[table][k] = new
            delta.append([table, k, new])
        elif new != old:
            view[table][k] = new
            delta.append([table, k, {f: v for f, v in new.items() if old.get(f) != v}])
    touched.clear()
    return delta


def _differs(
    view: dict[str, dict[str, dict[str, Any]]], table: str, k: str, state: SystemState
) -> bool:
    full = state.tables.get(table, {}).get(k)
    old = view[table].get(k)
    if full is None:
        return old is not None
    return old is None or _VIEW[table](full) != old


def _copy(view: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    # Rows are replaced, never mutated, so copying each table's dict is enough.
    return {name: dict(rows) for name, rows in view.items()}


def _listed(row: TraceRow) -> bool:
    """Whether an event is a step of its own (else its changes join the next one's)."""
    if row.kind == "store":
        return row.type not in _HIDDEN_STORE
    return row.kind in _LISTED_KINDS


def _note_windows(
    rec: Recording, open_windows: dict[tuple[str, str], int], t_us: int, delta: list[Any]
) -> None:
    for table, k, fields in delta:
        if table not in ("faults", "down"):
            continue
        if fields is not None and (table, k) not in open_windows:
            open_windows[(table, k)] = t_us
        elif fields is None and (table, k) in open_windows:
            start = open_windows.pop((table, k))
            action, target = _split_window(table, k)
            rec.windows.append([start, t_us, f"{action} {target}".strip(), action])


def _split_window(table: str, k: str) -> tuple[str, str]:
    if table == "down":
        return "down", k
    action, _, target = k.partition(SEP)
    return action, _target_text(target)


def _target_text(target: str) -> str:
    """A fault's target as a short text: `["a","b"]` as `a–b`, a quoted name bare."""
    try:
        value = msgspec.json.decode(target)
    except msgspec.DecodeError:
        return target
    if isinstance(value, list):
        return "–".join(str(v) for v in value)
    if value is None:
        return ""
    return str(value)


def _text(row: TraceRow) -> str:
    """One readable line for the player's log."""
    kind, p = row.kind, row.payload
    if kind == "store":
        fields = dict(named(row).fields)
        for noise in ("fence", "now_us", "from_states"):
            fields.pop(noise, None)
        if fields.get("result") in (True, None):
            fields.pop("result", None)
        if row.type == "queue.rank":
            fields["ranking"] = f"{len(fields.get('ranking') or [])} workloads"
        elif row.type == "queue.submit":
            fields["spec"] = (fields.get("spec") or {}).get("id")
        text = f"{row.type} " + " ".join(f"{k}={_short(v)}" for k, v in fields.items())
    elif kind == "deliver":
        msg = p.get("msg", {}) if isinstance(p, dict) else {}
        body = " ".join(f"{k}={_short(v)}" for k, v in sorted(msg.items()) if k != "type")
        text = f"{row.src} → {row.dst}: {msg.get('type', '')} {body}"
    elif kind == "fault":
        text = f"fault {row.type} {row.dst} {_short(p) if p is not None else ''}"
    elif kind in ("crash", "restart", "pause", "unpause", "gave-up"):
        text = f"{kind} {row.dst} {_short(p) if p is not None else ''}"
    elif kind == "violation":
        text = f"VIOLATION {row.type}: {p}"
    elif isinstance(p, dict):
        text = f"{row.type} " + " ".join(f"{k}={_short(v)}" for k, v in sorted(p.items()))
    else:
        text = f"{kind} {row.type} {_short(p) if p is not None else ''}"
    text = " ".join(text.split())
    return text if len(text) <= TEXT_MAX else text[: TEXT_MAX - 1] + "…"


def _short(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:.4g}"
    text = _JSON.encode(value).decode()
    return text if len(text) <= 80 else text[:79] + "…"


def _description(text: str) -> str:
    """The stored scenario's `description` ("" if it has none or does not parse)."""
    try:
        raw = parse_raw(text, "stored scenario")
    except InputError:
        return ""
    value = raw.get("description") if isinstance(raw, dict) else None
    return value if isinstance(value, str) else ""
