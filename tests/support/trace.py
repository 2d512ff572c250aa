"""Reading a run's trace by name: the facts scripted stories judge.

Every reader here names its events with `emulator.run.events.named`, so a
test says which field it reads (`e.job_name`, `e.result`), never where the
field sits in a payload. Readers take the events as a run gives them
(`tests.support.dsl.run`, `tests.support.rundb.trace_events`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from emulator.run.events import NamedEvent, named
from emulator.trace import TraceEvent


def store_call(t_us: int, type_: str, *args: Any, result: Any = True) -> TraceEvent:
    """A store event as the kernel traces one (arguments as passed, then the result),
    for feeding a checker a history by hand."""
    return TraceEvent(0, t_us, "store", "", "", type_, [list(args), result])


def events_of(
    events: Iterable[TraceEvent], kind: str, type_: str | None = None
) -> list[NamedEvent]:
    """The events of one kind (and one type, if given), named."""
    return [named(e) for e in events if e.kind == kind and (type_ is None or e.type == type_)]


def store_events(
    events: Iterable[TraceEvent], name: str, workload: str | None = None
) -> list[NamedEvent]:
    """The calls of the repository function traced as `name`, named (those of `workload`)."""
    out = events_of(events, "store", name)
    if workload is not None:
        out = [e for e in out if e.fields.get("workload_id") == workload]
    return out


def decision_events(events: Iterable[TraceEvent], type_: str) -> list[NamedEvent]:
    """The decisions of one type, named (their fields are the decision's map)."""
    return events_of(events, "decision", type_)


def decisions(events: Iterable[TraceEvent], type_: str) -> list[dict[str, Any]]:
    """The maps the actors recorded as decisions of one type."""
    return [e.payload for e in events if e.kind == "decision" and e.type == type_]


def delivered(events: Iterable[TraceEvent], type_: str) -> list[dict[str, Any]]:
    """The messages of one type as delivered (a reliable send's unwrapped; resends repeat)."""
    out = []
    for e in events:
        if e.kind == "deliver" and e.type == type_:
            msg = e.payload["msg"]
            out.append(msg["msg"] if msg.get("type") == "Reliable" else msg)
    return out


def leaders(events: Iterable[TraceEvent], role: str) -> list[tuple[int, str, int]]:
    """(time, instance, epoch) of every `lease.leader` claim for `role`."""
    return [
        (e.t_us, e.src, e.epoch) for e in decision_events(events, "lease.leader") if e.role == role
    ]


def started_once(events: list[TraceEvent], *workloads: str) -> dict[str, int]:
    """Successful starts per job of these workloads (`fleet.start` that landed)."""
    counts: dict[str, int] = {}
    for wid in workloads:
        for e in store_events(events, "fleet.start", wid):
            if e.result:
                key = f"{wid}/{e.job_name}"
                counts[key] = counts.get(key, 0) + 1
    return counts


# ---- the answers of repository functions that return tuples, named ----------------------------
class Started(NamedTuple):
    """What `fleet.start` answered: the attempt number and the progress it resumes from."""

    attempt: int
    from_us: int


def started(e: NamedEvent) -> Started | None:
    """The answer of a `fleet.start` call (None: the store refused the start)."""
    return None if e.result is None else Started(*e.result)


class CopyFinished(NamedTuple):
    """What `migration.done` answered: the new ready replica and the bytes not persisted before."""

    table: str
    region: str
    bytes_new: int


def copy_finished(e: NamedEvent) -> CopyFinished | None:
    """The answer of a `migration.done` call (None: the copy was not live)."""
    return None if e.result is None else CopyFinished(*e.result)


class JobStart(NamedTuple):
    """A job start the store took: when, where, which attempt, from what progress."""

    t_us: int
    job: str
    cluster: str
    attempt: int
    from_us: int


def job_starts(events: Iterable[TraceEvent], workload: str) -> list[JobStart]:
    """Every job start of `workload` that the store took, in trace order."""
    out = []
    for e in store_events(events, "fleet.start", workload):
        answer = started(e)
        if answer:
            out.append(JobStart(e.t_us, e.job_name, e.cluster, answer.attempt, answer.from_us))
    return out
