"""The faults a mutation may draw, from the scenario's world and roles."""

from __future__ import annotations

import random
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from emulator.run.explore.features import Renewal
from emulator.run.scenario import (
    CrashFault,
    DelayFault,
    DownFault,
    DuplicateFault,
    Fault,
    LossFault,
    PartitionFault,
    PauseFault,
    Scenario,
    SlowStoreFault,
)
from emulator.run.shrink import Schedule
from emulator.run.targets import ALL_OF
from emulator.units import MS, Duration

ACTIONS = ("crash", "pause", "partition", "loss", "duplicate", "delay", "down", "slow-store")


# ---- what a schedule can hold -------------------------------------------------------
@dataclass(frozen=True)
class FaultSpace:
    """The faults a mutation may draw: kinds, targets, regions, nodes and when."""

    actions: tuple[str, ...]
    targets: tuple[str, ...]
    regions: tuple[str, ...]
    nodes: tuple[str, ...]
    start_us: int
    end_us: int
    duration_mean_us: int
    roles: tuple[str, ...] = ()  # every role of the run, for the nemesis of a fresh seed
    # `all of ROLE` for roles with several instances: a whole role down at once
    # (a region's every RMS) is a fault no single-actor draw makes.
    groups: tuple[str, ...] = ()
    # The system's own timeouts and periods (`system_timeouts`), for `timed`.
    timeouts: tuple[int, ...] = ()
    # The same with the durations its actors' params set besides (a dispatch
    # timeout, a stop timeout, a hold's TTL), for `explore --grid`.
    clocks: tuple[int, ...] = ()

    def draw(
        self,
        rng: random.Random,
        at_us: int | None = None,
        action: str | None = None,
        target: str | None = None,
    ) -> Fault | None:
        """A random fault; `at_us`, `action` or `target` fix that part (an aimed fault)."""
        action = action or rng.choice(self.actions)
        if at_us is None:
            at_us = rng.randrange(self.start_us, max(self.start_us + 1, self.end_us))
        at = Duration(min(max(0, at_us), max(0, self.end_us - 1)))
        room = max(MS, self.end_us - int(at))
        length = Duration(min(room, max(MS, int(rng.expovariate(1.0 / self.duration_mean_us)))))
        if action in ("crash", "pause", "slow-store") and self.targets:
            target = target or self._target(rng)
            if action == "crash":
                return CrashFault(at=at, target=target, restart_after=length)
            if action == "pause":
                return PauseFault(at=at, target=target, duration=length)
            latency = Duration(max(MS, int(rng.expovariate(1.0 / (20 * MS)))))
            return SlowStoreFault(at=at, target=target, duration=length, latency=latency)
        if action == "partition" and len(self.regions) >= 2:
            return PartitionFault(at=at, regions=rng.sample(self.regions, 2), duration=length)
        if action in ("loss", "duplicate", "delay"):
            # Between two regions; in a one-region world (the cluster systems') on
            # every link, so its LAN's messages are lost, repeated and late too.
            pair = rng.sample(self.regions, 2) if len(self.regions) >= 2 else None
            if action == "loss":
                return LossFault(at=at, duration=length, between=pair, probability=0.3)
            if action == "duplicate":
                return DuplicateFault(at=at, duration=length, between=pair, probability=0.3)
            extra = round(rng.uniform(50, 2_000), 3)
            return DelayFault(at=at, duration=length, between=pair, extra_ms=extra)
        if action == "down" and self.nodes:
            return DownFault(at=at, node=rng.choice(self.nodes), duration=length)
        return None

    def _target(self, rng: random.Random) -> str:
        # A group now and then: most bugs need one actor down, a few a whole role.
        if self.groups and rng.random() < 0.15:
            return rng.choice(self.groups)
        return rng.choice(self.targets)

    def timed(self, fault: Fault, rng: random.Random, acted: Sequence[str] = ()) -> Fault:
        """`fault` lasting one of the system's timeouts, or two of them back to back.

        Exactly that long half the time (a bug at the edge: a pause as long as
        a lease), else a quarter longer (past it: an outage that outlasts the
        time after which a region is given up). A crash or a pause now and then
        takes a whole role down instead: only then does no instance take over
        within a lease, so only then does a long outage reach the timeouts above it;
        most often a role of `acted` (roles whose actors acted in the parent's run).
        """
        name = length_field(fault)
        if name is None or not self.timeouts:
            return fault
        length = rng.choice(self.timeouts)
        if rng.random() < 0.5:
            length += rng.choice(self.timeouts)
        if rng.random() < 0.5:
            length += length // 4
        fault = self.with_length(fault, length)
        if isinstance(fault, CrashFault | PauseFault) and self.groups and rng.random() < 0.5:
            near = [g for g in self.groups if g.removeprefix(ALL_OF) in acted]
            pool = near if near and rng.random() < 0.75 else self.groups
            fault = msgspec.structs.replace(fault, target=rng.choice(pool))
        return fault

    def with_length(self, fault: Fault, length_us: int) -> Fault:
        """`fault` lasting `length_us`, at least a millisecond and at most until the
        fault span ends (a fault without a length is returned as it is)."""
        name = length_field(fault)
        if name is None:
            return fault
        room = max(MS, self.end_us - int(fault.at))
        return msgspec.structs.replace(fault, **{name: Duration(min(room, max(MS, length_us)))})

    def lasting(self, fault: Fault, at_least_us: int) -> Fault:
        """`fault` lasting at least `at_least_us` (within the fault span)."""
        name = length_field(fault)
        if name is None:
            return fault
        return self.with_length(fault, max(int(getattr(fault, name)), at_least_us))

    def until_expiry(self, renewal: Renewal, rng: random.Random) -> PauseFault:
        """A pause of `renewal`'s holder, begun after it and before the holder's
        next renewal, that ends at the very instant the renewed lease expires."""
        room = max(0, min(renewal.next_us, renewal.expires_us) - renewal.at_us - 2)
        at = renewal.at_us + 1 + int(room * rng.random())
        return PauseFault(
            at=Duration(at), target=renewal.holder, duration=Duration(renewal.expires_us - at)
        )

    def retarget(self, fault: Fault, rng: random.Random) -> Fault:
        if isinstance(fault, CrashFault | PauseFault | SlowStoreFault) and self.targets:
            return msgspec.structs.replace(fault, target=self._target(rng))
        if isinstance(fault, PartitionFault) and fault.regions and len(self.regions) >= 2:
            return msgspec.structs.replace(fault, regions=rng.sample(self.regions, 2))
        if isinstance(fault, LossFault | DuplicateFault | DelayFault) and len(self.regions) >= 2:
            return msgspec.structs.replace(fault, between=rng.sample(self.regions, 2))
        if isinstance(fault, DownFault) and self.nodes:
            return msgspec.structs.replace(fault, node=rng.choice(self.nodes))
        return fault


