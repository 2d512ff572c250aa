"""Assertions about a run, in the protocol's terms, that show the trace where they fail.

- `assert_clean(run)`: no invariant violated, no actor died on an exception
  of its own, the run reached its end.
- `assert_eventually(run, predicate, within=…)`: some event satisfies the
  predicate (by `within` µs of emulated time, if given).
- `assert_never(run, predicate)`: no event does.

A predicate takes a `NamedEvent` (fields by name: `e.kind`, `e.type`,
`e.job_name`, `e.msg`…). A failure says what went wrong, where in the trace
(seq and time), shows the events around that point, and ends with the
command that reproduces the run.
"""

from __future__ import annotations

from collections.abc import Callable

from emulator.run.events import NamedEvent
from emulator.testing.runs import Run
from emulator.units import format_us

Predicate = Callable[[NamedEvent], bool]
# Events shown around the point where an assertion failed.
CONTEXT_EVENTS = 6


def assert_clean(run: Run) -> None:
    """The run ended ok: no violation, no actor error, not cut short by a failure."""
    problems: list[str] = []
    for v in run.violations:
        problems.append(f"VIOLATION {v.invariant} at #{v.seq} ({format_us(v.t_us)}): {v.message}")
    for e in run.actor_errors:
        problems.append(f"ACTOR ERROR at #{e.seq} ({format_us(e.t_us)}): {e.describe()}")
    if not problems and run.status == "ok":
        return
    first = run.violations[0].seq if run.violations else None
    if run.actor_errors and (first is None or run.actor_errors[0].seq < first):
        first = run.actor_errors[0].seq
    lines = [f"run {run.scenario_name} (seed {run.seed}) ended {run.status}:", *problems]
    if first is not None:
        lines += ["trace around it:", *_around(run, first)]
    lines.append(f"reproduce: {run.reproduce}")
    raise AssertionError("\n".join(lines))


def assert_eventually(run: Run, predicate: Predicate, within: int | None = None) -> NamedEvent:
    """The first event satisfying `predicate` (at or before `within` µs); returns it."""
    for event in run.events():
        if within is not None and event.t_us > within:
            break
        if predicate(event):
            return event
    trace = run.trace()
    if within is not None:
        # Show where the deadline fell, not the end of the run.
        before = [e for e in trace if e.t_us <= within]
        at, where = (before[-1].seq if before else 0), f"trace at {format_us(within)}:"
    else:
        at, where = (trace[-1].seq if trace else 0), "trace at its end:"
    bound = f" within {format_us(within)}" if within is not None else ""
    lines = [
        f"no event satisfied the predicate{bound} in run {run.scenario_name} (seed {run.seed})",
        where,
        *_around(run, at),
        f"reproduce: {run.reproduce}",
    ]
    raise AssertionError("\n".join(lines))


def assert_never(run: Run, predicate: Predicate) -> None:
    """No event satisfies `predicate`."""
    for event in run.events():
        if predicate(event):
            lines = [
                f"event #{event.seq} at {format_us(event.t_us)} satisfied the predicate in run "
                f"{run.scenario_name} (seed {run.seed}):",
                *_around(run, event.seq),
                f"reproduce: {run.reproduce}",
            ]
            raise AssertionError("\n".join(lines))


def _around(run: Run, seq: int) -> list[str]:
    trace = run.trace()
    at = next((i for i, e in enumerate(trace) if e.seq >= seq), len(trace) - 1)
    lo, hi = max(0, at - CONTEXT_EVENTS), min(len(trace), at + CONTEXT_EVENTS + 1)
    out = []
    for event in trace[lo:hi]:
        mark = ">>" if event.seq == seq else "  "
        payload = repr(event.payload)
        if len(payload) > 100:
            payload = payload[:97] + "..."
        out.append(
            f"{mark} #{event.seq:<8} {format_us(event.t_us):>16} {event.kind:<8} "
            f"{event.src or '·'} → {event.dst or '·'} {event.type} {payload}"
        )
    return out
