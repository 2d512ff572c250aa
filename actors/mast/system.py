"""The MAST system: a world preset, tenants, a generated workload, and the actors.

A scenario selects it with `[system] kind = "mast"`. Everything is a pure
function of the parameters and the run seed: the world's machines and static
dynamic clusters, the tenants, the workloads and the tables they read. The
control plane is a replicated GMS (instances in the first regions), replicated
RMSs per region and replicated CMs per dynamic cluster, on the regions'
control hosts (`[system] replicas`), plus the client.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from actors.common.client import Client, ClientParams
from actors.common.cm.manager import ClusterManager, CMParams
from actors.common.job_agent import JobAgent
from actors.common.leadership import LeaseTiming
from actors.mast.gms import PIPELINE_MAX, GlobalScheduler, GMSParams
from actors.mast.migration import MigrationService, MigrationServiceParams
from actors.mast.ras import RasSettings, check_settings, ras_addresses, ras_wiring
from actors.mast.rms import RegionalScheduler, RMSParams
from actors.mast.tetris import Tetris, TetrisActorParams, tetris_inputs
from actors.mast.validation import TABLES_MAX, TENANTS_MAX, WORKLOADS_MAX, check_mast
from actors.mast.warehouse import build_warehouse
from actors.mast.workload.csv_trace import read_csv_trace
from actors.mast.workload.generator import GeneratorParams, generate, load_for_world
from actors.mast.workload.tenants import make_tenants
from actors.mast.world import WorldModel, machines, preset, region_specs, static_clusters
from actors.policies.mast import registry as mast_registry
from actors.policies.mast.api import MastPolicy
from actors.policies.mast.credit import CreditParams
from actors.policies.mast.migration import MigrationSettings
from actors.policies.mast.static_placement import colocate, spread
from actors.policies.mast.tetris.settings import TetrisSettings
from emulator.actor import Actor
from emulator.errors import InputError, InputWarning
from emulator.net.specs import RegionSpec
from emulator.registry import SystemBuild, actor_entry
from emulator.rng import RngStreams
from emulator.units import MIN, MS, Duration, S, at_least
from store.mast import catalog, fleet, queue
from store.mast.records import GPUS_PER_MACHINE, DataTable, Tenant, WorkloadSpec


class ManualHomes(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Users' manual data placement (before Tetris): `share` of the tables live in `region`
    (a region of the world)."""

    region: str
    share: Annotated[float, Meta(ge=0.0, le=1.0)]


# An instance count per replicated role: 1 (no follower) to a handful.
ReplicaCount = Annotated[int, Meta(ge=1, le=7)]