def system_timeouts(params: Any, longest_us: int) -> tuple[int, ...]:
    """Every duration a system's parameters set, up to `longest_us`: its leases,
    deadlines, periods and costs (fields typed `Duration`, in nested settings too)."""
    found = {us for us in _durations(params, 0) if MS <= us <= longest_us}
    return tuple(sorted(found))


def _durations(obj: Any, depth: int) -> Iterator[int]:
    if depth > 4 or not isinstance(obj, msgspec.Struct):
        return
    for field in msgspec.structs.fields(obj):
        value = getattr(obj, field.name)
        if isinstance(value, msgspec.Struct):
            yield from _durations(value, depth + 1)
        elif isinstance(value, int) and not isinstance(value, bool) and _is_duration(field.type):
            yield int(value)


def _is_duration(tp: Any) -> bool:
    if isinstance(tp, type):
        return issubclass(tp, Duration)
    return any(_is_duration(arg) for arg in typing.get_args(tp))


def length_field(fault: Fault) -> str | None:
    for name in ("duration", "restart_after"):
        if getattr(fault, name, None) is not None:
            return name
    return None


def front_load(faults: tuple[Fault, ...], space: FaultSpace, factor: float) -> tuple[Fault, ...]:
    """The same faults, `factor` times closer to the start of the fault span.

    A run stops at its first violation, so a schedule whose faults come early
    fails early and costs less; the faults keep their order and lengths.
    """
    start = space.start_us
    out = []
    for fault in faults:
        at = int(fault.at)
        if at > start:
            at = start + int((at - start) / factor)
        out.append(msgspec.structs.replace(fault, at=Duration(at)))
    return tuple(out)


def fresh_schedule(plan: Any, space: FaultSpace, seed: int) -> tuple[Fault, ...]:
    """The faults a run of `seed` has as the scenario stands: its own, then its nemesis'."""
    from emulator.net.topology import Topology
    from emulator.run.runner import fault_schedule

    drawn = fault_schedule(plan, seed, list(space.roles), Topology(plan.scenario.world.regions))
    return tuple(drawn.scenario + drawn.nemesis)


def fault_space(plan: Any, seed: int, schedule: Schedule) -> FaultSpace:
    """What the scenario's world and roles allow, over the span its faults may use."""
    from emulator.net.topology import Topology
    from emulator.run.runner import build_system
    from emulator.run.targets import LEADER_OF, LIVE, instance_role

    scenario: Scenario = plan.scenario
    build = build_system(plan, seed)
    roles = sorted(set(plan.roles) | set(build.roles if build is not None else []))
    topology = Topology(scenario.world.regions)
    actors = [a for a, *_ in plan.actors]
    # A system's own actors (replicas `ROLE/N`) come with its build, not the plan.
    every = actors + [a for a, *_ in (build.actors if build is not None else [])]
    workers = build.workers if build is not None else ()
    nemesis = scenario.nemesis
    actions = tuple(nemesis.actions) if nemesis.enabled else ACTIONS
    run_us = int(scenario.duration)
    end = schedule.heal_at_us if schedule.heal_at_us is not None else run_us * 9 // 10
    start = min(int(nemesis.start) if nemesis.enabled else run_us // 20, end - 1)
    timeouts = system_timeouts(plan.system_params, max(1, end - start))
    return FaultSpace(
        actions=actions,
        targets=tuple(
            [f"{LEADER_OF}{r}" for r in roles] + actors + [f"{LIVE}{k}" for k in workers]
        ),
        regions=tuple(topology.regions),
        nodes=tuple(sorted(topology.machines)),
        start_us=max(0, start),
        end_us=max(1, end),
        duration_mean_us=max(MS, int(nemesis.duration_mean)),
        roles=tuple(roles),
        groups=tuple(
            f"{ALL_OF}{r}" for r in roles if sum(instance_role(a) == r for a in every) >= 2
        ),
        timeouts=timeouts,
        clocks=_clocks(timeouts, build, max(1, end - start)),
    )


def _clocks(timeouts: tuple[int, ...], build: Any, longest_us: int) -> tuple[int, ...]:
    """The system's `timeouts` and every duration its actors' params set (`ActorFactory`)."""
    found = set(timeouts)
    seen: set[int] = set()
    for *_, factory in build.actors if build is not None else []:
        params = getattr(factory, "params", None)
        if params is not None and id(params) not in seen:
            seen.add(id(params))
            found.update(system_timeouts(params, longest_us))
    return tuple(sorted(found))
