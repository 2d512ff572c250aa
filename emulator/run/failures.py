"""Failures of a run that no invariant names: an actor's own exception, work stuck for good.

`explore` keeps such a run as a failure, and `shrink` cuts its faults down
as it does for a violation; both judge it here, so that the reproducer
shrink writes fails the way the search saw (the same kind and the same
detail: the exception and the kind of actor, or the states work was stuck
in).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from emulator.kernel import ActorError
from emulator.liveness import LivenessReport
from emulator.run.scenario import InvariantsSpec
from emulator.trace import TraceEvent

ACTOR_ERROR = "actor-error"
LIVENESS = "liveness"
KINDS = (ACTOR_ERROR, LIVENESS)
# An exception out of the emulator itself: the run never finished, so there is
# nothing to judge again, and no reproducer to shrink (a campaign keeps it as found).
INTERNAL_ERROR = "internal-error"


def failing_errors(errors: Iterable[ActorError], tolerated: Iterable[str]) -> list[ActorError]:
    """The actor errors that fail a run: all but those of a tolerated exception type."""
    allowed = frozenset(tolerated)
    return [e for e in errors if e.error not in allowed]


def actor_errors(events: Iterable[TraceEvent]) -> list[ActorError]:
    """The actors that died on exceptions of their own, from a recorded trace."""
    return [
        ActorError(e.seq, e.t_us, e.dst, e.payload["error"], e.payload["message"])
        for e in events
        if e.kind == "actor-error"
    ]


def beyond_invariants(
    errors: Sequence[ActorError],
    status: str,
    invariants: InvariantsSpec,
    reports: Callable[[Iterable[str]], list[LivenessReport]],
) -> list[tuple[str, str]]:
    """(kind, detail) of each way the run failed besides a violation, first the errors.

    An actor that died on an exception it was not allowed (the first one:
    `RuntimeError in rms`); then, only for a run that ended `ok` with
    liveness judged, the states its stuck work waited in (`stuck PENDING`).
    `reports` is asked only then, with the scenario's `may_wait` (the judges'
    verdicts at the run's end: `LivenessWatch.reports`, or `judge_liveness`
    over a stored trace).
    """
    out = []
    failing = failing_errors(errors, invariants.tolerate_errors)
    if failing:
        first = failing[0]
        out.append((ACTOR_ERROR, f"{first.error} in {first.address.split('/', 1)[0]}"))
    if status == "ok" and invariants.liveness:
        stuck = sorted({s.state for r in reports(invariants.may_wait) for s in r.stuck})
        if stuck:
            out.append((LIVENESS, f"stuck {'/'.join(stuck)}"))
    return out
