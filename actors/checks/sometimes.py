"""The rare states of mastemu's protocols that a campaign should reach at least once.

Detectors for `emulator.sometimes`: each reads the decisions, store events
and faults a run recorded and names the rare states they show. They judge
nothing (the checkers do); they say what a campaign exercised. Each state
below is one where a bug would hide: a failover, an expiry, a race that a
calm run never enters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from emulator.trace import TraceEvent

LEASES = {
    "leader-failover": "a role changed leader: a new lease epoch after the first",
    "leader-lost-lease": "a leader found its lease gone (paused or cut off past its TTL)",
    "leader-back-at-expiry": "a holder asked for its lease at the very instant it expired "
    "(it must take a new epoch): the boundary an off-by-one in a lease check shows at",
}

MAST = {
    "gms-failover-mid-auction": "a new GMS leader took over while an auction was open",
    "rms-hold-expired": "an RMS hold on a bid's machines expired without an award "
    "(its Award or Release lost, or late)",
    "copy-resumed-after-partition": "a WAN copy in flight when a partition began made "
    "progress after it healed",
    "cm-takes-up-preemption": "a new CM leader took up a preempting plan its predecessor "
    "recorded (the victims' checkpoints finish under it)",
    "region-lost-and-back": "the GMS gave a dark region's workloads up, and later awarded "
    "that region an auction again",
    "plan-refused-machine-taken": "two plans counted on one machine; its CM refused the later",
    "late-bid": "a bid arrived after its auction was decided",
    "award-lost-cas": (
        "an award lost the queue's compare-and-set (its GMS no longer led, or the "
        "workload was withdrawn)"
    ),
    "dispatch-failed": "a dispatch failed and its workload went back to the queue",
    "gang-timeout": "a job's gang did not assemble in time and the attempt was given up",
    "data-fetched-on-demand": "a workload waiting for data had it copied on demand",
    "stale-end-dropped": "a job's end report came after its workload was dispatched again "
    "(an earlier attempt's, resent across failovers); its RMS dropped it",
}

CLUSTER = {
    "cluster-plan-refused": "a cluster CM refused a scheduler's plan (its machines changed)",
    "cluster-offer-declined": "a job's agent turned an offer down and the job waited again",
    "cluster-scheduler-rebuilt": "a new scheduler leader rebuilt its accounts from the fleet",
    "cluster-stale-end": "a job's end report came after the job was dispatched again; "
    "the scheduler dropped it",
    "cluster-started-unheard": "a dispatch timed out on a job its CM had started, its answer "
    "late; the job ran on",
    "cluster-stop-unstarted": "a job preempted before its start was heard never started "
    "(its plan refused, or lost with a leader); its run ended without a stop report",
    "cluster-stop-before-plan": "a stop order reached a CM before the plan it stopped "
    "(resent across a pause or a failover); the CM will refuse the plan",
}


class LeaseDetector:
    """Failovers and lost leases of any role (the lease demo, MAST, the cluster system)."""

    def __init__(self) -> None:
        self.leases: dict[str, tuple[str, int]] = {}  # role -> holder, expiry

    def observe(self, event: TraceEvent) -> Iterable[str]:
        if event.kind == "store":
            return self._granted(event) if event.type == "lease.acquire" else ()
        if event.kind != "decision":
            return ()
        if event.type == "lease.leader" and event.payload.get("epoch", 1) > 1:
            return ("leader-failover",)
        if event.type == "lease.lost":
            return ("leader-lost-lease",)
        return ()

    def _granted(self, event: TraceEvent) -> Iterable[str]:
        lease = event.payload[1]
        if not isinstance(lease, dict):
            return ()
        role, holder = lease["role"], lease["holder"]
        before = self.leases.get(role)
        self.leases[role] = (holder, lease["expires_at_us"])
        if before == (holder, event.t_us):
            return ("leader-back-at-expiry",)
        return ()


_MACHINE_TAKEN = ("held by another", "GPUs free, plan needs")


class MastDetector:
    """MAST's rare states, from the GMS's, RMSs', CMs' and migration's own records."""

    def __init__(self) -> None:
        self.open_auctions: set[int] = set()
        self.lost_regions: set[str] = set()
        self.copies: set[int] = set()  # copies that have made progress and are not over
        self.cut_off: set[int] = set()  # of those, the ones in flight when a partition began
        self.partitions = 0

    def observe(self, event: TraceEvent) -> Iterable[str]:
        kind = event.kind
        if kind == "store":
            return self._store(event)
        if kind == "fault":
            if event.type == "partition.start":
                self.partitions += 1
                self.cut_off |= self.copies
            elif event.type == "partition.end":
                self.partitions = max(0, self.partitions - 1)
            return ()
        if kind != "decision":
            return ()
        payload: Any = event.payload
        type_ = event.type
        if type_ == "lease.leader":
            if payload["role"] == "gms" and payload["epoch"] > 1 and self.open_auctions:
                return ("gms-failover-mid-auction",)
        elif type_ == "rms.unhold":
            if payload.get("why") == "expired":
                return ("rms-hold-expired",)
        elif type_ == "cm.plan-taken-up":
            if payload.get("victims"):
                return ("cm-takes-up-preemption",)
        elif type_ == "gms.region-lost":
            self.lost_regions.add(payload["region"])
        elif type_ == "auction.award":
            if payload["winner"] in self.lost_regions:
                self.lost_regions.discard(payload["winner"])
                return ("region-lost-and-back",)
        elif type_ == "cm.reject":
            if any(words in str(payload.get("why", "")) for words in _MACHINE_TAKEN):
                return ("plan-refused-machine-taken",)
        elif type_ in _ONE_EVENT:
            return (_ONE_EVENT[type_],)
        elif type_ == "migration.on-demand" and payload.get("region") is not None:
            return ("data-fetched-on-demand",)
        return ()

    def _store(self, event: TraceEvent) -> Iterable[str]:
        args, result = event.payload
        type_ = event.type
        if type_ == "auction.open":
            if result is not None:
                self.open_auctions.add(result)
        elif type_ == "auction.close":
            self.open_auctions.discard(args[0])
        elif type_ == "migration.progress":
            resumed = 0
            for copy_id, _, state in args[1]:
                if state in ("done", "cancelled"):
                    self.copies.discard(copy_id)
                else:
                    self.copies.add(copy_id)
                if copy_id in self.cut_off and not self.partitions:
                    self.cut_off.discard(copy_id)
                    resumed += 1
            return ("copy-resumed-after-partition",) * resumed
        elif type_ in ("migration.done", "migration.cancel"):
            self.copies.discard(args[1])
            self.cut_off.discard(args[1])
        return ()


