"""The `leader-lease` demonstration: two candidates contend for one role.

Candidates renew a lease in the store every `renew_every`; the holder serves
the role. A client in a third region sends requests to the role address, so
every request is routed to whoever holds the lease when it is sent. The
leader applies each request as a fenced effect carrying the epoch it believes
it holds: after a pause or a partition a deposed leader's late write is
rejected by the store, and the trace shows it.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from emulator.actor import Actor, on
from emulator.errors import CallTimeout, InputError
from emulator.units import MS, at_least
from store import kv, leases


class CandidateParams(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A candidate for `role`: it renews its lease of `lease_ttl` every `renew_every`,
    which must be shorter than `lease_ttl` (else the lease lapses between renewals)."""

    role: Annotated[str, Meta(min_length=1, max_length=200)]
    peers: Annotated[list[str], Meta(max_length=64)] = []
    lease_ttl: at_least(200 * MS) = 10_000_000
    # At least 100 ms: every renewal is an event and a store write.
    renew_every: at_least(100 * MS) = 3_000_000

    def __post_init__(self) -> None:
        if not self.renew_every < self.lease_ttl:
            raise InputError("", "renew_every", "must be shorter than lease_ttl")


class ClientParams(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Sends a request to `role`'s leader every `every`, each waiting `timeout` for its answer."""

    role: Annotated[str, Meta(min_length=1, max_length=200)]
    every: at_least(100 * MS) = 30_000_000
    timeout: at_least(MS) = 2_000_000


class Tick(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: time to renew (candidate) or to send a request (client)."""


class Request(msgspec.Struct, frozen=True, tag=True):
    """Client → role leader: apply operation `op` and acknowledge."""

    op: int


class Ack(msgspec.Struct, frozen=True, tag=True):
    """Leader → client: `applied` is False when the store fenced the write off."""

    op: int
    epoch: int
    applied: bool


class Heartbeat(msgspec.Struct, frozen=True, tag=True):
    """Leader → peers: informational; followers note when they last heard it."""

    epoch: int


class CandidateState(msgspec.Struct):
    """What a candidate keeps across crashes."""

    served: int = 0
    rejected: int = 0


class LeaseCandidate(Actor):
    """Contends for `params.role` and serves requests while it holds it."""

    kind = "lease-candidate"
    Params = CandidateParams
    params: CandidateParams

    async def on_start(self) -> None:
        saved = await self.store(kv.get, "lease-candidate", self.address, CandidateState)
        self.state = saved or CandidateState()
        self.epoch = 0  # the epoch this actor believes it leads; 0 = follower
        self.last_heartbeat_us = -1
        await self._renew()
        self.set_timer(self.params.renew_every, Tick())

    @on(Tick)
    async def tick(self, _: Tick) -> None:
        self.set_timer(self.params.renew_every, Tick())
        await self._renew()

    async def _renew(self) -> None:
        p = self.params
        lease = await self.store(leases.acquire, p.role, self.address, self.now_us, p.lease_ttl)
        if lease is None:
            if self.epoch:
                self.decision("lease.lost", {"role": p.role, "epoch": self.epoch})
            self.epoch = 0
            return
        if lease.epoch != self.epoch:
            self.epoch = lease.epoch
            self.decision("lease.leader", {"role": p.role, "epoch": lease.epoch})
        for peer in p.peers:
            self.send(peer, Heartbeat(self.epoch))

    @on(Heartbeat)
    def heard(self, _: Heartbeat) -> None:
        self.last_heartbeat_us = self.now_us

    @on(Request)
    async def serve(self, req: Request) -> None:
        payload = msgspec.msgpack.encode(req.op)
        applied = False
        if self.epoch:
            applied = await self.store(
                leases.fenced_effect,
                self.params.role,
                self.address,
                self.epoch,
                self.now_us,
                payload,
            )
        if applied:
            self.state.served += 1
        else:
            self.state.rejected += 1
        await self.store(kv.put, "lease-candidate", self.address, self.state)
        self.reply(Ack(req.op, self.epoch, applied))


class LeaseClient(Actor):
    """Sends a numbered request to the role every `every` and counts outcomes."""

    kind = "lease-client"
    Params = ClientParams
    params: ClientParams

    async def on_start(self) -> None:
        self.op = 0
        self.acked = 0
        self.timeouts = 0
        self.set_timer(self.params.every, Tick())

    @on(Tick)
    async def tick(self, _: Tick) -> None:
        self.set_timer(self.params.every, Tick())
        self.op += 1
        sent_us = self.now_us
        try:
            ack = await self.call(self.params.role, Request(self.op), self.params.timeout)
        except CallTimeout:
            self.timeouts += 1
            self.metric("request_outcome", 0.0, outcome="timeout")
            return
        if ack.applied:
            self.acked += 1
        self.metric("request_latency_ms", (self.now_us - sent_us) / 1000, applied=ack.applied)
        self.metric("request_outcome", 1.0 if ack.applied else 0.0, outcome="ack")
