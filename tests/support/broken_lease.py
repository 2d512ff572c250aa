"""A deliberately broken lease candidate, shared by the tests that must see it caught.

Its store layer writes whatever epoch the candidate last believed it had
(no fencing), so a deposed leader's effects land: the lease-safety checker
must flag them. One module, imported under one name, so the actor kind is
registered once however many test files use it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors.demo.lease import Ack, LeaseCandidate
from emulator.registry import register_actor
from store import Store
from store.events import store_event


@store_event("lease.effect")
async def unfenced_effect(
    store: Store, role: str, holder: str, epoch: int, now_us: int, payload: bytes
) -> bool:
    """BROKEN: writes whatever epoch the caller claims (no fencing)."""
    await store.write(
        "INSERT INTO lease_effects (role, epoch, holder, t_us, payload) VALUES (?, ?, ?, ?, ?)",
        (role, epoch, holder, now_us, payload),
    )
    return True


class UnfencedCandidate(LeaseCandidate):
    """Serves requests with whatever epoch it last believed it had."""

    kind = "test-unfenced-candidate"

    async def serve(self, req: Any) -> None:  # type: ignore[override]
        payload = msgspec.msgpack.encode(req.op)
        role, epoch = self.params.role, self.epoch or 1
        ok = await self.store(unfenced_effect, role, self.address, epoch, self.now_us, payload)
        self.reply(Ack(req.op, self.epoch, ok))


register_actor(UnfencedCandidate)