# Decisions that are the rare state by themselves.
_ONE_EVENT = {
    "auction.late": "late-bid",
    "auction.lost-cas": "award-lost-cas",
    "dispatch.failed": "dispatch-failed",
    "agent.gang-timeout": "gang-timeout",
    "rms.stale-end": "stale-end-dropped",
}


class ClusterDetector:
    """The cluster system's rare states, from its scheduler's decisions."""

    def observe(self, event: TraceEvent) -> Iterable[str]:
        if event.kind != "decision" or event.type not in _CLUSTER_EVENTS:
            return ()
        if event.type == "cluster.rebuilt" and event.payload.get("epoch", 2) <= 1:
            return ()  # the first leader's build, in every run: not a failover's rebuild
        return (_CLUSTER_EVENTS[event.type],)


_CLUSTER_EVENTS = {
    "cluster.plan-refused": "cluster-plan-refused",
    "cluster.offer-declined": "cluster-offer-declined",
    "cluster.rebuilt": "cluster-scheduler-rebuilt",
    "cluster.stale-end": "cluster-stale-end",
    "cluster.started-unheard": "cluster-started-unheard",
    "cluster.stop-unstarted": "cluster-stop-unstarted",
    "cm.stop-before-plan": "cluster-stop-before-plan",
}


# ---- phases, for `mastemu explore` ---------------------------------------------------------
# A leader change this recent still counts as "failover" when the next fault begins.
FAILOVER_WINDOW_US = 60_000_000


def track_checkpoints(checkpointing: set[tuple[str, str]], type_: str, args: Any) -> str | None:
    """Keep the (workload, job)s a CM stopped that save their checkpoint, from one store
    call; returns the workload of a job whose machines were released (else None)."""
    if type_ == "fleet.state" and len(args) > 4 and args[4] == "CHECKPOINTING":
        checkpointing.add((args[2], args[3]))
    elif type_ == "fleet.checkpoint" and len(args) > 2:
        checkpointing.discard((args[1], args[2]))
    elif type_ == "fleet.release" and len(args) > 3:
        checkpointing.discard((args[2], args[3]))
        return str(args[2])
    return None


def phase_name(now_us: int, last_failover_us: int | None, **flags: object) -> str:
    """The phase's name: its true flags, `failover` if a leader changed within the
    last `FAILOVER_WINDOW_US`, sorted and joined by `+`; `calm` when none holds."""
    recent = last_failover_us is not None and now_us - last_failover_us <= FAILOVER_WINDOW_US
    on = [name for name, value in {**flags, "failover": recent}.items() if value]
    return "+".join(sorted(on)) or "calm"


