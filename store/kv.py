"""Typed key-value state that actors recover from after a crash.

Models the part of MAST's shared replicated database that a component keeps
for itself (an RMS's cached plans, a migration's progress, ...): values are
msgspec Structs, stored msgpack-encoded under `(namespace, key)`. A value put
by an awaited call is durable once the call returns, so a restarted actor's
`on_start` reads back exactly what was committed before the crash.

Encoding is deterministic (`order="deterministic"`: dict keys and sets
sorted) so that equal values give equal bytes, and equal traces.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from store.db import Store
from store.events import store_event

T = TypeVar("T")

_ENCODER = msgspec.msgpack.Encoder(order="deterministic")


@store_event("kv.put")
async def put(store: Store, namespace: str, key: str, value: msgspec.Struct) -> None:
    """Store `value` under `(namespace, key)`, replacing any previous value."""
    await store.write(
        "INSERT INTO kv (namespace, key, value) VALUES (?, ?, ?) "
        "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value",
        (namespace, key, _ENCODER.encode(value)),
    )


async def get(store: Store, namespace: str, key: str, type_: type[T]) -> T | None:
    """The value under `(namespace, key)` decoded as `type_`, or None if absent."""
    row = await store.fetchone(
        "SELECT value FROM kv WHERE namespace = ? AND key = ?", (namespace, key)
    )
    if row is None:
        return None
    return msgspec.msgpack.decode(row[0], type=type_)


@store_event("kv.delete")
async def delete(store: Store, namespace: str, key: str) -> bool:
    """Remove `(namespace, key)`; returns whether it existed."""
    changed = await store.write("DELETE FROM kv WHERE namespace = ? AND key = ?", (namespace, key))
    return changed == 1


async def items(store: Store, namespace: str, type_: type[T]) -> list[tuple[str, T]]:
    """Every `(key, value)` of `namespace`, sorted by key (for rebuilding after a crash)."""
    rows = await store.fetchall(
        "SELECT key, value FROM kv WHERE namespace = ? ORDER BY key", (namespace,)
    )
    return [(key, msgspec.msgpack.decode(blob, type=type_)) for key, blob in rows]
