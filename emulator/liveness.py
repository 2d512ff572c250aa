"""Liveness after the final heal: reported beside the invariants, never as a violation.

Safety invariants hold at every instant; liveness can only be judged once
the faults stop. The final heal is the last fault event of the trace (the
end of the last fault window; the nemesis always closes with one), or the
run's start when there were no faults; but a window whose `start` event
names a scheduled end (`until_us`) later than that holds the heal back to
its end, even past the run's end (a crash restarting after the end: the
control plane was still dark, nothing is judged), unless a nemesis' final
heal ended every window first (`HealClock`). A system registers a judge that reads
the same trace events as the checkers and says, at the end of the history,
which of its units of work could have run after the final heal but never
did (`mastemu check` prints them as a separate section; the exit code stays
that of the invariants). What "could run" means belongs to the system:
MAST's judge is `actors/checks/liveness.py`.

The emulator never imports the system, so judges arrive through
`register_liveness`, as checkers do through `register_checker`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from emulator.trace import TraceEvent
from emulator.units import format_us

# How many stuck units the text lists before "… and N more".
LISTED_MAX = 10
# The fault event of a nemesis' final heal: every window ends there.
FINAL_HEAL = "final-heal.end"


@dataclass(frozen=True)
class Stuck:
    """A unit of work that could run after the final heal but never did."""

    id: str
    state: str
    since_us: int  # in this state since
    why: str  # why it could run, e.g. "fits us-east"


@dataclass
class LivenessReport:
    """A judge's verdict over one history."""

    judge: str
    final_heal_us: int
    end_us: int
    stuck: list[Stuck] = field(default_factory=list)
    # Waiting at the end but legitimately: no room anywhere, data not there yet.
    waiting_ok: int = 0
    # Waiting for less than the judge's grace (after the heal): too soon to say.
    too_recent: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "judge": self.judge,
            "final_heal_us": self.final_heal_us,
            "end_us": self.end_us,
            "stuck": [
                {"id": s.id, "state": s.state, "since_us": s.since_us, "why": s.why}
                for s in self.stuck
            ],
            "waiting_ok": self.waiting_ok,
            "too_recent": self.too_recent,
        }


class HealClock:
    """When the faults stopped, from the `fault` events of one history.

    A fault event moves the heal to its own instant; one that carries its
    window's scheduled end (`until_us`, `emulator/run/faults.py`) moves it to
    that end, which may lie past the run's end (its own `end` event then
    never comes). The nemesis' final heal ends every window but a pause's
    (it heals the network, brings nodes up, restarts crashed actors and
    ends slow stores; a paused actor wakes when its pause ends). A crash
    with no restart at all carries no end: the system must cope without
    that actor, so it does not hold the heal back.
    """

    def __init__(self) -> None:
        self.last_us = 0
        # Action ("crash", "pause", "down", …) → the latest scheduled end seen.
        self.until_us: dict[str, int] = {}

    def observe(self, event: TraceEvent) -> None:
        self.last_us = event.t_us
        if event.type == FINAL_HEAL:
            self.until_us = {a: t for a, t in self.until_us.items() if a == "pause"}
            return
        until = event.payload.get("until_us") if isinstance(event.payload, dict) else None
        if isinstance(until, int):
            action = event.type.rpartition(".")[0] or event.type
            self.until_us[action] = max(self.until_us.get(action, 0), until)

    @property
    def heal_us(self) -> int:
        return max(self.last_us, max(self.until_us.values(), default=0))


class LivenessJudge(Protocol):
    """Reads trace events of `kinds`, then judges the end of the history."""

    name: str
    kinds: tuple[str, ...]

    def observe(self, event: TraceEvent) -> None: ...

    def report(self, final_heal_us: int, end_us: int) -> LivenessReport | None:
        """The verdict, or None when the history holds nothing this judge judges."""
        ...


JUDGES: dict[str, Callable[[], LivenessJudge]] = {}


