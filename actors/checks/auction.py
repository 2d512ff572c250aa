"""MAST's invariant 4, `auction`: one winner per auction, one region per workload.

An auction has at most one winner, and a workload is awarded only while it
is queued (so it is never dispatched to two regions at once) and only by the
GMS leader whose lease is valid then (the epoch its award names is the
current one, not expired: the store's fence enforces it, and a write that
forgets it lets a deposed leader award); the GMS gives
a region's work up only while none of the region's roles (`rms/R`,
`cm/R/...`) has led since the time it says the region went dark; with
pipelined auctions, an RMS's open bids (`rms.hold`) without victims never
promise one machine beyond its capacity.
"""

from __future__ import annotations

from typing import Any

from actors.checks.base import StoreChecker
from emulator.invariants import Leases
from emulator.trace import TraceEvent
from store.mast.queue import QUEUED
from store.mast.records import GPUS_PER_MACHINE


class AuctionChecker(StoreChecker):
    name = "auction"
    kinds = ("store", "decision", "setup", "crash")
    _routes = {
        "queue.award": "on_award",
        "lease.acquire": "on_lease",
        "lease.release": "on_lease_release",
    }
    tracks_queue = True
    other_types = {
        "decision": frozenset({"rms.hold", "rms.unhold", "lease.leader", "gms.region-lost"})
    }

    def __init__(self) -> None:
        super().__init__()
        self.winner: dict[int, str] = {}
        # Each role's current lease: an award is valid only under the GMS's, and a
        # region's work may be given up only once its RMS and CMs (`cm/REGION/...`)
        # have all been without one.
        self.leases = Leases()
        # Pipelined auctions: each RMS instance's open holds (`rms.hold` until
        # its `rms.unhold`), auction → (GPUs per host, CPU hosts). They live in
        # the instance's memory: gone when it crashes or starts a new leadership.
        self.capacity: dict[str, int] = {}
        self.holds: dict[str, dict[int, tuple[dict[str, int], set[str]]]] = {}

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "setup":
            if event.type == "machines":
                self.capacity = {h: int(v[2]) for h, v in event.payload.items() if v[2]}
            return []
        if event.kind == "crash":
            self.holds.pop(event.dst, None)
            return []
        if event.kind == "decision":
            if event.type == "rms.hold":
                return self._hold(event.src, event.payload)
            if event.type == "rms.unhold":
                self.holds.get(event.src, {}).pop(event.payload["auction"], None)
                return []
            if event.type == "lease.leader":
                self.holds.pop(event.src, None)
            return self._region_lost(event) if event.type == "gms.region-lost" else []
        return super().observe(event)

    def _hold(self, rms: str, hold: dict[str, Any]) -> list[str]:
        """No machine promised twice: an RMS's open holds fit its machines together.

        A preempting plan counts on its victims' machines, which another hold
        may count on too; the CM refuses the second plan, so those are not judged.
        """
        holds = self.holds.setdefault(rms, {})
        gpus: dict[str, int] = {}
        for host, n in hold["gpus"]:
            gpus[host] = gpus.get(host, 0) + n
        cpus = set(hold["cpu_hosts"])
        out = []
        if not hold["victims"]:
            for auction, (other_gpus, other_cpus) in sorted(holds.items()):
                for host in sorted(gpus.keys() & other_gpus.keys()):
                    total = gpus[host] + other_gpus[host]
                    if total > self.capacity.get(host, GPUS_PER_MACHINE):
                        out.append(
                            f"{host}: {total} GPUs promised to auctions {auction} and "
                            f"{hold['auction']} at once"
                        )
                for host in sorted(cpus & other_cpus):
                    out.append(
                        f"CPU machine {host} promised to auctions {auction} and {hold['auction']}"
                    )
            holds[hold["auction"]] = (gpus, cpus)
        return out

    def on_lease(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.leases.granted(result)
        return []

    def on_lease_release(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        self.leases.released(args, result)
        return []

    def _region_lost(self, event: TraceEvent) -> list[str]:
        """A region given up while one of its roles led may run its work twice."""
        region, since = event.payload["region"], event.payload["dark_since_us"]
        led = sorted(
            role
            for role, (_, _, until) in self.leases.current.items()
            if (role == f"rms/{region}" or role.startswith(f"cm/{region}/")) and until > since
        )
        if since > event.t_us or led:
            return [f"{region} given up as dark since {since} µs but {led} led after that"]
        return []

    def on_award(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if not result:
            return []
        workload, auction, region = args[2], args[3], args[4]
        out = []
        first = self.winner.setdefault(auction, region)
        if first != region:
            out.append(f"auction {auction} has two winners: {first} and {region}")
        state = self.queue.get(workload)
        if state not in QUEUED:
            out.append(f"{workload} awarded to {region} while {state}")
        fence, now_us = args[0], args[1]
        role, epoch, holder = fence["role"], fence["epoch"], fence["holder"]
        if self.leases.validity(role, holder, epoch, now_us) != "valid":
            current = self.leases.current.get(role)
            held = (
                f"epoch {current[0]} of {current[1]}, valid until {current[2]} µs"
                if current
                else "never granted"
            )
            out.append(
                f"{workload} awarded to {region} by {holder} in epoch {epoch} of {role} at "
                f"{now_us} µs, when the lease was {held}"
            )
        return out
