"""One run of a schedule and the coverage signature it yields."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.run.coverage import system_kind
from emulator.run.failures import INTERNAL_ERROR, beyond_invariants
from emulator.run.pools import ship_db, worker_tempdir
from emulator.run.runaway import RUNAWAY
from emulator.run.runner import remove_run_files
from emulator.run.scenario import (
    Fault,
    convert_scenario,
    parse_raw,
)
from emulator.run.shrink import Schedule, variant
from emulator.run.targets import LEADER_OF, instance_role
from emulator.sometimes import (
    KINDS,
    Tally,
    phase_tracker,
)
from emulator.trace import TraceEvent

# Windows kept per phase flag: enough to aim at, little to ship back from a worker.
WINDOWS_MAX = 12
# Actors remembered per window (who made decisions while the phase held).
WINDOW_ACTORS_MAX = 8
# Takeover delays kept per run, and the longest believed one: a leader lost
# longer ago than this was not what the next takeover answered.
TAKEOVERS_MAX = 16
TAKEOVER_MAX_US = 5 * 60_000_000
# Lease grants and renewals kept per run, spread over it (`_Renewals`).
RENEWALS_MAX = 32


@dataclass(frozen=True)
class Window:
    """A stretch of emulated time in which a phase flag held, and who acted in it.

    Learned from the trace, so a mutation can aim a fault inside it: the same
    seed with the same faults before `start_us` reaches the same window again.
    """

    flag: str
    start_us: int
    end_us: int
    actors: tuple[str, ...]


class _Windows:
    """Follows a phase tracker's flags and records when each one held."""

    def __init__(self) -> None:
        # Flag -> (start, actors in the order they first acted: the phase's opener first).
        self.open: dict[str, tuple[int, list[str]]] = {}
        self.done: list[Window] = []
        self.counts: Counter[str] = Counter()
        self.last_phase = "calm"

    def step(self, phase: str, event: TraceEvent) -> None:
        now = event.t_us
        if phase != self.last_phase:
            flags = set() if phase == "calm" else set(phase.split("+"))
            for flag in [f for f in self.open if f not in flags]:
                self._close(flag, now)
            for flag in sorted(flags - set(self.open)):
                # The event that opened the phase is the opener's.
                opener = [event.src] if event.src else []
                self.open[flag] = (now, opener)
            self.last_phase = phase
        if self.open and event.src and event.kind != "fault":
            for _, actors in self.open.values():
                if len(actors) < WINDOW_ACTORS_MAX and event.src not in actors:
                    actors.append(event.src)

    def _close(self, flag: str, now: int) -> None:
        start, actors = self.open.pop(flag)
        self.counts[flag] += 1
        if self.counts[flag] <= WINDOWS_MAX:
            self.done.append(Window(flag, start, now, tuple(actors)))

    def finish(self, now: int) -> tuple[Window, ...]:
        for flag in sorted(self.open):
            self._close(flag, now)
        return tuple(self.done)


@dataclass(frozen=True)
class Renewal:
    """A lease taken or renewed in a run, and when its holder next asked for it.

    A fault that begins between `at_us` and `next_us` finds the lease as this
    left it, valid until `expires_us`: an `expiry` mutation pauses the holder
    until exactly then, the boundary an off-by-one in a lease check shows at.
    """

    role: str
    holder: str
    at_us: int
    expires_us: int
    next_us: int  # the holder's next grant or renewal of the role (else the expiry)