class _PhaseTracker:
    """What MAST's and the cluster systems' phase trackers share: the time, the last
    failover, the jobs saving a checkpoint; each adds its own flags (`_flags`)."""

    def __init__(self) -> None:
        self.checkpointing: set[tuple[str, str]] = set()  # (workload, job) stopping
        self.last_failover_us: int | None = None
        self.now_us = 0

    def observe(self, event: TraceEvent) -> None:
        self.now_us = event.t_us
        if event.kind == "store":
            args, result = event.payload
            self._store(event.type, args, result)
        elif event.kind == "decision":
            payload: Any = event.payload
            if event.type == "lease.leader" and payload.get("epoch", 1) > 1:
                self.last_failover_us = event.t_us
            else:
                self._decision(event.type, payload)

    def _store(self, type_: str, args: Any, result: Any) -> None:
        raise NotImplementedError

    def _decision(self, type_: str, payload: Any) -> None:
        raise NotImplementedError

    def _flags(self) -> dict[str, object]:
        raise NotImplementedError

    def phase(self) -> str:
        return phase_name(
            self.now_us, self.last_failover_us, checkpointing=self.checkpointing, **self._flags()
        )


class MastPhase(_PhaseTracker):
    """Which of MAST's delicate phases a run is in: what a fault may land inside.

    The phase is the sorted set of: `auction` (an auction is open), `copy` (a
    WAN copy is in flight), `preempting` (a dispatch with victims whose
    waiting jobs have not yet started: the victims are saving their
    checkpoints), `checkpointing` (a CM stopped a job that is saving its
    checkpoint), `failover` (a leader changed within the last minute),
    `dark` (a region is given up); `calm` when none holds.
    """

    def __init__(self) -> None:
        super().__init__()
        self.auctions: set[int] = set()
        self.copies: set[int] = set()
        # Workload -> the victims (workload, job) its preempting dispatch waits
        # for: the phase lasts until every victim has released its machines
        # (its waiting jobs start then) or the dispatch fails.
        self.preempting: dict[str, set[tuple[str, str]]] = {}
        self.dark: set[str] = set()

    def _store(self, type_: str, args: Any, result: Any) -> None:
        if type_ == "auction.open" and result is not None:
            self.auctions.add(result)
        elif type_ == "auction.close":
            self.auctions.discard(args[0])
        elif type_ == "migration.progress":
            for copy_id, _, state in args[1]:
                (self.copies.discard if state in ("done", "cancelled") else self.copies.add)(
                    copy_id
                )
        elif type_ in ("migration.done", "migration.cancel"):
            self.copies.discard(args[1])
        elif track_checkpoints(self.checkpointing, type_, args) is not None:
            job = (args[2], args[3])
            for workload in [w for w, victims in self.preempting.items() if job in victims]:
                self.preempting[workload].discard(job)
                if not self.preempting[workload]:
                    del self.preempting[workload]

    def _decision(self, type_: str, payload: Any) -> None:
        if type_ == "rms.dispatch" and payload.get("victims"):
            self.preempting[payload["workload"]] = {(v[0], v[1]) for v in payload["victims"]}
        elif type_ == "dispatch.failed":
            self.preempting.pop(payload.get("workload", ""), None)
        elif type_ == "gms.region-lost":
            self.dark.add(payload["region"])
        elif type_ == "auction.award":
            self.dark.discard(payload["winner"])

    def _flags(self) -> dict[str, object]:
        return {
            "auction": self.auctions,
            "copy": self.copies,
            "dark": self.dark,
            "preempting": self.preempting,
        }


class ClusterPhase(_PhaseTracker):
    """Which of a cluster system's delicate phases a run is in (MastPhase's counterpart).

    The sorted set of: `dispatching` (a job awarded, its CM's start not yet
    heard), `preempting` (a job the policy preempted still holds its GPUs),
    `checkpointing` (a CM stopped a job that is saving its checkpoint),
    `failover` (a leader changed within the last minute); `calm` when none
    holds. Each is a window in which a late or lost message matters: the
    dispatch timeout and the stale end reports lived in the first.
    """

    def __init__(self) -> None:
        super().__init__()
        self.dispatching: set[str] = set()
        self.preempting: set[str] = set()

    def _store(self, type_: str, args: Any, result: Any) -> None:
        if type_ == "queue.award" and result and len(args) > 2:
            self.dispatching.add(args[2])
        elif type_ == "queue.transition" and result and len(args) > 2:
            if args[2] != "DISPATCHING":
                self.dispatching.discard(args[0])
        elif track_checkpoints(self.checkpointing, type_, args) is not None:
            self.preempting.discard(args[2])

    def _decision(self, type_: str, payload: Any) -> None:
        if type_ == "cluster.decision":
            self.preempting.update(payload.get("preempt", ()))

    def _flags(self) -> dict[str, object]:
        return {"dispatching": self.dispatching, "preempting": self.preempting}
