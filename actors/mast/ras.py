"""RAS, the Resource Allowance System of one region: which dynamic cluster each machine is in.

Modelled (MAST §3.1): every `interval` (and at each scheduled spec change)
the region's RAS leader reads the region's machines, their health and their
current clusters from the store, takes each cluster's intended machines per
hardware kind (its spec at that instant), and solves the assignment MIP of
`actors.policies.mast.ras`. It records the pass (decision `ras.pass`, metrics),
commits the new membership in one fenced store write, and only then tells the
CM of every ML cluster that gained or lost machines (`MembershipChanged`,
protocol in `actors.common.membership`). Unhealthy machines are in no cluster.

What must stay true:
- RAS reads machines, health and specs only: never jobs, queues or
  allocations, so MAST's scheduling never feeds back into membership;
- the same inputs give the same membership; the MIP's wall time is a metric
  and never steers the run (unless `time_limit_s` is hit: then the solver's
  best point so far is used, which depends on the machine — keep it large);
- a deposed leader's pass changes nothing (the write is fenced by `ras/REGION`).

Cluster specs. An ML cluster's intended machines per kind start as `share`
× what the static split (`actors.mast.world.static_clusters`) gave it, rounded
down. With `share = 1` every machine is intended: without the buffer the
first pass (everything healthy) moves nothing; with it, the buffer cannot
hold, and the first pass moves machines between clusters only to narrow the
buffer gap as far as it can (and reports it short). With a share that leaves
room (about (F − 1)/F or less with F equal fault domains), the first pass
spreads every cluster over fault domains, after which losing any one fault
domain leaves every cluster its intended capacity. `non_ml` adds a non-ML
cluster `REGION/nonml` (no CM, no ML jobs) with these intended machines to
every region (or to `non_ml_regions`). `changes` set kinds of one cluster's
spec from a point in time on; kinds not named keep their counts (0 drops
one). The clusters table's `intended` holds each cluster's total.

Health: the CMs mark their own machines down and up; RAS is a hardware
watcher too and marks the region's other machines (in no cluster, in a
non-ML cluster, or of a CM that is down), which no CM watches.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from actors.common.leadership import LeaseHolder, LeaseTiming
from actors.common.membership import MembershipChanged
from actors.mast.world import WorldModel
from actors.policies.mast.ras import ClusterSpec, RasMachine, RasParams, assign_machines, kind_of
from emulator.actor import Actor, on
from emulator.sysmsg import HostDown, HostUp
from emulator.units import MIN, Duration, at_least
from store.mast import fleet
from store.mast.records import DynamicCluster, Machine

NON_ML = "nonml"
Counts = dict[Annotated[str, Meta(min_length=1, max_length=100)], Annotated[int, Meta(ge=0)]]


class SpecChange(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """From `at` on, `cluster` intends `intended[kind]` machines of each kind named."""

    at: Duration
    cluster: str
    intended: Counts


class RasSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[system.ras]`: RAS per region (off by default: clusters stay the static split).

    `interval` between passes, the first `first_pass` after start (before the
    GMS's first scan, so work lands on settled clusters). `buffer`: keep each
    cluster's intended capacity outside any one fault domain. `share`, `non_ml`
    and `changes` make the cluster specs (module docstring). `time_limit_s`
    bounds one pass's MIP in wall time.
    """

    enabled: bool = False
    interval: at_least(MIN) = 1_800_000_000
    first_pass: Duration = 5_000_000
    buffer: bool = True
    share: Annotated[float, Meta(gt=0.0, le=1.0)] = 1.0
    non_ml: Counts = {}
    non_ml_regions: list[str] | None = None  # None: every region
    changes: Annotated[list[SpecChange], Meta(max_length=10_000)] = []
    time_limit_s: Annotated[float, Meta(gt=0.0, le=3600.0)] = 30.0


class RasActorParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One region's RAS: its clusters' specs at start, later changes, and which have a CM."""

    region: str
    clusters: tuple[ClusterSpec, ...]
    changes: tuple[SpecChange, ...] = ()
    managed: tuple[str, ...] = ()  # clusters with a CM (the ML ones)
    interval: Duration = Duration(1_800_000_000)
    first_pass: Duration = Duration(5_000_000)
    buffer: bool = True
    time_limit_s: float = 30.0
    lease: LeaseTiming = LeaseTiming()


class _Pass(msgspec.Struct, frozen=True, tag=True):
    """Self-timer: run a pass; a periodic one also schedules the next."""

    periodic: bool


def specs_at(
    base: Sequence[ClusterSpec], changes: Sequence[SpecChange], now_us: int
) -> list[ClusterSpec]:
    """The clusters' specs at `now_us`: `base` with every change due by then, in order."""
    intended = {c.id: dict(c.intended) for c in base}
    for change in sorted(changes, key=lambda ch: ch.at):  # stable: file order at equal times
        if change.at <= now_us and change.cluster in intended:
            intended[change.cluster].update(change.intended)
    return [
        ClusterSpec(id=c.id, ml=c.ml, intended={k: n for k, n in intended[c.id].items() if n})
        for c in base
    ]


