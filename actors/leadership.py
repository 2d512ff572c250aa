"""Leadership through a lease in the store, for the replicated MAST roles.

An actor holding `role`'s lease is its leader: role addresses (`gms`,
`rms/us-east`, `cm/us-east/c0`) route to it, and its writes are fenced by the
lease's epoch. It renews every `renew_us`; whoever finds the lease expired
takes it with the next epoch. Each new epoch is recorded as a `lease.leader`
decision, which the lease-safety checker judges against the store.
"""

from __future__ import annotations

import msgspec

from emulator.actor import Actor, on
from emulator.scenario import Duration
from store import leases
from store.queue import Fence


class LeaseTiming(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How long a lease lasts and how often its holder renews it.

    Every renewal is a store write (about 0.1–0.2 ms of wall time each), so
    the renewal period sets a floor on how fast a run can go.
    """

    ttl: Duration = Duration(30_000_000)
    renew_every: Duration = Duration(10_000_000)

    def __post_init__(self) -> None:
        if not 0 < self.renew_every < self.ttl:
            raise ValueError("renew_every must be positive and shorter than ttl")


class RenewLease(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: renew (or try to take) the role's lease."""


class LeaseHolder(Actor):
    """Base of actors that lead a role; subclasses set `self.role` before `acquire`.

    Their params carry `lease: LeaseTiming`.
    """

    role: str
    fence: Fence | None = None
    lease_until_us: int = 0  # when the lease behind `fence` expires

    @property
    def timing(self) -> LeaseTiming:
        return getattr(self.params, "lease", None) or LeaseTiming()

    async def acquire(self) -> Fence | None:
        """Take or renew the lease; returns the fence to write under, or None."""
        lease = await self.store(
            leases.acquire, self.role, self.address, self.now_us, self.timing.ttl
        )
        previous = self.fence
        if lease is None:
            if previous is not None:
                self.decision("lease.lost", {"role": self.role, "epoch": previous.epoch})
            self.fence = None
            return None
        if previous is None or previous.epoch != lease.epoch:
            self.decision("lease.leader", {"role": self.role, "epoch": lease.epoch})
        self.fence = Fence(self.role, self.address, lease.epoch)
        self.lease_until_us = lease.expires_at_us
        return self.fence

    async def current_fence(self) -> Fence | None:
        """The fence to write under now: the lease held, renewed first if it has lapsed.

        An actor paused (a GC pause, a stopped VM) past its lease's expiry
        handles the messages that waited meanwhile before its renewal timer
        fires. Its writes under the lapsed epoch would be refused by the
        fence; so it takes the lease again first, as that timer would have
        (a new epoch, unless another candidate took the role meanwhile).
        """
        if self.fence is not None and self.now_us < self.lease_until_us:
            return self.fence
        return await self.acquire()

    async def lead(self, role: str) -> None:
        """Start contending for `role`: take the lease if free and keep renewing it."""
        self.role = role
        self.fence = None
        await self.acquire()
        self.keep_renewing()

    def keep_renewing(self) -> None:
        self.set_timer(self.timing.renew_every, RenewLease())

    @on(RenewLease)
    async def renew(self, _: RenewLease) -> None:
        self.keep_renewing()
        await self.acquire()
