"""Invariant checkers of MAST's protocol, judged from the store's committed writes.

Each reads store events (what the shared database accepted) and the RMS's
dispatch decisions from the trace, online during a run and offline in
`mastemu check`. Payloads arrive decoded: Structs as dicts, tuples as lists.

- `allocation` (invariant 2): no GPU or CPU machine held by two running jobs;
  a machine's GPUs never over-committed; a job never started twice at once.
  A region the GMS gave up (`gms.region-lost`, then its workloads queued
  again) is the one exception: its dead attempts' allocations stay as
  left-overs, still using their machines, the job may start elsewhere, and
  only left-overs may be freed as such (`fleet.leftovers`).
- `gang` (3): a workload is RUNNING only once all its jobs have held machines
  together since its award (a job may have finished since: the GMS hears of
  the dispatch late when it was down), and goes back to the queue (or is
  done) only when none holds machines — or when the GMS gave its region up.
- `auction` (4): an auction has at most one winner, and a workload is awarded
  only while it is queued (so it is never dispatched to two regions at once);
  the GMS gives a region's work up only while none of the region's roles
  (`rms/R`, `cm/R/...`) has led since the time it says the region went dark;
  with pipelined auctions, an RMS's open bids (`rms.hold`) without victims
  never promise one machine beyond its capacity.
- `preemption` (6): victims have strictly lower priority than the workload
  that preempts them, and a running victim's machines are released only after
  it saved a checkpoint — one saved after its CM ordered it to stop and save
  (the job went CHECKPOINTING) also counts for a later plan that picks the
  stopping job again — unless it finished its work meanwhile (released
  DONE: its last checkpoint holds all of it) or lost a machine it held (a
  hardware failure, seen in the kernel's `fault` events even when no CM was
  up to record it, or RAS moving the machine away), or its agent died with
  the emulator process (an attempt begun before a `resume` event).
- `colocation` (5): a job starts only in a region holding ready replicas of
  all its input tables, on machines of its GPU type.
- `quota` (7): a workload ranked within quota fits its tenant's quota on top
  of what the tenant runs and what it was ranked within quota before it.
- `no-lost-workload` (8): every submitted workload is in exactly one state;
  state changes start from the state it is in; at the end nothing sits
  RUNNING with none of its jobs holding machines; a workload goes DONE only
  once every one of its jobs finished its work (was released DONE) since
  its last award, so a gang that lost a job cannot end as if it had not.

The starting facts (machines, tenants, catalog) come from the system's
`setup` trace events, so a run database can be checked on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.trace import TraceEvent
from store.mast.queue import QUEUED
from store.mast.records import GPUS_PER_MACHINE

Key = tuple[str, str]


QUEUE_EVENTS = frozenset({"queue.submit", "queue.award", "queue.transition"})


class _StoreChecker:
    """Dispatches store events by repository function name to `on_<name>` methods.

    With `tracks_queue`, `self.queue` holds each workload's state in the job
    queue as the store committed it; handlers see the state from before the
    event they judge, and the base advances it afterwards.
    """

    name = ""
    kinds: tuple[str, ...] = ("store",)
    _routes: dict[str, str] = {}
    tracks_queue = False

    def __init__(self) -> None:
        self.queue: dict[str, str] = {}

    def observe(self, event: TraceEvent) -> list[str]:
        method = self._routes.get(event.type)
        tracked = self.tracks_queue and event.type in QUEUE_EVENTS
        if method is None and not tracked:
            return []
        args, result = event.payload
        out: list[str] = []
        if method is not None:
            handler: Callable[[Any, Any, TraceEvent], list[str]] = getattr(self, method)
            out = handler(args, result, event)
        if tracked and result:
            if event.type == "queue.submit":
                self.queue[args[0]["id"]] = "PENDING"
            elif event.type == "queue.award":
                self.queue[args[2]] = "DISPATCHING"
            else:
                self.queue[args[0]] = args[2]
        return out

    def finish(self) -> list[str]:
        return []


class AllocationChecker(_StoreChecker):
    name = "allocation"
    kinds = ("store", "setup", "decision")
    _routes = {
        "fleet.start": "on_start",
        "fleet.release": "on_release",
        "queue.transition": "on_transition",
        "fleet.leftovers": "on_leftovers",
    }

    def __init__(self) -> None:
        # GPUs per host from the `machines` setup fact (cluster-policy worlds
        # have 4-GPU machines); MAST's 8 for a host the facts do not name.
        self.capacity: dict[str, int] = {}
        self.gpus: dict[str, dict[Key, int]] = {}
        self.cpu: dict[str, Key] = {}
        self.alive: dict[Key, tuple[list[tuple[str, int]], list[str]]] = {}
        # A dark region's attempts, given up by the GMS (`gms.region-lost`, then
        # the workload queued again): their allocations stay on the machines,
        # still using them, until a CM frees them; the job may start elsewhere.
        self.giving_up: set[str] = set()
        self.left_gpus: dict[str, dict[Key, int]] = {}
        self.left_cpu: dict[str, Key] = {}

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "setup":
            if event.type == "machines":
                self.capacity = {h: int(v[2]) for h, v in event.payload.items() if v[2]}
            return []
        if event.kind == "decision":
            if event.type == "gms.region-lost":
                self.giving_up.update(w for w, _auction in event.payload["workloads"])
            return []
        return super().observe(event)

    def on_transition(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        workload = args[0]
        if workload in self.giving_up:
            self.giving_up.discard(workload)
            if result and args[2] in QUEUED:
                for key in [k for k in self.alive if k[0] == workload]:
                    gpus, cpus = self.alive.pop(key)
                    for host, _n in gpus:
                        n = self.gpus.get(host, {}).pop(key, 0)
                        left = self.left_gpus.setdefault(host, {})
                        left[key] = left.get(key, 0) + n
                    for host in cpus:
                        if self.cpu.get(host) == key:
                            del self.cpu[host]
                        self.left_cpu[host] = key
        return []

    def on_leftovers(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        out = []
        for host, workload, job in result or ():
            key = (workload, job)
            self.left_gpus.get(host, {}).pop(key, None)
            if self.left_cpu.get(host) == key:
                del self.left_cpu[host]
            gpus, cpus = self.alive.get(key, ([], []))
            if host in cpus or any(h == host for h, _n in gpus):
                out.append(f"{host} of {workload}/{job} freed as a left-over but the job holds it")
        return out

    def on_start(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result is None:
            return []
        key = (args[2], args[3])
        gpus = [(h, n) for h, n in args[6]]
        cpus = list(args[7])
        out = []
        if key in self.alive:
            out.append(f"{key[0]}/{key[1]} started again while it still holds machines")
        for host, n in gpus:
            held = self.gpus.setdefault(host, {})
            held[key] = held.get(key, 0) + n
            left = self.left_gpus.get(host, {})
            total = sum(held.values()) + sum(left.values())
            capacity = self.capacity.get(host, GPUS_PER_MACHINE)
            if total > capacity:
                who = ", ".join(f"{w}/{j}" for w, j in sorted({*held, *left}))
                out.append(f"{host}: {total} GPUs allocated (of {capacity}) to {who}")
        for host in cpus:
            other = self.cpu.get(host) or self.left_cpu.get(host)
            if other is not None and other != key:
                out.append(
                    f"CPU machine {host} held by {other[0]}/{other[1]} and {key[0]}/{key[1]}"
                )
            self.cpu[host] = key
        self.alive[key] = (gpus, cpus)
        return out

    def on_release(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if not result:
            return []
        key = (args[2], args[3])
        gpus, cpus = self.alive.pop(key, ([], []))
        for host, _n in gpus:
            self.gpus.get(host, {}).pop(key, None)
        for host in cpus:
            if self.cpu.get(host) == key:
                del self.cpu[host]
        # The store frees every allocation of the job, left-overs of given-up attempts too.
        for left in self.left_gpus.values():
            left.pop(key, None)
        for host in [h for h, k in self.left_cpu.items() if k == key]:
            del self.left_cpu[host]
        return []


class GangChecker(_StoreChecker):
    name = "gang"
    _routes = {
        "queue.submit": "on_submit",
        "queue.award": "on_award",
        "fleet.start": "on_start",
        "fleet.release": "on_release",
        "queue.transition": "on_transition",
    }

    def __init__(self) -> None:
        self.jobs: dict[str, set[str]] = {}
        self.alive: dict[str, set[str]] = {}
        # Workloads whose jobs all held machines at one instant since their last award.
        self.placed: set[str] = set()
        # Workloads of a dark region the GMS is giving up (`gms.region-lost`): queued
        # again while their dead jobs still hold machines (see AllocationChecker).
        self.giving_up: set[str] = set()

    kinds = ("store", "decision")

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "decision":
            if event.type == "gms.region-lost":
                self.giving_up.update(w for w, _auction in event.payload["workloads"])
            return []
        return super().observe(event)

    def on_submit(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        spec = args[0]
        self.jobs[spec["id"]] = {j["name"] for j in spec["jobs"]}
        return []

    def on_award(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.placed.discard(args[2])
        return []

    def on_start(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result is not None:
            alive = self.alive.setdefault(args[2], set())
            alive.add(args[3])
            if self.jobs.get(args[2], set()) <= alive:
                self.placed.add(args[2])
        return []

    def on_release(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.alive.get(args[2], set()).discard(args[3])
        return []

    def on_transition(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        given_up = args[0] in self.giving_up
        self.giving_up.discard(args[0])
        if not result:
            return []
        workload, to_state = args[0], args[2]
        if given_up and to_state in QUEUED:
            self.alive.pop(workload, None)  # its jobs died with the region
        alive = self.alive.get(workload, set())
        if to_state == "RUNNING":
            missing = sorted(self.jobs.get(workload, set()) - alive)
            if missing and workload not in self.placed:
                return [f"{workload} RUNNING but jobs {missing} hold no machines"]
        elif to_state in (*QUEUED, "DONE", "FAILED") and alive:
            return [f"{workload} went to {to_state} while jobs {sorted(alive)} still hold machines"]
        return []


class AuctionChecker(_StoreChecker):
    name = "auction"
    kinds = ("store", "decision", "setup", "crash")
    _routes = {
        "queue.award": "on_award",
        "lease.acquire": "on_lease",
        "lease.release": "on_lease_release",
    }
    tracks_queue = True

    def __init__(self) -> None:
        super().__init__()
        self.winner: dict[int, str] = {}
        # When each role's lease (last) expires: a region's work may be given up
        # only once its RMS and CMs (`cm/REGION/...`) have all been without one.
        self.expires_us: dict[str, int] = {}
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
            self.expires_us[args[0]] = result["expires_at_us"]
        return []

    def on_lease_release(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        role, now_us = args[0], args[3]
        if result and role in self.expires_us:
            self.expires_us[role] = min(self.expires_us[role], now_us)
        return []

    def _region_lost(self, event: TraceEvent) -> list[str]:
        """A region given up while one of its roles led may run its work twice."""
        region, since = event.payload["region"], event.payload["dark_since_us"]
        led = sorted(
            role
            for role, until in self.expires_us.items()
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
        return out


class PreemptionChecker(_StoreChecker):
    name = "preemption"
    kinds = ("store", "decision", "fault", "run")
    _routes = {
        "fleet.start": "on_start",
        "fleet.state": "on_state",
        "fleet.checkpoint": "on_checkpoint",
        "fleet.release": "on_release",
        "fleet.health": "on_health",
        "fleet.membership": "on_membership",
    }

    def __init__(self) -> None:
        self.priority: dict[Key, int] = {}
        self.hosts: dict[Key, set[str]] = {}
        self.running: set[Key] = set()
        # Victims told to stop, and whether they saved a checkpoint since.
        self.victims: dict[Key, bool] = {}
        # Jobs told to stop with a checkpoint (CHECKPOINTING), and those of them
        # that saved it: they do no more work, so nothing of theirs is lost.
        self.checkpointing: set[Key] = set()
        self.saved_for_stop: set[Key] = set()
        # Hosts that failed or that RAS moved out of their cluster: a victim
        # losing one cannot checkpoint first, and nobody reuses it in its cluster.
        self.failed_hosts: set[str] = set()
        # When each job (its current attempt) started, and when each machine,
        # rack, fault domain... last went down (the kernel's hardware faults).
        self.started_us: dict[Key, int] = {}
        self.down_us: dict[str, int] = {}
        # The trace position of each attempt's start and of the last `resume`:
        # the killed process took every agent with it, as a failure of every
        # machine would (positions, not times: a kill and a restart share one).
        self.started_seq: dict[Key, int] = {}
        self.resumed_seq = 0

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "decision":
            return self._dispatch(event.payload) if event.type == "rms.dispatch" else []
        if event.kind == "run":
            if event.type == "resume":
                self.resumed_seq = event.seq
            return []
        if event.kind == "fault":
            if event.type == "down":
                self.down_us[event.dst] = event.t_us
            return []
        return super().observe(event)

    def _lost_a_machine(self, key: Key) -> bool:
        """Whether a machine the job holds failed or left its cluster since it started."""
        hosts = self.hosts.get(key, set())
        if hosts & self.failed_hosts:
            return True
        if self.started_seq.get(key, 0) < self.resumed_seq:
            return True
        since = self.started_us.get(key, 0)
        return any(
            t >= since and any(h == node or h.startswith(node + "/") for h in hosts)
            for node, t in self.down_us.items()
        )

    def _dispatch(self, payload: dict[str, Any]) -> list[str]:
        out = []
        for w, j in payload["victims"]:
            key = (w, j)
            victim_priority = self.priority.get(key)
            if victim_priority is not None and victim_priority <= payload["priority"]:
                out.append(
                    f"{payload['workload']} (priority {payload['priority']}) preempts "
                    f"{w}/{j} of priority {victim_priority}"
                )
            if key in self.running:
                self.victims[key] = key in self.saved_for_stop
        return out

    def on_start(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        if result is not None:
            key = (args[2], args[3])
            self.priority[key] = args[5]
            self.hosts[key] = {h for h, _n in args[6]} | set(args[7])
            self.started_us[key] = args[1]
            self.started_seq[key] = event.seq
            self.running.discard(key)
            self.victims.pop(key, None)
            self.checkpointing.discard(key)
            self.saved_for_stop.discard(key)
        return []

    def on_state(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result and args[4] == "RUNNING":
            self.running.add((args[2], args[3]))
        elif result and args[4] == "CHECKPOINTING":
            self.checkpointing.add((args[2], args[3]))
        return []

    def on_checkpoint(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        key = (args[1], args[2])
        if result and key in self.victims:
            self.victims[key] = True
        if result and key in self.checkpointing:
            self.saved_for_stop.add(key)
        return []

    def on_health(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if not args[1]:
            self.failed_hosts.update(args[0])
        return []

    def on_membership(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.failed_hosts.update(host for host, src, _dst in args[2] if src is not None)
        return []

    def on_release(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if not result:
            return []
        key = (args[2], args[3])
        self.running.discard(key)
        self.checkpointing.discard(key)
        self.saved_for_stop.discard(key)
        saved = self.victims.pop(key, None)
        if saved is False and args[4] != "DONE" and not self._lost_a_machine(key):
            return [f"preempted {key[0]}/{key[1]} released its machines before saving a checkpoint"]
        return []


class _FactsChecker(_StoreChecker):
    """A checker that also reads the system's starting facts (`setup` events)."""

    kinds: tuple[str, ...] = ("store", "setup")

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "setup":
            self.on_setup(event.type, event.payload)
            return []
        return super().observe(event)

    def on_setup(self, type_: str, payload: Any) -> None:
        """Subclasses keep the facts they need."""