class ResourceAllowanceSystem(LeaseHolder):
    """The RAS of one region (module docstring): passes on a timer, health of unwatched machines."""

    kind = "mast-ras"
    Params = RasActorParams
    params: RasActorParams

    async def on_start(self) -> None:
        p = self.params
        await self.lead(f"ras/{p.region}")
        self.passes = 0
        self.set_timer(p.first_pass, _Pass(periodic=True))
        for at in sorted({int(c.at) for c in p.changes if c.at > self.now_us}):
            self.set_timer(at - self.now_us, _Pass(periodic=False))

    @on(_Pass)
    async def run_pass(self, msg: _Pass) -> None:
        if msg.periodic:
            self.set_timer(self.params.interval, _Pass(periodic=True))
        if self.fence is not None:
            await self._pass()

    async def _pass(self) -> None:
        p = self.params
        self.passes += 1
        rows = await self.store(fleet.region_machines, p.region)
        specs = specs_at(p.clusters, p.changes, self.now_us)
        machines = [
            RasMachine(
                host=m.host,
                fault_domain=m.fault_domain,
                kind=kind_of(m),
                healthy=healthy,
                cluster=m.cluster,
            )
            for m, healthy in rows
        ]
        # Wall time of the MIP only goes to metrics: it never steers the run.
        t0 = time.perf_counter()
        result = assign_machines(
            machines, specs, RasParams(buffer=p.buffer, time_limit_s=p.time_limit_s)
        )
        pass_ms = (time.perf_counter() - t0) * 1000
        shortfall = _nonzero(result.shortfall)
        buffer_shortfall = _nonzero(result.buffer_shortfall)
        self.decision(
            "ras.pass",
            {
                "region": p.region,
                "pass": self.passes,
                "status": result.status,
                "moves": [list(m) for m in result.moves],
                "churn": result.churn,
                "buffer_met": result.buffer_met,
                "shortfall": shortfall,
                "buffer_shortfall": buffer_shortfall,
                "assigned": result.assigned,
                "intended": {s.id: s.intended for s in specs},
            },
        )
        region = p.region
        self.metric("ras_pass_ms", pass_ms, region=region)
        self.metric("ras_moves", len(result.moves), region=region)
        self.metric("ras_churn", result.churn, region=region)
        self.metric("ras_shortfall", _total(shortfall), region=region)
        self.metric("ras_buffer_shortfall", _total(buffer_shortfall), region=region)
        intended = {s.id: sum(s.intended.values()) for s in specs}
        stored = {c.id: c.intended_machines for c in await self.store(fleet.clusters, region)}
        if not result.moves and all(stored.get(c) == n for c, n in intended.items()):
            return
        fence = self.fence
        if fence is None or not await self.store(
            fleet.set_membership, fence, self.now_us, result.moves, intended
        ):
            return
        joined: dict[str, list[str]] = {}
        left: dict[str, list[str]] = {}
        for host, old, new in result.moves:
            if old is not None:
                left.setdefault(old, []).append(host)
            if new is not None:
                joined.setdefault(new, []).append(host)
        for cluster in sorted((joined.keys() | left.keys()) & set(p.managed)):
            self.send_reliably(
                f"cm/{cluster}",
                MembershipChanged(
                    ras_epoch=fence.epoch,
                    ras_pass=self.passes,
                    cluster=cluster,
                    joined=tuple(joined.get(cluster, ())),
                    left=tuple(left.get(cluster, ())),
                ),
            )

    # ---- hardware -----------------------------------------------------------------
    @on(HostDown)
    async def host_down(self, msg: HostDown) -> None:
        await self._health(msg.node, False)

    @on(HostUp)
    async def host_up(self, msg: HostUp) -> None:
        await self._health(msg.node, True)

    async def _health(self, node: str, healthy: bool) -> None:
        """Mark the region's machines under `node` that nobody marked yet (module docstring)."""
        region = self.params.region
        if node != region and not node.startswith(region + "/"):
            return
        prefix = node + "/"
        hosts = [
            m.host
            for m, ok in await self.store(fleet.region_machines, region)
            if ok != healthy and (m.host == node or m.host.startswith(prefix))
        ]
        if hosts:
            await self.store(fleet.set_health, hosts, healthy)


