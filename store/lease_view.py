"""Leases as values: a role's current lease, its grants and fenced effects, and the
in-memory mirror of the committed `leases` table that the kernel reads.

Apart from the repository (`store/leases.py`) so that the connection
(`store/db.py`), which keeps a mirror, and the repository, which fills it,
both import these without importing each other.
"""

from __future__ import annotations

import msgspec


class Lease(msgspec.Struct, frozen=True):
    """The current lease of a role: `holder` leads it until `expires_at_us`."""

    role: str
    holder: str
    epoch: int
    expires_at_us: int

    def valid_at(self, now_us: int) -> bool:
        return now_us < self.expires_at_us


class LeaseGrant(msgspec.Struct, frozen=True):
    """One epoch of a role, granted to `holder` at `granted_at_us`."""

    role: str
    epoch: int
    holder: str
    granted_at_us: int


class LeaseEffect(msgspec.Struct, frozen=True):
    """A fenced write that was accepted under (role, epoch, holder)."""

    id: int
    role: str
    epoch: int
    holder: str
    t_us: int
    payload: bytes


class LeaseView:
    """In-memory mirror of the committed `leases` table of one Store.

    The kernel resolves role addresses through it at send time without
    awaiting the database (emulated service discovery). It is changed only
    by the functions of `store/leases.py`, and only after their transaction has
    committed, so it never shows a lease that a rollback undid — or, for a
    renewal, once its write is deferred (`Store.defer`): that write cannot
    fail and lands before the store's next statement.
    """

    def __init__(self) -> None:
        self._by_role: dict[str, Lease] = {}

    def get(self, role: str) -> Lease | None:
        return self._by_role.get(role)

    def leader_of(self, role: str, now_us: int) -> str | None:
        """The holder of `role`'s lease if it is valid at `now_us`, else None."""
        lease = self._by_role.get(role)
        if lease is None or now_us >= lease.expires_at_us:
            return None
        return lease.holder

    def roles(self) -> list[str]:
        return sorted(self._by_role)

    def apply_committed(self, lease: Lease) -> None:
        """Record a lease row that has been committed. For `store/leases.py` only."""
        self._by_role[lease.role] = lease

    def __len__(self) -> int:
        return len(self._by_role)

    def __repr__(self) -> str:
        return f"LeaseView({sorted(self._by_role.values(), key=lambda x: x.role)!r})"