class _Renewals:
    """Follows `lease.acquire` store events; keeps an even sample of the run's renewals."""

    def __init__(self) -> None:
        self.pending: dict[str, tuple[str, int, int]] = {}  # role -> holder, at, expiry
        self.kept: list[Renewal] = []
        self.seen = 0
        self.stride = 1  # keep every stride-th: doubled whenever the sample fills up

    def step(self, event: TraceEvent) -> None:
        result = event.payload[1] if isinstance(event.payload, list | tuple) else None
        if not isinstance(result, dict):
            return  # refused: the holder's lease (if any) stays as it was
        role, holder = str(result["role"]), str(result["holder"])
        previous = self.pending.get(role)
        if previous is not None:
            who, at, expires = previous
            self._keep(Renewal(role, who, at, expires, event.t_us if who == holder else expires))
        self.pending[role] = (holder, event.t_us, int(result["expires_at_us"]))

    def _keep(self, renewal: Renewal) -> None:
        self.seen += 1
        if self.seen % self.stride:
            return
        self.kept.append(renewal)
        if len(self.kept) >= 2 * RENEWALS_MAX:
            self.kept = self.kept[1::2]
            self.stride *= 2

    def finish(self) -> tuple[Renewal, ...]:
        for role, (holder, at, expires) in sorted(self.pending.items()):
            self._keep(Renewal(role, holder, at, expires, expires))
        self.pending.clear()
        return tuple(self.kept)


# ---- one run and its signature ----------------------------------------------------
class Features:
    """The run's coverage signature, collected as it runs (module docstring)."""

    def __init__(self, system: str | None) -> None:
        self.tally = Tally(system)
        self.phase = phase_tracker(system)
        self.decisions: Counter[str] = Counter()
        self.found: set[str] = set()
        self.last_decision = "-"
        self.failure: tuple[str, str] | None = None
        self.windows = _Windows()
        self.phases: set[str] = set()  # every phase combination the run was in
        self.now_us = 0
        # Role -> when its leader was crashed or paused and nobody took over yet.
        self.lost: dict[str, int] = {}
        self.takeovers: list[int] = []  # from a leader lost to the next epoch of its role
        self.renewals = _Renewals()

    def observe(self, event: TraceEvent) -> None:
        self.tally.observe(event)
        self.now_us = event.t_us
        now = "any"
        if self.phase is not None:
            self.phase.observe(event)
            now = self.phase.phase()
            self.phases.add(now)
            self.windows.step(now, event)
        if event.kind == "decision":
            if event.type == "lease.leader":
                self._took_over(event)
            self.decisions[event.type] += 1
            # By whom, as a kind of actor (`rms`, not `rms/us-east/1`): the same
            # bug met through another region or replica is the same failure.
            self.last_decision = f"{event.type} by {event.src.split('/', 1)[0]}"
        elif event.kind == "store":
            if event.type == "lease.acquire":
                self.renewals.step(event)
        elif event.kind == "fault" and event.type.endswith(".start"):
            action = event.type.removesuffix(".start")
            self.found.add(f"F:{action}@{now}")
            # Which kind of actor it hit too: a crash of a CM and of the GMS
            # inside one phase are different experiments.
            actor = event.payload.get("actor") if isinstance(event.payload, dict) else None
            if isinstance(actor, str):
                self.found.add(f"F:{action}:{actor.split('/', 1)[0]}@{now}")
                target = event.payload.get("target")
                role = instance_role(actor)
                if action in ("crash", "pause") and role and str(target).startswith(LEADER_OF):
                    self.lost.setdefault(role, event.t_us)
        elif event.kind == "violation":
            self.found.add(f"V:{event.type}")
            if self.failure is None:
                self.failure = (event.type, self.last_decision)

    def _took_over(self, event: TraceEvent) -> None:
        """How long after its leader was lost a role's next epoch began: what an
        aimed fault must lead a phase by for the takeover to land inside it."""
        payload = event.payload if isinstance(event.payload, dict) else {}
        since = self.lost.pop(str(payload.get("role")), None)
        if since is None or len(self.takeovers) >= TAKEOVERS_MAX:
            return
        if 0 < event.t_us - since <= TAKEOVER_MAX_US:
            self.takeovers.append(event.t_us - since)

    def attach(self, kernel: Any) -> None:
        for kind in (*KINDS, "violation"):
            kernel.tracer.subscribe(kind, self.observe)

    def signature(self) -> frozenset[str]:
        out = set(self.found)
        out.update(f"S:{name}" for name, n in self.tally.counts.items() if n)
        out.update(f"D:{t}:{int(math.log2(n))}" for t, n in self.decisions.items())
        out.update(f"P:{p}" for p in self.phases if p != "calm")
        return frozenset(out)