def _nonzero(by_cluster: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out = {c: {k: n for k, n in kinds.items() if n} for c, kinds in by_cluster.items()}
    return {c: kinds for c, kinds in out.items() if kinds}


def _total(by_cluster: dict[str, dict[str, int]]) -> int:
    return sum(n for kinds in by_cluster.values() for n in kinds.values())


# ---- wiring into the MAST system ----------------------------------------------------------
@dataclass
class RasWiring:
    """What RAS adds to a MAST run: its actors and roles, and the clusters to store.

    `clusters` replaces the static split's list in the store: the ML clusters
    with their intended totals, then the non-ML ones. Disabled: no actors, and
    the static split's clusters unchanged.
    """

    clusters: list[DynamicCluster]
    actors: list[tuple[str, str, int, Any]] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    watchers: tuple[str, ...] = ()


def ras_address(region: str) -> str:
    return f"ras/{region}/0"


def ras_addresses(world: WorldModel, settings: RasSettings) -> list[str]:
    return [ras_address(r.name) for r in world.regions] if settings.enabled else []


def check_settings(settings: RasSettings, world: WorldModel) -> None:
    """Changes name clusters of the world and hardware kinds it has (ValueError if not)."""
    known = {f"{r.name}/c{i}" for r in world.regions for i in range(world.clusters_per_region)}
    regions = [r.name for r in world.regions]
    for name in settings.non_ml_regions or ():
        if name not in regions:
            raise ValueError(f"ras.non_ml_regions: unknown region {name!r}")
    known |= {f"{r}/{NON_ML}" for r in _non_ml_regions(settings, regions)}
    kinds = {"cpu"} | {t for r in world.regions for t in r.gpu_machines}
    for key, counts in [("ras.non_ml", settings.non_ml)] + [
        (f"ras.changes[{i}].intended", c.intended) for i, c in enumerate(settings.changes)
    ]:
        for kind in counts:
            if kind not in kinds:
                raise ValueError(
                    f"{key}: unknown kind {kind!r} (known: {', '.join(sorted(kinds))})"
                )
    for i, change in enumerate(settings.changes):
        if change.cluster not in known:
            hint = f" (a {NON_ML} cluster needs ras.non_ml in its region)"
            hint = hint if change.cluster.endswith("/" + NON_ML) else ""
            raise ValueError(f"ras.changes[{i}].cluster: unknown cluster {change.cluster!r}{hint}")


def _non_ml_regions(settings: RasSettings, regions: list[str]) -> list[str]:
    if not settings.non_ml:
        return []
    return regions if settings.non_ml_regions is None else list(settings.non_ml_regions)


def ras_wiring(
    world: WorldModel,
    clusters: Sequence[DynamicCluster],
    machines: Sequence[Machine],
    settings: RasSettings,
    lease: LeaseTiming,
) -> RasWiring:
    """The RAS actors (one per region, on a control host) and the clusters to store."""
    if not settings.enabled:
        return RasWiring(clusters=list(clusters))
    check_settings(settings, world)
    static: dict[str | None, Counter[str]] = {}
    for m in machines:
        static.setdefault(m.cluster, Counter())[kind_of(m)] += 1
    out = RasWiring(clusters=[])
    host = min(2, world.control_hosts - 1)  # ctl0 and ctl1 hold the RMS and the CMs
    non_ml = _non_ml_regions(settings, [r.name for r in world.regions])
    for r in world.regions:
        mine = [c for c in clusters if c.region == r.name]
        specs = []
        for c in mine:
            # The epsilon keeps e.g. 0.29 x 100 (28.999…) at 29.
            scaled = {
                k: math.floor(n * settings.share + 1e-9) for k, n in static.get(c.id, {}).items()
            }
            specs.append(
                ClusterSpec(
                    id=c.id, ml=c.ml, intended={k: n for k, n in sorted(scaled.items()) if n}
                )
            )
        if r.name in non_ml:
            specs.append(
                ClusterSpec(id=f"{r.name}/{NON_ML}", ml=False, intended=dict(settings.non_ml))
            )
        out.clusters.extend(
            DynamicCluster(
                id=s.id, region=r.name, ml=s.ml, intended_machines=sum(s.intended.values())
            )
            for s in specs
        )
        address = ras_address(r.name)
        params = RasActorParams(
            region=r.name,
            clusters=tuple(specs),
            changes=tuple(c for c in settings.changes if c.cluster.startswith(r.name + "/")),
            managed=tuple(c.id for c in mine if c.ml),
            interval=settings.interval,
            first_pass=settings.first_pass,
            buffer=settings.buffer,
            time_limit_s=settings.time_limit_s,
            lease=lease,
        )
        out.actors.append((address, f"{r.name}/ctl{host}", 0, _factory(address, params)))
        out.roles.append(f"ras/{r.name}")
    out.watchers = tuple(a for a, *_ in out.actors)
    return out


def _factory(address: str, params: RasActorParams) -> Any:
    def make() -> Actor:
        return ResourceAllowanceSystem(address, params)

    return make
