"""Leadership through a lease in the store, for the replicated MAST roles.

An actor holding `role`'s lease is its leader: role addresses (`gms`,
`rms/us-east`, `cm/us-east/c0`) route to it, and its writes are fenced by the
lease's epoch. It renews every `renew_every`; whoever finds the lease expired
takes it with the next epoch. Each new epoch is recorded as a `lease.leader`
decision, which the lease-safety checker judges against the store.

A role may have several instances (`gms/0`, `gms/1`): one leads, the others
follow. A follower keeps no leader state; it tries to take the lease every
`renew_every`, and so takes over at most `ttl + renew_every` after its
leader's last renewal. An instance that starts leading an epoch it did not
lead before rebuilds its state (`on_lead`) from the store and the level below,
exactly as a restarted instance does, and only then acts: a follower, or a
deposed leader whose memory predates another leader's epoch, never acts on
what it remembers. Takeovers happen only between handlers (at start and at
the renewal timer), never in the middle of one.

Reports sent with `send_reliably` to a role may reach an instance that no
longer leads it (routing happened before the lease moved). Such an instance
leaves them unacknowledged, so their sender resends them to the role, which
by then resolves to the leader.
"""

from __future__ import annotations

import msgspec

from emulator.actor import Actor, on
from emulator.commands import Envelope
from emulator.errors import InputError
from emulator.units import MS, at_least
from store import leases
from store.mast.queue import Fence

# Lower bounds: every renewal is an event and a store write, so a period near
# zero would keep a run at one instant.
RenewPeriod = at_least(100 * MS)
LeaseTtl = at_least(200 * MS)


