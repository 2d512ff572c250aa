"""Run metadata and recorded invariant violations.

`run_meta` holds one row describing the run: what scenario and seed were run,
by which mastemu version, in which clock mode, and how it ended (status,
trace hash, final emulated time, counts). It is written as `running` at the
start, so a database left by a killed process says so, and is finished by
`finish_run` at the end. `violations` lists invariant violations with their
trace position.
"""

from __future__ import annotations

from typing import Literal, get_args

import msgspec

from store.db import Store, StoreError
from store.migrations import RUN_STATUSES

RunStatus = Literal["running", "ok", "violated", "error", "interrupted", "failed"]
assert get_args(RunStatus) == RUN_STATUSES, "RunStatus and the schema CHECK must agree"


class RunMeta(msgspec.Struct, kw_only=True):
    """What was run and how it ended (the single `run_meta` row)."""

    scenario_name: str
    scenario_text: str = ""
    seed: int
    version: str = ""
    mode: str = "virtual"
    status: RunStatus = "running"
    trace_hash: str | None = None
    end_t_us: int | None = None
    events: int = 0
    violations: int = 0
    # Actors that died on an exception of their own (status "error" unless tolerated).
    actor_errors: int = 0
    # The emulated time the run was asked to stop at (`--until`), if earlier than its end.
    until_us: int | None = None


class Violation(msgspec.Struct, frozen=True):
    """An invariant violation, at trace position `seq` (None if not from the trace)."""

    id: int
    seq: int | None
    t_us: int
    invariant: str
    message: str


_META_COLUMNS = tuple(RunMeta.__struct_fields__)


async def put_run_meta(store: Store, meta: RunMeta) -> None:
    """Write the run metadata row, replacing any previous one (e.g. on resume)."""
    _check_status(meta.status)
    cols = ", ".join(_META_COLUMNS)
    marks = ", ".join("?" for _ in _META_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in _META_COLUMNS)
    await store.write(
        f"INSERT INTO run_meta (id, {cols}) VALUES (1, {marks}) "
        f"ON CONFLICT (id) DO UPDATE SET {updates}",
        tuple(getattr(meta, c) for c in _META_COLUMNS),
    )


async def get_run_meta(store: Store) -> RunMeta | None:
    row = await store.fetchone(f"SELECT {', '.join(_META_COLUMNS)} FROM run_meta WHERE id = 1")
    if row is None:
        return None
    return RunMeta(**dict(zip(_META_COLUMNS, row, strict=True)))


async def finish_run(
    store: Store,
    *,
    status: RunStatus,
    trace_hash: str | None,
    end_t_us: int,
    events: int,
    violations: int,
    actor_errors: int = 0,
) -> None:
    """Record how the run ended. Raises StoreError if no run metadata exists."""
    _check_status(status)
    changed = await store.write(
        "UPDATE run_meta SET status = ?, trace_hash = ?, end_t_us = ?, events = ?, "
        "violations = ?, actor_errors = ? WHERE id = 1",
        (status, trace_hash, end_t_us, events, violations, actor_errors),
    )
    if changed != 1:
        raise StoreError(f"{store.path}: finish_run before put_run_meta (no run_meta row)")


async def record_violation(
    store: Store, seq: int | None, t_us: int, invariant: str, message: str
) -> int:
    """Append an invariant violation; returns its id."""
    return await store.insert(
        "INSERT INTO violations (seq, t_us, invariant, message) VALUES (?, ?, ?, ?)",
        (seq, t_us, invariant, message),
    )


async def clear_violations(store: Store) -> None:
    """Forget recorded violations (a resumed run records them all again at its end)."""
    await store.write("DELETE FROM violations")


async def list_violations(store: Store) -> list[Violation]:
    """All recorded violations in the order they were recorded."""
    rows = await store.fetchall(
        "SELECT id, seq, t_us, invariant, message FROM violations ORDER BY id"
    )
    return [Violation(*r) for r in rows]


def _check_status(status: str) -> None:
    if status not in RUN_STATUSES:
        raise ValueError(f"run status must be one of {RUN_STATUSES}, got {status!r}")
