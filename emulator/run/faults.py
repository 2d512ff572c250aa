"""Fault injection: the scenario's schedule and a seeded random nemesis.

Faults are kernel events. Each one is recorded in the trace as a `fault` event
with a phase (`start`/`end`), so reports can shade fault windows, and targets
are resolved when the fault fires: `leader of ROLE` is whoever holds the
lease at that instant, `a follower of ROLE`, `a minority of ROLE`, `all of
ROLE`, `region NAME` and `a live KIND` are the instances (or control-plane
actors, or live actors of a kind) of that instant (see
`emulator.run.targets.TARGET_FORMS`). A fault on several actors records one
window per actor; one that resolves to nobody is recorded with
`actor: None` and does nothing. A window's `start` event names its scheduled
end (`until_us`) when it has one, so the judges of what follows the faults
know when they stop even when that is after the run's end
(`emulator.liveness.HealClock`). The nemesis draws a whole schedule up front from the
`faults` stream (so it is part of the run's determinism), and always ends
with a final heal: every partition healed, every rule removed, every crashed
actor restarted, every node back up, every slow store fast again.

A slow store (`slow-store`) is per actor: the targets are resolved when the
fault fires and stay slowed for its whole window, whatever role they hold
meanwhile and across their restarts (think: a slow disk or store client on
their host). Overlapping windows on one actor slow it by the largest latency
of those open.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from emulator.run.scenario import (
    CrashFault,
    DelayFault,
    DownFault,
    DuplicateFault,
    Duration,
    Fault,
    HealFault,
    LossFault,
    NemesisSpec,
    PartitionFault,
    PauseFault,
    RestartFault,
    SlowStoreFault,
    UpFault,
    node_of,
)
from emulator.run.targets import LEADER_OF, instance_role, split_target
from emulator.units import MS

if TYPE_CHECKING:
    from emulator.kernel import Kernel


FAULT_CRASH_PREFIX = "fault #"


def fault_crash_reason(index: int) -> str:
    """The reason the kernel records for a crash that scheduled fault `index` caused."""
    return f"{FAULT_CRASH_PREFIX}{index}"


def fault_index(reason: str) -> int | None:
    """The fault index of a crash `fault_crash_reason` named; None for any other crash."""
    if not reason.startswith(FAULT_CRASH_PREFIX):
        return None
    number = reason.removeprefix(FAULT_CRASH_PREFIX)
    return int(number) if number.isdigit() else None


class FaultInjector:
    """Turns fault specs into kernel events and keeps the list of fault windows."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.windows: list[tuple[int, int | None, str]] = []
        self._crashed: set[str] = set()
        # Open slow-store windows: actor → {window id: latency µs}.
        self._slow: dict[str, dict[int, int]] = {}
        self._slow_seq = 0
        # Which follower, which minority: drawn in firing order, so a seed
        # always picks the same instances.
        self._pick = kernel.rng.stream("fault-targets")

    def schedule(self, faults: list[Fault], *, after_us: int | None = None) -> None:
        """Make `faults` kernel events at their times, each numbered by its place in `faults`.

        With `after_us` (a resumed run) only the faults later than that
        instant are scheduled, still numbered as in the whole list: the index
        is part of a crash fault's trace event, so it must be the one the
        uninterrupted run gave it.
        """
        for index, fault in enumerate(faults):
            if after_us is None or int(fault.at) > after_us:
                self.kernel.at(int(fault.at), self._fire, fault, index)

    def _trace(self, phase: str, action: str, detail: object) -> None:
        self.kernel.trace_event("fault", "", "", f"{action}.{phase}", detail)

    def instances(self, role: str) -> list[str]:
        """The instances of `role`: the actors addressed `ROLE/N`, up or not."""
        return [a for a in self.kernel.addresses() if instance_role(a) == role]

    def resolve(self, target: str) -> list[str]:
        """The actors a target names at this instant (none if, e.g., a role has no leader)."""
        k = self.kernel
        split = split_target(target)
        if split is None:
            return [target]
        form, name = split
        if form == "leader":
            leader = k.leader_of(name)
            return [leader] if leader is not None else []
        if form == "region":
            hosts = set(k.network.topology.control_hosts.get(name, ()))
            slots = [k.actor(a) for a in k.addresses()]
            return [s.address for s in slots if s is not None and s.host in hosts]
        if form == "live":
            live = [a for a in k.addresses() if k.is_up(a) and _kind(k.instance(a)) == name]
            return [self._pick.choice(live)] if live else []
        instances = self.instances(name)
        if form == "all":
            return instances
        if form == "follower":
            leader = k.leader_of(name)
            followers = [a for a in instances if a != leader and k.is_up(a)]
            return [self._pick.choice(followers)] if followers else []
        # A minority: the most instances whose loss a majority of them survives.
        count = min(len(instances), max(1, (len(instances) - 1) // 2))
        return sorted(self._pick.sample(instances, count))

    def _fire(self, fault: Fault, index: int) -> None:
        k = self.kernel
        now = k.now_us
        net = k.network
        if isinstance(fault, CrashFault):
            actors = self.resolve(fault.target)
            if not actors:
                skipped = {"target": fault.target, "actor": None, "index": index}
                self._trace("skipped", "crash", skipped)
            for actor in actors:
                restart_after = fault.restart_after
                if restart_after is None:
                    # A process its host supervises comes back on its own (`Actor`).
                    restart_after = k.supervised_restart_us(actor)
                detail = {"target": fault.target, "actor": actor, "index": index}
                if restart_after is not None:
                    detail["until_us"] = now + restart_after
                self._trace("start", "crash", detail)
                if k.crash(actor, fault_crash_reason(index), restart_after):
                    self._crashed.add(actor)
                end = now + restart_after if restart_after is not None else None
                self.windows.append((now, end, f"crash {actor}"))
                if restart_after is not None:
                    k.at(now + restart_after, self._trace, "end", "crash", {"actor": actor})
        elif isinstance(fault, RestartFault):
            actors = self.resolve(fault.target)
            if not actors:
                self._trace("skipped", "restart", {"target": fault.target, "actor": None})
            for actor in actors:
                # A restart is an instant, not a window: nothing for reports to shade.
                self._trace("instant", "restart", {"target": fault.target, "actor": actor})
                self._crashed.discard(actor)
                k.restart(actor)
        elif isinstance(fault, PauseFault):
            actors = self.resolve(fault.target)
            if not actors:
                self._trace("skipped", "pause", {"target": fault.target, "actor": None})
            end = now + fault.duration
            for actor in actors:
                detail = {"target": fault.target, "actor": actor, "until_us": end}
                self._trace("start", "pause", detail)
                k.pause(actor, fault.duration)
                self.windows.append((now, end, f"pause {actor}"))
                # The end is traced too, so reports close the window they shade.
                k.at(end, self._trace, "end", "pause", {"actor": actor})
        elif isinstance(fault, PartitionFault):
            end = now + fault.duration if fault.duration is not None else None
            if fault.regions is not None:
                a, b = fault.regions
                net.partition(a, b, True, now)
                k.flows_changed()
                self._trace("start", "partition", _until({"regions": [a, b]}, end))
                self.windows.append((now, end, f"partition {a}|{b}"))
                if end is not None:
                    k.at(end, self._heal_pair, a, b)
            elif fault.hosts is not None:
                a, b = fault.hosts
                net.partition_hosts(a, b, True)
                self._trace("start", "partition", _until({"hosts": [a, b]}, end))
                self.windows.append((now, end, f"partition {a}|{b}"))
                if end is not None:
                    k.at(end, self._heal_hosts, a, b)
        elif isinstance(fault, HealFault):
            self.heal()
        elif isinstance(fault, LossFault | DuplicateFault | DelayFault):
            pair = (fault.between[0], fault.between[1]) if fault.between else None
            if isinstance(fault, LossFault):
                rule = net.add_rule(pair, loss=fault.probability)
                action, detail = "loss", fault.probability
            elif isinstance(fault, DuplicateFault):
                rule = net.add_rule(pair, duplicate=fault.probability)
                action, detail = "duplicate", fault.probability
            else:
                rule = net.add_rule(pair, delay_us=round(fault.extra_ms * MS))
                action, detail = "delay", fault.extra_ms
            between = list(pair) if pair else None
            end = now + fault.duration
            start = {"between": between, "value": detail, "rule": rule, "until_us": end}
            self._trace("start", action, start)
            self.windows.append((now, end, f"{action} {pair or 'all'}"))
            k.at(end, self._end_rule, rule, action)
        elif isinstance(fault, DownFault):
            node = node_of(fault.node)
            end = now + fault.duration if fault.duration is not None else None
            k.set_host_state(node, up=False, until_us=end)
            self.windows.append((now, end, f"down {node}"))
            if end is not None:
                k.at(end, k.set_host_state, node, True)
        elif isinstance(fault, UpFault):
            k.set_host_state(node_of(fault.node), up=True)
        elif isinstance(fault, SlowStoreFault):
            actors = self.resolve(fault.target)
            if not actors:
                self._trace("skipped", "slow-store", {"target": fault.target, "actor": None})
            end = now + fault.duration
            for actor in actors:
                self._slow_seq += 1
                window = self._slow_seq
                self._slow.setdefault(actor, {})[window] = int(fault.latency)
                self._apply_slow(actor)
                detail = {
                    "target": fault.target,
                    "actor": actor,
                    "latency_us": int(fault.latency),
                    "until_us": end,
                }
                self._trace("start", "slow-store", detail)
                self.windows.append((now, end, f"slow-store {actor}"))
                k.at(end, self._end_slow, actor, window)

    def _apply_slow(self, actor: str) -> None:
        latencies = self._slow.get(actor)
        if latencies:
            self.kernel.store_latency_us[actor] = max(latencies.values())
        else:
            self._slow.pop(actor, None)
            self.kernel.store_latency_us.pop(actor, None)

    def _end_slow(self, actor: str, window: int) -> None:
        if self._slow.get(actor, {}).pop(window, None) is None:
            return  # a final heal ended it already
        self._apply_slow(actor)
        self._trace("end", "slow-store", {"actor": actor})

    def _heal_pair(self, a: str, b: str) -> None:
        if self.kernel.network.partition(a, b, False, self.kernel.now_us):
            self.kernel.flows_changed()
            self._trace("end", "partition", {"regions": [a, b]})

    def _heal_hosts(self, a: str, b: str) -> None:
        self.kernel.network.partition_hosts(a, b, False)
        self._trace("end", "partition", {"hosts": [a, b]})

    def _end_rule(self, rule: int, action: str) -> None:
        self.kernel.network.remove_rule(rule)
        self._trace("end", action, {"rule": rule})

    def heal(self) -> None:
        """Heal the network: partitions and loss/duplication/delay rules."""
        k = self.kernel
        k.network.heal_all(k.now_us)
        k.flows_changed()
        self._trace("end", "heal", None)

    def final_heal(self) -> None:
        """Heal everything: network, nodes, and restart actors crashed by faults."""
        k = self.kernel
        self.heal()
        for node in sorted(k.network.down):
            k.set_host_state(node, up=True)
        for actor in sorted(self._crashed):
            # One back already (its fault's restart) and gone since, as a job's
            # agent goes once it has reported, stays gone.
            if k.is_down(actor):
                k.restart(actor)
        self._crashed.clear()
        for actor in sorted(self._slow):
            for _ in self._slow[actor]:
                self._trace("end", "slow-store", {"actor": actor})
            self._slow[actor] = {}
            self._apply_slow(actor)
        self._trace("end", "final-heal", None)


def _until(detail: dict[str, object], end_us: int | None) -> dict[str, object]:
    """A window's start detail with its scheduled end, when it has one (`HealClock`)."""
    return detail if end_us is None else {**detail, "until_us": end_us}


def nemesis_schedule(
    spec: NemesisSpec,
    rng: random.Random,
    *,
    run_us: int,
    actors: list[str],
    roles: list[str],
    regions: list[str],
    nodes: list[str],
) -> tuple[list[Fault], int]:
    """Draw a random fault schedule; returns it and the time of the final heal.

    The caller schedules `FaultInjector.final_heal` at that time.

    Faults start at exponential intervals after `spec.start`, each lasting an
    exponential time around `duration_mean`, and none lasts past the heal.
    """
    heal_at = int(spec.heal_at) if spec.heal_at is not None else run_us * 9 // 10
    faults: list[Fault] = []
    t = int(spec.start)
    targets = [f"{LEADER_OF}{r}" for r in roles] + list(actors)
    while len(faults) < spec.faults_max:
        t += max(1, int(rng.expovariate(1.0 / max(1, spec.interval_mean))))
        if t >= heal_at:
            break
        length = max(MS, int(rng.expovariate(1.0 / max(1, spec.duration_mean))))
        length = min(length, heal_at - t)
        action = rng.choice(spec.actions)
        at, dur = Duration(t), Duration(length)
        if action == "crash" and targets:
            faults.append(CrashFault(at=at, target=rng.choice(targets), restart_after=dur))
        elif action == "pause" and targets:
            faults.append(PauseFault(at=at, target=rng.choice(targets), duration=dur))
        elif action == "slow-store" and targets:
            latency = max(MS, int(rng.expovariate(1.0 / max(1, spec.store_latency_mean))))
            faults.append(
                SlowStoreFault(
                    at=at, target=rng.choice(targets), duration=dur, latency=Duration(latency)
                )
            )
        elif action in ("partition", "loss", "duplicate", "delay") and len(regions) >= 2:
            a, b = rng.sample(regions, 2)
            if action == "partition":
                faults.append(PartitionFault(at=at, regions=[a, b], duration=dur))
            elif action == "loss":
                faults.append(
                    LossFault(
                        at=at, duration=dur, between=[a, b], probability=spec.loss_probability
                    )
                )
            elif action == "duplicate":
                faults.append(DuplicateFault(at=at, duration=dur, between=[a, b], probability=0.2))
            else:
                extra = round(rng.uniform(50, 2_000), 3)
                faults.append(DelayFault(at=at, duration=dur, between=[a, b], extra_ms=extra))
        elif action == "down" and nodes:
            faults.append(DownFault(at=at, node=rng.choice(nodes), duration=dur))
    return faults, heal_at


def _kind(instance: object) -> str | None:
    return getattr(type(instance), "kind", None)