class LeaseTiming(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How long a lease lasts and how often its holder renews it.

    Every renewal is a store write (about 0.1–0.2 ms of wall time each), so
    the renewal period sets a floor on how fast a run can go. Followers try
    as often, but ask the store only when no live leader is known.
    """

    ttl: LeaseTtl = 30_000_000
    # At least 100 ms: every renewal is an event and a store write.
    renew_every: RenewPeriod = 10_000_000

    def __post_init__(self) -> None:
        if not self.renew_every < self.ttl:
            raise InputError("", "renew_every", "must be shorter than ttl")


class RenewLease(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: renew (or try to take) the role's lease."""


class LeaseHolder(Actor):
    """Base of actors that lead a role; subclasses call `lead(role)` in `on_start`.

    Their params carry `lease: LeaseTiming`. A subclass puts the rebuild of
    its leader state in `on_lead`, and checks `leading` (or the fence that
    `current_fence` returns) before acting as the leader.
    """

    role: str
    fence: Fence | None = None
    lease_until_us: int = 0  # when the lease behind `fence` expires
    # The epoch whose leader state this incarnation holds (rebuilt by `on_lead`,
    # or kept across a lapse that nobody else led in).
    ready_epoch: int | None = None
    resumed: bool = False  # `ready_epoch` moved on with the state kept: `on_resume` is due
    _started: bool = False

    @property
    def timing(self) -> LeaseTiming:
        return getattr(self.params, "lease", None) or LeaseTiming()

    @property
    def leading(self) -> bool:
        """This instance holds a valid lease and the leader state of its epoch."""
        fence = self.fence
        return (
            fence is not None
            and self.ready_epoch == fence.epoch
            and self.now_us < self.lease_until_us
        )

    async def on_lead(self) -> None:
        """Rebuild the leader state for a newly led epoch (from the store and below)."""

    async def on_resume(self) -> None:
        """A new epoch led with the last one's state kept (nobody led in between).

        What this role decided stands, but others may have acted on it meanwhile
        (the GMS gives a dark region's workloads up): a subclass checks that here.
        """

    async def acquire(self) -> Fence | None:
        """Take or renew the lease; returns the fence it holds, or None.

        A newly taken epoch counts as led (`leading`) only if it directly
        follows one this incarnation led (nobody led in between, so what it
        remembers is current); otherwise `take_lead` rebuilds first.
        """
        holder = self.leader_of(self.role)
        if holder is not None and holder != self.address:
            # Another instance holds a valid lease: the store would refuse.
            # Not asking keeps a follower's polling to a timer.
            lease = None
        else:
            # An incarnation that never held the lease is a new term even if its
            # predecessor's lease is still valid (`leases.acquire`'s `fresh`).
            # (Passed only when set: the trace of every other acquire stays as it was.)
            fresh = self.restarted and self.fence is None and self.ready_epoch is None
            args = (self.role, self.address, self.now_us, self.timing.ttl) + (
                (True,) if fresh else ()
            )
            lease = await self.store(leases.acquire, *args)
        previous = self.fence
        if lease is None:
            if previous is not None:
                self.decision("lease.lost", {"role": self.role, "epoch": previous.epoch})
            self.fence = None
            return None
        if previous is None or previous.epoch != lease.epoch:
            self.decision("lease.leader", {"role": self.role, "epoch": lease.epoch})
            if self.ready_epoch is not None and lease.epoch == self.ready_epoch + 1:
                self.ready_epoch = lease.epoch
                self.resumed = True
        self.fence = Fence(self.role, self.address, lease.epoch)
        self.lease_until_us = lease.expires_at_us
        return self.fence

    async def take_lead(self) -> Fence | None:
        """Between handlers: take or renew the lease, rebuilding first for a new epoch.

        Returns the fence if this instance leads, else None.
        """
        fence = await self.acquire()
        if fence is None:
            return None
        if self.ready_epoch != fence.epoch:
            self.ready_epoch = fence.epoch
            self.resumed = False
            await self.on_lead()
            if self._started:
                # A follower taking over ignored the hardware news meanwhile
                # (a restarted watcher is told by the kernel when it starts).
                self.replay_hardware()
        elif self.resumed:
            # Kept across a lapse (`acquire`), maybe inside a handler: checked here,
            # between handlers, at the latest one renewal period later.
            self.resumed = False
            await self.on_resume()
        return fence if self.leading else None

    async def current_fence(self) -> Fence | None:
        """Inside a handler: the fence to write under now, or None if not leading.

        An actor paused (a GC pause, a stopped VM) past its lease's expiry
        handles the messages that waited meanwhile before its renewal timer
        fires. Its writes under the lapsed epoch would be refused by the
        fence; so it takes the lease again first, as that timer would have
        (a new epoch, unless another candidate took the role meanwhile). A
        follower never takes the lease here: that waits for its renewal timer.
        """
        if self.leading:
            return self.fence
        if self.fence is None:
            return None
        await self.acquire()
        return self.fence if self.leading else None

    async def renew_if_due(self) -> Fence | None:
        """Inside a long handler: renew if the renewal timer would have fired by now.

        A handler that waits in emulated time (the GMS awaiting bids, auction
        after auction, for a whole scan) does not see its `RenewLease` timer,
        which waits in the mailbox until the handler returns: it calls this
        between waits, or its lease lapses mid-handler and the role changes
        epoch without any fault. Returns the fence if still leading.
        """
        timing = self.timing
        renewed_at_us = self.lease_until_us - timing.ttl
        if self.fence is None or self.now_us >= renewed_at_us + timing.renew_every:
            await self.acquire()
        return self.fence if self.leading else None

    async def lead(self, role: str) -> None:
        """Start contending for `role`: take the lease if free and keep trying or renewing."""
        self.role = role
        self.fence = None
        await self.take_lead()
        self._started = True
        self.keep_renewing()

    def keep_renewing(self) -> None:
        self.set_timer(self.timing.renew_every, RenewLease())

    @on(RenewLease)
    async def renew(self, _: RenewLease) -> None:
        self.keep_renewing()
        await self.take_lead()

    def refuse_reliable(self, env: Envelope) -> str | None:
        # A reliable report routed here before the lease moved: unacknowledged,
        # it is resent to the role and reaches the leader (module docstring).
        return None if self.leading else "not-leader"