@dataclass(frozen=True)
class Outcome:
    """What one run of a schedule gave the search (plain data: it may come from a worker)."""

    signature: frozenset[str]
    counts: dict[str, int]
    failure: tuple[str, str] | None
    status: str
    cpu_s: float
    files: dict[str, bytes] = field(default_factory=dict)  # a shipped failing run's database
    windows: tuple[Window, ...] = ()  # when each phase held (aimed mutations read them)
    phase_counts: dict[str, int] = field(default_factory=dict)  # windows per flag, all of them
    takeovers: tuple[int, ...] = ()  # microseconds from a leader lost to its successor
    renewals: tuple[Renewal, ...] = ()  # a sample of the run's lease renewals
    events: int = 0  # the kernel's (a runaway's measure: `emulator.run.runaway`)


def run_schedule(
    raw: dict[str, Any],
    heal_at_us: int | None,
    seed: int,
    faults: tuple[Fault, ...],
    db: Path,
    events_max: int | None = None,
) -> Outcome:
    """Run the scenario with exactly these faults into `db`; what the search learns of it.

    A run past `events_max` events is stopped there, a failure (`runaway`).
    """
    from emulator.run.runner import plan_run
    from emulator.run.watched import run_watched

    cpu0 = time.process_time()
    schedule = Schedule(list(faults), heal_at_us)
    text = json.dumps(variant(raw, schedule, range(len(faults)), _inv(raw)))
    scenario = convert_scenario(parse_raw(text, "<explore>"), "<explore>")
    features = Features(system_kind(scenario.system))
    remove_run_files(db)
    plan = plan_run(scenario, text, "<explore>")
    try:
        run = run_watched(plan, seed, db, events_max, features.attach)
    except Exception as error:  # a bug of the emulator's: this run's failure, not the search's
        bug = (INTERNAL_ERROR, type(error).__name__)
        return Outcome(features.signature(), {}, bug, INTERNAL_ERROR, time.process_time() - cpu0)
    # An actor dying on an exception of its own, or work that never ran after the
    # final heal, is a bug found as a violation is (`emulator.run.failures`).
    result = run.result
    failure = features.failure
    if failure is None and run.runaway:
        failure = (RUNAWAY, run.cap.detail())
    if failure is None:
        others = beyond_invariants(
            result.actor_errors, result.status, scenario.invariants, run.watch.reports
        )
        failure = others[0] if others else None
    return Outcome(
        features.signature(),
        dict(features.tally.counts),
        failure,
        RUNAWAY if run.runaway else result.status,
        time.process_time() - cpu0,
        events=result.events,
        windows=features.windows.finish(features.now_us),
        phase_counts=dict(features.windows.counts),
        takeovers=tuple(features.takeovers),
        renewals=features.renewals.finish(),
    )


def run_schedule_shipped(
    raw: dict[str, Any],
    heal_at_us: int | None,
    seed: int,
    faults: tuple[Fault, ...],
    events_max: int | None = None,
) -> Outcome:
    """`run_schedule` on a worker: its own scratch folder, a failing database shipped back."""
    with worker_tempdir() as workdir:
        db = Path(workdir) / "run.db"
        outcome = run_schedule(raw, heal_at_us, seed, faults, db, events_max)
        if outcome.failure is None:
            return outcome
        return dataclasses.replace(outcome, files=ship_db(db))


def _inv(raw: dict[str, Any]) -> dict[str, Any]:
    """The scenario's invariants, stopping at the first violation (the rest of a
    failing run is not worth its time)."""
    invariants = dict(raw.get("invariants", {}))
    invariants["stop_on_violation"] = True
    return invariants
