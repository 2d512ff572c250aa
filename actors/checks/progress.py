"""Invariant 10 (`progress`): a job's progress never goes backwards except to its last checkpoint.

Progress is work done, in µs. What survives a stop is the job's checkpoint
in the store (`jobs.checkpoint_us`), written only by the agent of the job's
current attempt (`fleet.checkpoint`), and each new attempt starts from it
(`fleet.start` returns it, the CM hands it to the agent as
`AgentStart.progress_us`). The checker follows, per job:

- the committed checkpoint: it may only grow, and only the current
  attempt may write it;
- each attempt's starting point: the checkpoint `fleet.start` handed out
  must be the last one committed, and so must the progress the CM
  launches the attempt's agent from (its `cm.agent-start` decision);
- what the attempt's agent does from there, judged by what the agent
  writes and says: a checkpoint
  it tries to save (committed or refused) below its starting point means it
  runs from before its checkpoint; one above what it could have done since
  the attempt started (at the fastest pace its plans allow) means it runs
  from beyond it, or counts time twice; and the progress it reports when it
  stops (`AgentStopped.progress_us`) must be what it saved — less than its
  start, or more than the store holds, is progress from nowhere or lost.

Each rule reports once per attempt, so one broken agent gives one line per
rule rather than one per checkpoint. Pace (the cluster policies'
performance model) comes from the `ExecutePlan`s delivered for the job: the
lowest slowdown seen bounds how fast it can go; MAST jobs run at one µs of
work per µs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec

from actors.policies.cluster.api import Regime, Schedule
from actors.policies.cluster.job_pace import run_time_us
from emulator.trace import TraceEvent
from emulator.units import MS, format_us
from store.mast.queue import ENDED

Key = tuple[str, str]

# Rounding in the performance model (float work, µs timers) may make an
# honest agent look up to a µs ahead of time; a millisecond is far above it.
SLACK_US = MS


@dataclass
class Attempt:
    """One attempt of a job: where and when it started, and what it saved."""

    number: int
    from_us: int
    started_at_us: int
    saved_us: int  # the highest checkpoint this attempt committed (its start if none)
    reported: set[str] = field(default_factory=set)  # rules already reported


@dataclass
class Job:
    """What the checker knows of one job across its attempts."""

    checkpoint_us: int = 0  # the last committed checkpoint (the store's value)
    current: int = 0  # the attempt the store last started (0: none yet)
    attempts: dict[int, Attempt] = field(default_factory=dict)
    work_us: int | None = None
    pace: tuple[float, Schedule] | None = None  # (lowest slowdown seen, batch schedule)


def _message(payload: Any) -> dict[str, Any] | None:
    """The protocol message a `deliver` event carries (unwrapped from `Reliable`)."""
    if not isinstance(payload, dict):
        return None
    msg = payload.get("msg")
    if isinstance(msg, dict) and msg.get("type") == "Reliable":
        msg = msg.get("msg")
    return msg if isinstance(msg, dict) else None


class ProgressChecker:
    name = "progress"
    kinds = ("store", "deliver", "decision")
    # Of the messages, only these: the tracer decodes no other delivery for it.
    types = {"deliver": frozenset({"AgentStopped", "ExecutePlan"})}

    def __init__(self) -> None:
        self.jobs: dict[Key, Job] = {}
        # A workload's jobs are forgotten when it ends (DONE, FAILED, WITHDRAWN: it
        # never runs again), so the checker's memory follows the live workloads; what
        # comes for an ended one afterwards (a late checkpoint or stop report) is
        # not judged, as it was not before it began.
        self.names: dict[str, list[str]] = {}
        self.ended: set[str] = set()

    def _job(self, workload: str, job: str) -> Job:
        found = self.jobs.get((workload, job))
        if found is None:
            found = self.jobs[(workload, job)] = Job()
            self.names.setdefault(workload, []).append(job)
        return found

    def _transition(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result and args[2] in ENDED:
            self.ended.add(args[0])
            for name in self.names.pop(args[0], ()):
                self.jobs.pop((args[0], name), None)
        return []

    # ---- dispatch ----------------------------------------------------------------
    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "decision":
            return self._agent_start(event.payload) if event.type == "cm.agent-start" else []
        if event.kind == "deliver":
            if event.type == "AgentStopped":
                msg = _message(event.payload)
                return self._stopped(msg) if msg is not None else []
            if event.type == "ExecutePlan":
                msg = _message(event.payload)
                if msg is not None:
                    self._plan(msg)
            return []
        handler = self._STORE.get(event.type)
        if handler is None:
            return []
        args, result = event.payload
        return handler(self, args, result, event)

    # ---- what a job is ---------------------------------------------------------------
    def _submit(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        spec = args[0]
        if spec["id"] in self.ended:
            return []
        for job in spec.get("jobs", ()):
            self._job(spec["id"], job["name"]).work_us = job.get("work_us")
        return []

    def _plan(self, msg: dict[str, Any]) -> None:
        spec = msg.get("job") or {}
        if msg["workload_id"] in self.ended:
            return
        job = self._job(msg["workload_id"], spec.get("name", ""))
        if spec.get("work_us"):
            job.work_us = spec["work_us"]
        pace = msg.get("pace")
        if pace is not None:
            slowdown = float(pace.get("slowdown", 1.0))
            if job.pace is not None:
                slowdown = min(slowdown, job.pace[0])
            mode = pace.get("mode", "static")
            # A job's own regimes (a peer's batch-size pattern) come as a list.
            schedule = str(mode) if isinstance(mode, str) else _regimes(mode)
            job.pace = (slowdown, schedule)

    def _least_time_us(self, job: Job, from_us: int, to_us: int) -> int:
        """The least emulated time in which the job can go from `from_us` to `to_us` of work."""
        if to_us <= from_us:
            return 0
        if job.pace is None or not job.work_us:
            return to_us - from_us
        slowdown, mode = job.pace
        work = job.work_us
        try:
            return run_time_us(
                min(from_us, work),
                min(to_us, work),
                work,
                cast(Schedule, mode),
                max(1.0, slowdown),
            )
        except ValueError:  # a batch mode the model does not know: no bound to judge by
            return 0

    # ---- the store -----------------------------------------------------------------
    def _start(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        if result is None:
            return []
        workload, name = args[2], args[3]
        if workload in self.ended:
            return []
        number, from_us = int(result[0]), int(result[1])
        job = self._job(workload, name)
        out = []
        if from_us != job.checkpoint_us:
            out.append(
                f"{workload}/{name} attempt {number} starts from {format_us(from_us)} of "
                f"progress but its last checkpoint saved {format_us(job.checkpoint_us)}"
            )
        if number <= job.current:
            out.append(f"{workload}/{name} attempt {number} started after attempt {job.current}")
        job.current = number
        job.attempts[number] = Attempt(number, from_us, event.t_us, from_us)
        return out

    def _checkpoint(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        _now, workload, name, number, progress = args[0], args[1], args[2], args[3], args[4]
        if workload in self.ended:
            return []
        job = self._job(workload, name)
        who = f"{workload}/{name}"
        out = []
        attempt = job.attempts.get(number)
        if attempt is not None and number == job.current:
            if progress < attempt.from_us and "before" not in attempt.reported:
                attempt.reported.add("before")
                out.append(
                    f"{who} attempt {number} saves {format_us(progress)} of progress but "
                    f"started from its checkpoint at {format_us(attempt.from_us)}: it runs "
                    "from before its last checkpoint"
                )
            ran_us = event.t_us - attempt.started_at_us
            least = self._least_time_us(job, attempt.from_us, progress)
            if least > ran_us + SLACK_US and "beyond" not in attempt.reported:
                attempt.reported.add("beyond")
                out.append(
                    f"{who} attempt {number} saves {format_us(progress)} of progress "
                    f"{format_us(ran_us)} after it started from {format_us(attempt.from_us)}: "
                    f"that much work takes at least {format_us(least)}"
                )
        if not result:
            return out
        if number != job.current:
            out.append(
                f"{who}: attempt {number} saved a checkpoint while attempt {job.current} "
                "is the current one"
            )
        if progress < job.checkpoint_us:
            out.append(
                f"{who}: committed checkpoint went back from {format_us(job.checkpoint_us)} "
                f"to {format_us(progress)}"
            )
        job.checkpoint_us = progress
        if attempt is not None:
            attempt.saved_us = max(attempt.saved_us, progress)
        return out

    # ---- what agents say -------------------------------------------------------------
    def _agent_start(self, payload: dict[str, Any]) -> list[str]:
        """A CM launched an attempt's agent (`cm.agent-start`): from the last checkpoint."""
        if str(payload["workload"]) in self.ended:
            return []
        job = self.jobs.get((str(payload["workload"]), str(payload["job"])))
        number, progress = int(payload["attempt"]), int(payload["progress_us"])
        who = f"{payload['workload']}/{payload['job']} attempt {number}"
        attempt = job.attempts.get(number) if job is not None else None
        if job is None or attempt is None or number != job.current:
            current = job.current if job is not None else 0
            return [f"{who}: agent launched, but the store's current attempt is {current}"]
        if "launch" in attempt.reported or progress == job.checkpoint_us:
            return []
        attempt.reported.add("launch")
        return [
            f"{who}: agent launched from {format_us(progress)} of progress, but the last "
            f"committed checkpoint is {format_us(job.checkpoint_us)}"
        ]

    def _stopped(self, msg: dict[str, Any]) -> list[str]:
        workload, name = msg.get("workload_id"), msg.get("job")
        job = self.jobs.get((str(workload), str(name)))
        attempt = job.attempts.get(int(msg.get("attempt", 0))) if job is not None else None
        if attempt is None or "reported" in attempt.reported:
            return []
        attempt.reported.add("reported")  # judged once, however often it is resent
        progress = int(msg.get("progress_us", 0))
        who = f"{workload}/{name} attempt {attempt.number}"
        if progress < attempt.from_us:
            return [
                f"{who} stopped reporting {format_us(progress)} of progress, less than the "
                f"{format_us(attempt.from_us)} it started from"
            ]
        if progress > attempt.saved_us:
            return [
                f"{who} stopped reporting {format_us(progress)} of progress, but only "
                f"{format_us(attempt.saved_us)} was ever saved: it started beyond its checkpoint"
            ]
        return []

    def finish(self) -> list[str]:
        return []

    _STORE: dict[str, Callable[[ProgressChecker, list[Any], Any, TraceEvent], list[str]]] = {
        "queue.submit": _submit,
        "fleet.start": _start,
        "fleet.checkpoint": _checkpoint,
        "queue.transition": _transition,
    }
    types = {
        **types,
        "store": frozenset(_STORE),
        "decision": frozenset({"cm.agent-start"}),
    }


def _regimes(raw: Any) -> tuple[Regime, ...] | str:
    """A pace's own regimes as recorded; a malformed list gives no bound (an unknown mode)."""
    try:
        return msgspec.convert(raw, tuple[Regime, ...])
    except msgspec.ValidationError:
        return "?"