class Replicas(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How many instances each replicated role has (one leads, the others follow).

    MAST's numbers by default: 2 GMS instances (in different regions), 2 RMS
    instances per region, 3 CM instances per dynamic cluster (on different
    control hosts where the region has enough). 1 gives the unreplicated
    system, where a crashed leader's role waits for its restart.
    """

    gms: ReplicaCount = 2
    rms: ReplicaCount = 2
    cm: ReplicaCount = 3


class AuctionSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[system] auction`: how many auctions the GMS keeps in flight, and for how long bids hold.

    With `pipeline` above 1 an RMS may bid in several auctions at once, and
    with one at a time the next auction's opening may overtake the last
    award: an RMS holds each bid's plan in its view for `hold_ttl` (or until
    the award or release), so its later bids never promise the same machines
    again, and a hold whose Award or Release was lost frees itself.
    """

    pipeline: Annotated[int, Meta(ge=1, le=PIPELINE_MAX)] = 1
    hold_ttl: at_least(MS) = 30_000_000


class MastParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[system]` of a MAST scenario (besides `kind = "mast"`)."""

    world: str = "small"
    # Scripted runs: an inline world, tenants, workloads and tables replace the
    # preset and the generator (each independently).
    world_model: WorldModel | None = None
    tenant_list: Annotated[list[Tenant], Meta(min_length=1, max_length=TENANTS_MAX)] | None = None
    workload_list: Annotated[list[WorkloadSpec], Meta(max_length=WORKLOADS_MAX)] | None = None
    # A CSV trace (format: `actors.mast.workload.csv_trace.CSV_FORMAT`), relative to the
    # scenario file.
    workload_csv: str | None = None
    table_list: Annotated[list[DataTable], Meta(max_length=TABLES_MAX)] | None = None
    tenants: Annotated[int, Meta(ge=1, le=TENANTS_MAX)] = 12
    # Arrival rate relative to the paper's per-GPU rate (1.0 = MAST-like load).
    load: Annotated[float, Meta(gt=0.0, le=1000.0)] = 1.0
    workload: GeneratorParams = GeneratorParams()
    # At least a second: every pass auctions the queue, so a pass every few
    # microseconds keeps a run at one instant.
    scan_interval: at_least(S) = 300_000_000
    auction_deadline: at_least(MS) = 2_000_000
    # A region whose RMS and CMs all have had no leader this long is lost: the
    # GMS queues its running work again (`actors/mast/gms.py`).
    region_lost_after: at_least(S) = 600_000_000
    checkpoint_cost: Duration = 30_000_000
    # Owners give up on opportunistic work: a workload still queued at the
    # lowest priority this long after its submission, never started, is
    # withdrawn (`actors/common/client.py`). None: never (the queue then grows
    # without end under a load above what the fleet runs).
    patience: at_least(MIN) | None = None
    credit: CreditParams = CreditParams()
    lease: LeaseTiming = LeaseTiming()
    replicas: Replicas = Replicas()
    auction: AuctionSettings = AuctionSettings()
    # The MAST-level policy, by its name in actors/policies/mast/registry.py:
    # "mast" (auctions over every region), "federated" (the §5.6 baseline: early
    # binding to one region), "tetris-v0|v1|v2" (MAST with the slow path's Tetris
    # at that version). `mastemu compare` varies it.
    policy: str = "mast"
    # Per policy name, that policy's parameters (its defaults otherwise), so that
    # `mastemu compare` can run every policy of one file with its own.
    policy_params: dict[str, dict[str, Any]] = {}
    # "colocated": users placed each workload's tables together in a region with
    # its hardware (static placement, before Tetris); "home-only": every table
    # only in its home region, so multi-table workloads may wait for data.
    # "replicated": every table in every region (what a perfect Tetris approaches).
    # "spread": each workload's data ready in one to five regions with its hardware
    # (MAST Fig. 7: most workloads have two or more candidate regions, ~40% four
    # or more), chosen by supply of that hardware: what Tetris's placement gives.
    data_placement: Literal["colocated", "home-only", "replicated", "spread"] = "colocated"
    manual_homes: ManualHomes | None = None
    # The slow path's data-migration service (and on-demand replication).
    migration: MigrationSettings = MigrationSettings()
    # The slow path's daily data placement (on with a `tetris-*` policy).
    tetris: TetrisSettings = TetrisSettings()
    # RAS per region: dynamic-cluster membership by MIP (off: the static split stays).
    ras: RasSettings = RasSettings()

    def __post_init__(self) -> None:
        try:
            preset(self.world)
        except KeyError as error:
            raise InputError("", "world", str(error).strip("'\"")) from None
        if self.ras.enabled:
            check_settings(self.ras, self.world_model or preset(self.world))
        if self.auction.hold_ttl <= self.auction_deadline:
            # A hold that lapses before its award arrives fails every dispatch.
            raise InputError("", "auction.hold_ttl", "must be longer than auction_deadline")
        try:
            mast_registry.mast_policy(self.policy)
        except KeyError as error:
            raise InputError("", "policy", error.args[0]) from None
        for name, raw in sorted(self.policy_params.items()):
            try:
                mast_registry.resolve(name, raw)
            except KeyError as error:
                raise InputError("", f"policy_params.{name}", error.args[0]) from None
            except InputError as error:
                raise error.within(prefix=f"policy_params.{name}") from None

    def scheduling_policy(self) -> tuple[MastPolicy, Any]:
        """The MAST-level policy in force, with its validated parameters."""
        return mast_registry.resolve(self.policy, self.policy_params.get(self.policy, {}))


class MastSystem:
    """The MAST system; tests register variants with deliberately broken actors."""

    Params: ClassVar[type[msgspec.Struct]] = MastParams

    def __init__(
        self,
        kind: str = "mast",
        *,
        gms: type[Actor] = GlobalScheduler,
        rms: type[Actor] = RegionalScheduler,
        cm: type[Actor] = ClusterManager,
        migration: type[Actor] = MigrationService,
    ) -> None:
        self.kind = kind
        self.classes = {"gms": gms, "rms": rms, "cm": cm, "migration": migration}

    @staticmethod
    def policies() -> list[str]:
        """The policies a scenario of this system may name (`mastemu policies`)."""
        return mast_registry.names()

    @staticmethod
    def slow_path(params: MastParams) -> tuple[TetrisSettings, MigrationSettings]:
        """The Tetris and migration settings in force (the policy may turn Tetris on).

        Tetris orders its copies from the migration service, so it runs whenever Tetris does.
        """
        policy, knobs = params.scheduling_policy()
        tetris, migration = policy.slow_path(params.tetris, params.migration, knobs)
        if tetris.enabled and not migration.enabled:
            migration = msgspec.structs.replace(migration, enabled=True)
        return tetris, migration

    def world(self, params: MastParams) -> WorldModel:
        return params.world_model or preset(params.world)

    def regions(self, params: MastParams) -> list[RegionSpec]:
        return region_specs(self.world(params))

    def addresses(self, params: MastParams) -> list[str]:
        world = self.world(params)
        clusters, _ = static_clusters(world, machines(world))
        tetris, migration = self.slow_path(params)
        n = params.replicas
        return (
            [f"gms/{i}" for i in range(n.gms)]
            + ["client"]
            + [f"rms/{r.name}/{i}" for r in world.regions for i in range(n.rms)]
            + [f"cm/{c.id}/{i}" for c in clusters for i in range(n.cm)]
            + ras_addresses(world, params.ras)
            + (["migration/0"] if migration.enabled else [])
            + (["tetris/0"] if tetris.enabled else [])
        )

    def check(self, params: MastParams, base_dir: Path) -> list[InputWarning]:
        """Cross-check what the params refer to (`actors/mast/validation.py`)."""
        return check_mast(params, self.world(params), base_dir)

    def generate(
        self, params: MastParams, seed: int, duration_us: int, base_dir: Path = Path()
    ) -> tuple[WorldModel, list[Any], list[WorkloadSpec], list[DataTable]]:
        world = self.world(params)
        rng = RngStreams(seed)
        tenants = params.tenant_list or make_tenants(params.tenants, rng.stream("tenants"), world)
        if params.workload_csv is not None:
            workloads = read_csv_trace(base_dir / params.workload_csv)
            regions = [r.name for r in world.regions]
            tables = _with_missing_tables(workloads, list(params.table_list or []), regions)
        elif params.workload_list is not None:
            workloads, tables = list(params.workload_list), list(params.table_list or [])
        else:
            gen = msgspec.structs.replace(params.workload, load=params.load * load_for_world(world))
            workloads, tables = generate(
                gen, rng.stream("workload"), tenants=tenants, world=world, span_us=duration_us
            )
            if params.table_list is not None:
                tables = list(params.table_list)
        if params.manual_homes is not None:
            skew = rng.stream("manual-homes")
            home = params.manual_homes
            tables = [
                msgspec.structs.replace(t, home_region=home.region)
                if skew.random() < home.share
                else t
                for t in tables
            ]
        if params.data_placement == "replicated":
            names = sorted(r.name for r in world.regions)
            tables = [
                msgspec.structs.replace(t, replicas=tuple(n for n in names if n != t.home_region))
                for t in tables
            ]
        elif params.data_placement == "colocated":
            hardware = {
                r.name: set(r.gpu_machines) | ({"cpu"} if r.cpu_machines else set())
                for r in world.regions
            }
            tables = colocate(workloads, tables, hardware)
        elif params.data_placement == "spread":
            supply = {
                r.name: {
                    **{t: GPUS_PER_MACHINE * n for t, n in r.gpu_machines.items()},
                    "cpu": r.cpu_machines,
                }
                for r in world.regions
            }
            draws = rng.stream("data-placement")
            tables = spread(
                workloads, tables, supply, [(draws.random(), draws.random()) for _ in workloads]
            )
        return world, tenants, workloads, tables

    def build(
        self, params: MastParams, seed: int, duration_us: int, base_dir: Path = Path()
    ) -> SystemBuild:
        world, tenants, workloads, tables = self.generate(params, seed, duration_us, base_dir)
        tetris, migration = self.slow_path(params)
        if tetris.enabled:
            warehouse = build_warehouse(
                tables,
                workloads,
                world,
                tetris.warehouse,
                RngStreams(seed).stream("warehouse"),
                tenant_priority={t.name: t.priority for t in tenants},
                span_us=duration_us,
            )
            tables = warehouse.catalog()
        clusters, fleet_machines = static_clusters(world, machines(world))
        ras = ras_wiring(world, clusters, fleet_machines, params.ras, params.lease)
        regions = [r.name for r in world.regions]
        first = regions[0]
        n = params.replicas
        ctl = world.control_hosts
        gms_params = GMSParams(
            regions=regions,
            scan_interval=params.scan_interval,
            auction_deadline=params.auction_deadline,
            region_lost_after=params.region_lost_after,
            credit=params.credit,
            policy=params.policy,
            policy_params=params.policy_params.get(params.policy, {}),
            lease=params.lease,
            on_demand=migration.enabled,
            auction_pipeline=params.auction.pipeline,
        )
        # Instance 0 of each role sits where the unreplicated system puts it; the
        # others go to the next regions (GMS) or control hosts (RMS, CM).
        actors: list[tuple[str, str, int, Any]] = [
            actor_entry(
                f"gms/{i}",
                f"{regions[i % len(regions)]}/ctl{i // len(regions) % ctl}",
                self.classes["gms"],
                gms_params,
            )
            for i in range(n.gms)
        ]
        client = ClientParams(workloads=tuple(workloads), patience_us=params.patience)
        actors.append(actor_entry("client", f"{first}/ctl1", Client, client))
        for region in regions:
            mine = [c.id for c in clusters if c.region == region]
            rms_params = RMSParams(
                region=region,
                clusters=mine,
                lease=params.lease,
                policy=params.policy,
                policy_params=params.policy_params.get(params.policy, {}),
                hold_ttl=params.auction.hold_ttl,
            )
            actors += [
                actor_entry(
                    f"rms/{region}/{i}", f"{region}/ctl{i % ctl}", self.classes["rms"], rms_params
                )
                for i in range(n.rms)
            ]
        cms = []
        for c in clusters:
            cm_params = CMParams(
                cluster=c.id,
                region=c.region,
                checkpoint_cost=params.checkpoint_cost,
                lease=params.lease,
            )
            for i in range(n.cm):
                # Every instance watches the hardware; only the leader acts on it.
                address = f"cm/{c.id}/{i}"
                cms.append(address)
                actors.append(
                    actor_entry(
                        address, f"{c.region}/ctl{(1 + i) % ctl}", self.classes["cm"], cm_params
                    )
                )

        roles = ["gms"] + [f"rms/{r}" for r in regions] + [f"cm/{c.id}" for c in clusters]
        if migration.enabled:
            roles.append("migration")
            actors.append(
                actor_entry(
                    "migration/0",
                    f"{first}/ctl2",
                    self.classes["migration"],
                    MigrationServiceParams(
                        settings=migration,
                        regions=regions,
                        tetris=tetris.enabled,
                        lease=params.lease,
                    ),
                )
            )
        if tetris.enabled:
            roles.append("tetris")
            known = tetris_inputs(world, warehouse, storage_bytes(world))
            actors.append(
                actor_entry(
                    "tetris/0",
                    f"{regions[-1]}/ctl2",
                    Tetris,
                    TetrisActorParams(
                        settings=tetris,
                        jobs=known.jobs,
                        regions=known.regions,
                        dr=known.dr,
                        readers=known.readers,
                        lease=params.lease,
                    ),
                )
            )
        actors += ras.actors
        roles += ras.roles

        async def setup(store: Any, record: Callable[[str, Any], None]) -> None:
            await queue.put_tenants(store, tenants)
            await catalog.put_regions(store, storage_bytes(world))
            await fleet.put_clusters(store, ras.clusters)
            await fleet.put_machines(store, fleet_machines)
            await catalog.put_tables(store, tables)
            _record_facts(record, tenants, fleet_machines, tables)
            record(
                "storage",
                {
                    "capacity": storage_bytes(world),
                    "sizes": {t.name: t.size_bytes for t in tables},
                    "daily_cap_bytes": migration.daily_cap_bytes,
                },
            )

        return SystemBuild(
            actors=actors,
            roles=roles,
            setup=setup,
            hardware_watchers=tuple(cms) + ras.watchers,
            summary={"workloads": len(workloads), "tables": len(tables), "gpus": world.gpus},
            workers=(JobAgent.kind,),
        )


def storage_bytes(world: WorldModel) -> dict[str, int]:
    """Each region's warehouse capacity in bytes (`storage_pb` petabytes)."""
    return {r.name: round(r.storage_pb * 1e15) for r in world.regions}


def _record_facts(
    record: Callable[[str, Any], None],
    tenants: list[Any],
    fleet_machines: list[Any],
    tables: list[DataTable],
) -> None:
    """The starting facts, for the invariant checkers (online and offline)."""
    record("tenants", {t.name: [t.priority, t.gpu_quota, t.cpu_quota] for t in tenants})
    record("machines", {m.host: [m.region, m.gpu_type, m.gpus] for m in fleet_machines})
    # Which dynamic cluster holds each machine at the start: a job runs inside one
    # cluster, so the liveness judge counts free capacity per cluster.
    members: dict[str, list[str]] = {}
    for m in fleet_machines:
        if m.cluster is not None:
            members.setdefault(m.cluster, []).append(m.host)
    record("clusters", members)
    record("catalog", {t.name: sorted({t.home_region, *t.replicas}) for t in tables})


def _with_missing_tables(
    workloads: list[WorkloadSpec], tables: list[DataTable], regions: list[str]
) -> list[DataTable]:
    """Tables an imported workload names but no table list describes.

    They get a nominal 1 GB size and a home region picked by a stable hash of
    the name (never Python's `hash`, which changes between processes).
    """
    known = {t.name for t in tables}
    missing = sorted({n for w in workloads for n in w.input_tables} - known)
    return tables + [
        DataTable(
            name=n, size_bytes=1 << 30, home_region=regions[zlib.crc32(n.encode()) % len(regions)]
        )
        for n in missing
    ]