class ColocationChecker(_FactsChecker):
    name = "colocation"
    _routes = {
        "queue.submit": "on_submit",
        "catalog.replica": "on_replica",
        "catalog.delete": "on_delete",
        "migration.done": "on_copied",
        "fleet.start": "on_start",
    }

    def __init__(self) -> None:
        self.machines: dict[str, tuple[str, str | None]] = {}
        self.ready: dict[str, set[str]] = {}
        self.jobs: dict[Key, tuple[str | None, list[str]]] = {}

    def on_setup(self, type_: str, payload: Any) -> None:
        if type_ == "machines":
            self.machines = {h: (region, gpu_type) for h, (region, gpu_type, _g) in payload.items()}
        elif type_ == "catalog":
            for table, regions in payload.items():
                self.ready.setdefault(table, set()).update(regions)

    def on_submit(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        spec = args[0]
        for job in spec["jobs"]:
            self.jobs[(spec["id"], job["name"])] = (
                job.get("gpu_type") if job.get("gpus") else None,
                list(job.get("input_tables", [])),
            )
        return []

    def on_replica(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        table, region, state = args[0], args[1], args[2]
        regions = self.ready.setdefault(table, set())
        if state == "ready":
            regions.add(region)
        else:
            regions.discard(region)
        return []

    def on_delete(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.ready.get(args[0], set()).discard(args[1])
        return []

    def on_copied(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            table, region, _bytes = result
            self.ready.setdefault(table, set()).add(region)
        return []

    def on_start(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result is None or not self.machines:
            return []
        key = (args[2], args[3])
        gpu_type, tables = self.jobs.get(key, (None, []))
        hosts = [h for h, _n in args[6]] + list(args[7])
        regions = {self.machines[h][0] for h in hosts if h in self.machines}
        out = []
        for region in sorted(regions):
            missing = [t for t in tables if region not in self.ready.get(t, set())]
            if missing:
                out.append(f"{key[0]}/{key[1]} started in {region} without ready {missing}")
        wrong = sorted(
            h for h, _n in args[6] if self.machines.get(h, (None, gpu_type))[1] != gpu_type
        )
        if wrong:
            out.append(f"{key[0]}/{key[1]} needs {gpu_type} but got {wrong}")
        return out


class QuotaChecker(_FactsChecker):
    name = "quota"
    _routes = {"queue.submit": "on_submit", "queue.rank": "on_rank"}
    tracks_queue = True

    def __init__(self) -> None:
        super().__init__()
        self.quota: dict[str, tuple[int, int]] = {}
        self.need: dict[str, tuple[str, int, int]] = {}

    def on_setup(self, type_: str, payload: Any) -> None:
        if type_ == "tenants":
            self.quota = {name: (gpu, cpu) for name, (_p, gpu, cpu) in payload.items()}

    def on_submit(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        spec = args[0]
        gpus = sum(j.get("gpus", 0) for j in spec["jobs"])
        cpus = sum(j.get("cpu_machines", 0) for j in spec["jobs"])
        self.need[spec["id"]] = (spec["tenant"], gpus, cpus)
        return []

    def on_rank(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if not result or not self.quota:
            return []
        used: dict[str, list[int]] = {}
        for wid, state in self.queue.items():
            if state not in ("DISPATCHING", "RUNNING"):
                continue
            tenant, gpus, cpus = self.need[wid]
            u = used.setdefault(tenant, [0, 0])
            u[0] += gpus
            u[1] += cpus
        out = []
        # The quota scan walks workloads by credit, highest first (ties by id).
        for wid, _priority, _credit, within in sorted(args[2], key=lambda r: (-r[2], r[0])):
            if not within:
                continue
            tenant, gpus, cpus = self.need[wid]
            u = used.setdefault(tenant, [0, 0])
            gpu_quota, cpu_quota = self.quota.get(tenant, (0, 0))
            if u[0] + gpus > gpu_quota or u[1] + cpus > cpu_quota:
                out.append(
                    f"{wid} ranked within quota but {tenant} would use "
                    f"{u[0] + gpus}/{gpu_quota} GPUs, {u[1] + cpus}/{cpu_quota} CPU machines"
                )
            u[0] += gpus
            u[1] += cpus
        return out


class LostWorkloadChecker(_StoreChecker):
    name = "no-lost-workload"
    # A workload RUNNING with nothing running this long is lost, not in transit.
    grace_us = 600_000_000
    _routes = {
        "queue.submit": "on_submit",
        "queue.award": "on_award",
        "queue.transition": "on_transition",
        "fleet.start": "on_start",
        "fleet.release": "on_release",
    }
    tracks_queue = True

    def __init__(self) -> None:
        super().__init__()
        self.alive: dict[str, set[str]] = {}
        self.idle_since: dict[str, int] = {}
        self.now_us = 0
        # Each workload's jobs, and how each ended (released DONE or STOPPED)
        # since the workload's last award: a DONE workload needs all of them DONE.
        self.jobs: dict[str, list[str]] = {}
        self.ended: dict[str, dict[str, str]] = {}

    def observe(self, event: TraceEvent) -> list[str]:
        self.now_us = event.t_us
        return super().observe(event)

    def on_submit(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        wid = args[0]["id"]
        if result and wid not in self.queue:
            self.jobs[wid] = sorted(j["name"] for j in args[0]["jobs"])
        if result and wid in self.queue:
            return [f"{wid} submitted twice"]
        if not result and wid not in self.queue:
            return [f"{wid} refused by the queue but never entered it"]
        return []

    def on_award(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        before = self.queue.get(args[2])
        if result:
            self.ended[args[2]] = {}  # a new attempt: every job has its work to do again
        if result and before not in QUEUED:
            return [f"{args[2]} awarded from state {before}"]
        return []

    def on_transition(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        if not result:
            return []
        wid, from_states, to_state = args[0], args[1], args[2]
        before = self.queue.get(wid)
        self._idle(wid, to_state)
        if before not in from_states:
            return [f"{wid} moved {from_states}→{to_state} while the checker saw it {before}"]
        if to_state == "DONE":
            return self._unfinished(wid)
        return []

    def _unfinished(self, wid: str) -> list[str]:
        # A gang that lost a job and let the rest finish would end DONE with
        # that job's work undone: lost as surely as a workload that vanished.
        ended = self.ended.get(wid, {})
        lost = [
            f"{j}: {ended.get(j, 'never released')}"
            for j in self.jobs.get(wid, ())
            if ended.get(j) != "DONE"
        ]
        if not lost:
            return []
        return [f"{wid} went DONE but not all its jobs finished their work ({'; '.join(lost)})"]

    def on_start(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result is not None:
            self.alive.setdefault(args[2], set()).add(args[3])
            self._idle(args[2])
        return []

    def on_release(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.alive.get(args[2], set()).discard(args[3])
            self._idle(args[2])
            self.ended.setdefault(args[2], {})[args[3]] = args[4]
        return []

    def _idle(self, wid: str, state: str | None = None) -> None:
        if (state or self.queue.get(wid)) == "RUNNING" and not self.alive.get(wid):
            self.idle_since.setdefault(wid, self.now_us)
        else:
            self.idle_since.pop(wid, None)

    def finish(self) -> list[str]:
        return [
            f"{wid} is RUNNING but none of its jobs has held machines since {since} µs"
            for wid, since in sorted(self.idle_since.items())
            if self.now_us - since > self.grace_us
        ]


CHECKERS = (
    AllocationChecker,
    GangChecker,
    AuctionChecker,
    PreemptionChecker,
    ColocationChecker,
    QuotaChecker,
    LostWorkloadChecker,
)
