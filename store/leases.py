"""Leader election by leases with epochs, and fenced writes.

Models MAST's leader election (docs/design.md §5): each role ("gms", "rms/us-east",
...) has at most one lease row `(holder, epoch, expires_at_us)`. The holder
renews it before it expires; once it has expired, any candidate may take it
with `epoch + 1`. A leader tags its writes with its epoch, and a fenced write
lands only if that epoch is still the current, unexpired lease of its holder,
so a deposed leader's late write has no effect.

What must stay true (invariant family 1):
- at most one holder per (role, epoch): `lease_history` has one row per epoch
  ever granted, keyed by (role, epoch);
- epochs of a role only grow;
- an accepted effect carries the latest granted epoch of its role, by its
  holder, at a time before that lease expired.

A lease is valid at time t iff `t < expires_at_us`. Times are the caller's
emulated clock (integer microseconds); the store never reads a clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.events import store_event
from store.lease_view import Lease, LeaseEffect, LeaseGrant

# The seeded bug of `acquire` (`actors/mast/zoo.py`).
RENEWS_AT_EXPIRY = "lease-renews-at-expiry"

if TYPE_CHECKING:
    from store.connection import Connection
    from store.db import Store


@store_event("lease.acquire")
async def acquire(
    store: Store, role: str, candidate: str, now_us: int, ttl_us: int, fresh: bool = False
) -> Lease | None:
    """Take or renew the lease of `role` for `candidate` until `now_us + ttl_us`.

    - no lease, or the lease expired at `now_us`: a new epoch (previous + 1,
      1 for a role never granted) goes to `candidate`;
    - `candidate` holds a valid lease: renewed, same epoch; unless `fresh` (a
      restarted candidate, which remembers nothing of what it led): a new epoch;
    - someone else holds a valid lease: None, nothing changes.
    """
    if ttl_us <= 0:
        raise ValueError(f"lease ttl_us must be positive, got {ttl_us}")
    expires_at_us = now_us + ttl_us
    # Fast paths, no statement of their own: renewals and refusals are nearly all
    # of a run's lease calls.
    # The view mirrors every write of the run's only connection, so it is exact.
    known = store.leases.get(role)
    # Seeded bug (`RENEWS_AT_EXPIRY`): the lease counts as valid at the instant it
    # expires (`<=` for `<`). A holder renewing then moves the view on, while the
    # deferred UPDATE below, which wants the row unexpired, matches nothing: the
    # database keeps the lease expired, so every fenced write of the holder's is
    # refused, and the view tells every follower the holder leads, so none takes over.
    if (
        known is not None
        and not fresh
        and (
            now_us < known.expires_at_us
            or (now_us == known.expires_at_us and store.bug(RENEWS_AT_EXPIRY))
        )
    ):
        if known.holder != candidate:
            return None
        # A renewal of a valid lease by its holder: the row matches the view,
        # so the UPDATE cannot miss. It is deferred (the store writes it before
        # its next statement, with the other renewals queued by then: one
        # round trip for them all) and the view moves on at once.
        store.defer(
            "UPDATE leases SET expires_at_us = ? "
            "WHERE role = ? AND epoch = ? AND holder = ? AND expires_at_us > ?",
            (expires_at_us, role, known.epoch, candidate, now_us),
        )
        lease = Lease(role, candidate, known.epoch, expires_at_us)
        store.leases.apply_committed(lease)
        return lease
    async with store.transaction() as conn:
        rows = await conn.execute_fetchall(
            "SELECT holder, epoch, expires_at_us FROM leases WHERE role = ?", (role,)
        )
        row = next(iter(rows), None)
        if row is None:
            lease = await _grant_next_epoch(conn, role, candidate, None, now_us, expires_at_us)
        else:
            holder, epoch, old_expires_at_us = row
            if now_us >= old_expires_at_us:
                lease = await _grant_next_epoch(conn, role, candidate, epoch, now_us, expires_at_us)
            elif holder == candidate and fresh:
                # Its own lease, from before it restarted: a new term, so that what
                # it numbers within an epoch (a GMS's scans) starts over unseen.
                lease = await _grant_next_epoch(
                    conn, role, candidate, epoch, now_us, expires_at_us, holder=candidate
                )
            elif holder == candidate:
                lease = await _renew(conn, role, candidate, epoch, now_us, expires_at_us)
            else:
                lease = None
    if lease is not None:
        store.leases.apply_committed(lease)
    return lease


async def _grant_next_epoch(
    conn: Connection,
    role: str,
    candidate: str,
    old_epoch: int | None,
    now_us: int,
    expires_at_us: int,
    holder: str | None = None,
) -> Lease | None:
    # Inside acquire's transaction: the lease is absent or expired at now_us (or
    # held by `holder`, taking it over).
    if old_epoch is None:
        # Epochs continue the history even if a lease row was ever removed.
        rows = await conn.execute_fetchall(
            "SELECT coalesce(max(epoch), 0) FROM lease_history WHERE role = ?", (role,)
        )
        epoch = next(iter(rows))[0] + 1
        cur = await conn.execute(
            "INSERT INTO leases (role, holder, epoch, expires_at_us) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (role) DO NOTHING",
            (role, candidate, epoch, expires_at_us),
        )
    else:
        epoch = old_epoch + 1
        # Compare-and-set on the epoch we read: a writer that got in between
        # makes this match nothing instead of creating a second holder.
        cur = await conn.execute(
            "UPDATE leases SET holder = ?, epoch = ?, expires_at_us = ? "
            "WHERE role = ? AND epoch = ? AND (expires_at_us <= ? OR holder = ?)",
            (candidate, epoch, expires_at_us, role, old_epoch, now_us, holder),
        )
    if cur.rowcount != 1:
        return None
    # The primary key (role, epoch) refuses a second holder of one epoch.
    await conn.execute(
        "INSERT INTO lease_history (role, epoch, holder, granted_at_us) VALUES (?, ?, ?, ?)",
        (role, epoch, candidate, now_us),
    )
    return Lease(role, candidate, epoch, expires_at_us)


async def _renew(
    conn: Connection,
    role: str,
    holder: str,
    epoch: int,
    now_us: int,
    expires_at_us: int,
) -> Lease | None:
    # Inside acquire's transaction: `holder` has a valid lease at `epoch`.
    cur = await conn.execute(
        "UPDATE leases SET expires_at_us = ? "
        "WHERE role = ? AND epoch = ? AND holder = ? AND expires_at_us > ?",
        (expires_at_us, role, epoch, holder, now_us),
    )
    if cur.rowcount != 1:
        return None
    return Lease(role, holder, epoch, expires_at_us)


@store_event("lease.release")
async def release(store: Store, role: str, holder: str, epoch: int, now_us: int) -> bool:
    """End `holder`'s lease of `role` at `now_us` if it still holds `epoch`.

    Returns False (nothing changed) if the lease has moved on to another
    holder or epoch. A lease that already expired keeps its earlier expiry.
    """
    async with store.transaction() as conn:
        cur = await conn.execute(
            "UPDATE leases SET expires_at_us = min(expires_at_us, ?) "
            "WHERE role = ? AND holder = ? AND epoch = ?",
            (now_us, role, holder, epoch),
        )
        if cur.rowcount != 1:
            return False
        rows = await conn.execute_fetchall(
            "SELECT expires_at_us FROM leases WHERE role = ?", (role,)
        )
        expires_at_us = next(iter(rows))[0]
    store.leases.apply_committed(Lease(role, holder, epoch, expires_at_us))
    return True


@store_event("lease.effect")
async def fenced_effect(
    store: Store, role: str, holder: str, epoch: int, now_us: int, payload: bytes
) -> bool:
    """Record `payload` as an effect of `holder`'s leadership of `role` at `epoch`.

    The write lands only if, at `now_us`, the lease of `role` is still held by
    `holder` at `epoch` and has not expired; returns whether it landed. This
    is the fenced (conditional) write: a deposed leader's late write, a stale
    epoch or an expired lease has no effect.
    """
    # One statement: the check and the insert cannot be separated by anything.
    changed = await store.write(
        "INSERT INTO lease_effects (role, epoch, holder, t_us, payload) "
        "SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS ("
        "  SELECT 1 FROM leases"
        "  WHERE role = ?1 AND epoch = ?2 AND holder = ?3 AND expires_at_us > ?4)",
        (role, epoch, holder, now_us, payload),
    )
    return changed == 1


async def get(store: Store, role: str) -> Lease | None:
    """The committed lease row of `role`, read from the database."""
    row = await store.fetchone(
        "SELECT role, holder, epoch, expires_at_us FROM leases WHERE role = ?", (role,)
    )
    return None if row is None else Lease(*row)


async def history(store: Store, role: str | None = None) -> list[LeaseGrant]:
    """Every epoch ever granted (of `role`, or of all roles), by role then epoch."""
    sql = "SELECT role, epoch, holder, granted_at_us FROM lease_history"
    params: tuple[str, ...] = ()
    if role is not None:
        sql += " WHERE role = ?"
        params = (role,)
    rows = await store.fetchall(sql + " ORDER BY role, epoch", params)
    return [LeaseGrant(*r) for r in rows]


async def effects(store: Store, role: str | None = None) -> list[LeaseEffect]:
    """Every accepted fenced effect (of `role`, or of all roles), in write order."""
    sql = "SELECT id, role, epoch, holder, t_us, payload FROM lease_effects"
    params: tuple[str, ...] = ()
    if role is not None:
        sql += " WHERE role = ?"
        params = (role,)
    rows = await store.fetchall(sql + " ORDER BY id", params)
    return [LeaseEffect(*r) for r in rows]