def register_liveness(name: str, factory: Callable[[], LivenessJudge]) -> None:
    JUDGES[name] = factory


class LivenessWatch:
    """Every registered judge, following one history event by event.

    Over a stored trace (`judge_liveness`, `mastemu check`) or a live run
    (`attach`: the tracer hands over the events of the judges' kinds, the
    faults that set the final heal, and the `run` event that ends the run).
    """

    def __init__(self) -> None:
        self.judges = [factory() for _, factory in sorted(JUDGES.items())]
        self.by_kind: dict[str, list[LivenessJudge]] = {}
        for judge in self.judges:
            for kind in judge.kinds:
                self.by_kind.setdefault(kind, []).append(judge)
        self.heal = HealClock()
        self.end_us = 0

    def observe(self, event: TraceEvent) -> None:
        self.end_us = event.t_us
        if event.kind == "fault":
            self.heal.observe(event)
        for judge in self.by_kind.get(event.kind, ()):
            judge.observe(event)

    def attach(self, kernel: Any) -> None:
        if self.judges:
            for kind in {*self.by_kind, "fault", "run"}:
                kernel.tracer.subscribe(kind, self.observe)

    def reports(self, may_wait: Iterable[str] = ()) -> list[LivenessReport]:
        """The verdicts of the judges with one, at the end of what was observed.

        The units of `may_wait` (a scenario's `invariants.may_wait`: left waiting
        on purpose) count as waiting, not stuck.
        """
        allowed = frozenset(may_wait)
        out = []
        for judge in self.judges:
            r = judge.report(self.heal.heal_us, self.end_us)
            if r is None:
                continue
            kept = [s for s in r.stuck if s.id not in allowed]
            excused = len(r.stuck) - len(kept)
            out.append(dataclasses.replace(r, stuck=kept, waiting_ok=r.waiting_ok + excused))
        return out


def judge_liveness(
    events: Iterable[TraceEvent], may_wait: Iterable[str] = ()
) -> list[LivenessReport]:
    """Run every registered judge over a whole history; verdicts of those with one."""
    watch = LivenessWatch()
    for event in events:
        watch.observe(event)
    return watch.reports(may_wait)


def stuck_summary(reports: list[LivenessReport]) -> str | None:
    """One line naming what was stuck after the final heal (None: nothing was)."""
    stuck = [s for r in reports for s in r.stuck]
    if not stuck:
        return None
    heal = format_us(max(r.final_heal_us for r in reports))
    shown = ", ".join(s.id for s in stuck[:3]) + (", …" if len(stuck) > 3 else "")
    return f"{len(stuck)} workload(s) stuck after the final heal at {heal}: {shown}"


def liveness_lines(reports: list[LivenessReport]) -> list[str]:
    """The `liveness:` section of `mastemu check`, one line per judge plus the stuck ones."""
    lines = []
    for r in reports:
        heal = format_us(r.final_heal_us)
        if r.final_heal_us > r.end_us:
            lines.append(
                f"liveness: not judged: a fault window lasts past the run's end, to {heal}"
            )
            continue
        others = []
        if r.waiting_ok:
            others.append(f"{r.waiting_ok} waiting cannot run (no room, or data on its way)")
        if r.too_recent:
            others.append(f"{r.too_recent} waiting too briefly to judge")
        note = f" ({'; '.join(others)})" if others else ""
        if not r.stuck:
            lines.append(
                f"liveness: every workload that can run ran after the final heal at {heal}{note}"
            )
            continue
        lines.append(
            f"liveness: {len(r.stuck)} workload(s) stuck after the final heal at {heal}{note}:"
        )
        for s in r.stuck[:LISTED_MAX]:
            lines.append(f"  {s.id} ({s.state} since {format_us(s.since_us)}; {s.why})")
        if len(r.stuck) > LISTED_MAX:
            lines.append(f"  … and {len(r.stuck) - LISTED_MAX} more")
    return lines
