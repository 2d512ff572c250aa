"""Sometimes properties: rare states a campaign should reach, counted per run.

An invariant says what must never happen; a sometimes property names what
should happen at least once across a campaign (Antithesis's "sometimes
assertions"): a GMS failover while an auction is open, an RMS hold that
expires, a copy that resumes after a partition. A campaign that never
reaches one has not tested the code behind it, whatever its violation count.

A property is found in the trace, never announced by the code under test:
a detector reads recorded events (decisions, store events, faults) as a
checker does, and says which properties an event reaches. So reaching one
costs the run nothing, the trace hash is the same with or without
detectors, and any run database can be tallied after the fact (`check`).
Detectors read only what a `decisions`-level trace keeps.

Detectors come from plugins (`register_sometimes`), each with its catalogue
(name -> what it means) and the systems whose runs it reads (None: every
run). `tally` gives every catalogued name of the run's system a count, 0 for
the ones never reached, so "never" is visible, not absent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from emulator.trace import TraceEvent


class Detector(Protocol):
    """Reads a run's events in order; says which properties each event reaches."""

    def observe(self, event: TraceEvent) -> Iterable[str]: ...


@dataclass(frozen=True)
class DetectorSpec:
    factory: Callable[[], Detector]
    catalogue: Mapping[str, str]
    systems: frozenset[str] | None


_DETECTORS: dict[str, DetectorSpec] = {}


def register_sometimes(
    group: str,
    factory: Callable[[], Detector],
    catalogue: Mapping[str, str],
    systems: Iterable[str] | None = None,
) -> None:
    """Add (or replace) a group of detectors: names it may report, and for which systems.

    A property name is global: two groups may not both claim it.
    """
    for other, spec in _DETECTORS.items():
        taken = set(spec.catalogue) & set(catalogue)
        if other != group and taken:
            raise ValueError(f"sometimes {sorted(taken)} already belong to {other!r}")
    _DETECTORS[group] = DetectorSpec(
        factory, dict(catalogue), None if systems is None else frozenset(systems)
    )


def unregister_sometimes(group: str) -> None:
    _DETECTORS.pop(group, None)


class PhaseTracker(Protocol):
    """Follows a run's events and names the protocol phase it is in (for `explore`)."""

    def observe(self, event: TraceEvent) -> None: ...

    def phase(self) -> str: ...


_PHASES: dict[str, Callable[[], PhaseTracker]] = {}


def register_phases(system: str, factory: Callable[[], PhaseTracker]) -> None:
    """How runs of `system` tell their phases (a fault's phase is part of a run's coverage)."""
    _PHASES[system] = factory


def phase_tracker(system: str | None) -> PhaseTracker | None:
    factory = _PHASES.get(system) if system is not None else None
    return factory() if factory is not None else None


def _specs(system: str | None) -> list[DetectorSpec]:
    return [
        spec
        for _, spec in sorted(_DETECTORS.items())
        if spec.systems is None or (system is not None and system in spec.systems)
    ]


def catalogue(system: str | None) -> dict[str, str]:
    """Every property a run of `system` can reach (None: a run without a system)."""
    out: dict[str, str] = {}
    for spec in _specs(system):
        out.update(spec.catalogue)
    return dict(sorted(out.items()))


# What detectors read: what a `decisions`-level trace keeps too.
KINDS = ("decision", "store", "fault")


class Tally:
    """The detectors of one run and what they have found so far."""

    def __init__(self, system: str | None) -> None:
        self.counts = dict.fromkeys(catalogue(system), 0)
        self.detectors = [(spec.factory(), frozenset(spec.catalogue)) for spec in _specs(system)]

    def observe(self, event: TraceEvent) -> None:
        if event.kind not in KINDS:
            return
        for detector, names in self.detectors:
            for name in detector.observe(event):
                if name not in names:
                    raise ValueError(f"detector reported {name!r}, not in its catalogue")
                self.counts[name] += 1

    def attach(self, kernel: Any) -> None:
        """Follow a live run: the kernel's tracer hands over each event as it is traced."""
        if self.detectors:
            for kind in KINDS:
                kernel.tracer.subscribe(kind, self.observe)


def tally(events: Iterable[TraceEvent], system: str | None) -> dict[str, int]:
    """How often the run reached each property of its catalogue (0: never)."""
    found = Tally(system)
    for event in events:
        found.observe(event)
    return found.counts


@dataclass(frozen=True)
class Coverage:
    """A campaign's catalogue: per property, the runs that reached it and how often."""

    description: str
    runs: int = 0
    count: int = 0


def merge(
    tallies: Iterable[Mapping[str, int]], described: Mapping[str, str]
) -> dict[str, Coverage]:
    """Fold per-run tallies into the campaign's catalogue (every described name kept)."""
    out = {name: Coverage(text) for name, text in described.items()}
    for counts in tallies:
        for name, n in counts.items():
            if n:
                old = out.get(name, Coverage(described.get(name, "")))
                out[name] = Coverage(old.description, old.runs + 1, old.count + n)
    return dict(sorted(out.items()))


def coverage_lines(cover: Mapping[str, Coverage], runs: int, unit: str = "seeds") -> list[str]:
    """The catalogue for people: reached ones with counts, then the ones never reached."""
    if not cover:
        return []
    reached = {n: c for n, c in cover.items() if c.runs}
    lines = [f"sometimes: {len(reached)} of {len(cover)} reached over {runs} {unit}"]
    width = max(len(n) for n in cover)
    for name, c in reached.items():
        lines.append(f"  {name:<{width}}  {c.runs:>5} {unit}  {c.count:>6}x  {c.description}")
    for name, c in cover.items():
        if not c.runs:
            lines.append(f"  {name:<{width}}  never reached      {c.description}")
    return lines


def coverage_json(cover: Mapping[str, Coverage]) -> dict[str, dict[str, object]]:
    return {
        name: {"runs": c.runs, "count": c.count, "description": c.description}
        for name, c in cover.items()
    }
