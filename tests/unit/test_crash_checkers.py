"""Checkers made precise for runs with crashed actors, on hand-written traces.

Under a crash nemesis the preemption and gang checkers reported violations
where nothing was lost: a victim that had finished its work, or whose
machine failed while no CM was up to record it, or that had already saved
its stop checkpoint when a later plan picked it again; a workload reported
RUNNING late, after one of its jobs had finished. Each story here was a
false positive; each has a twin that must still be caught.
"""

from __future__ import annotations

from typing import Any

from actors.checks.gang import GangChecker
from actors.checks.preemption import PreemptionChecker
from emulator.trace import TraceEvent

FENCE: dict[str, Any] = {"role": "cm/r/c1", "holder": "cm/r/c1/0", "epoch": 1}
HOST = "r/dc0/fd0/r0/m1"


def feed(checker: Any, *events: tuple[Any, ...]) -> list[str]:
    """Events are (kind, type, payload, result, t_us[, dst])."""
    out: list[str] = []
    for seq, (kind, type_, payload, result, t_us, *dst) in enumerate(events):
        body = payload if kind in ("decision", "fault") else [payload, result]
        event = TraceEvent(seq, t_us, kind, "x", dst[0] if dst else "", type_, body)
        out += checker.observe(event)
    return out


def start(wid: str, job: str, t_us: int, gpus: Any = ((HOST, 8),)) -> tuple[Any, ...]:
    args = [FENCE, t_us, wid, job, "r/c1", 5, [list(g) for g in gpus], []]
    return ("store", "fleet.start", args, [1, 0], t_us)


def running(t_us: int) -> tuple[Any, ...]:
    return ("store", "fleet.state", [FENCE, t_us, "v", "j", "RUNNING"], True, t_us)


def victim(t_us: int) -> tuple[Any, ...]:
    payload = {"workload": "w", "priority": 0, "victims": [["v", "j"]]}
    return ("decision", "rms.dispatch", payload, None, t_us)


def release(t_us: int, state: str = "STOPPED") -> tuple[Any, ...]:
    return ("store", "fleet.release", [FENCE, t_us, "v", "j", state], True, t_us)


def checkpoint(t_us: int) -> tuple[Any, ...]:
    return ("store", "fleet.checkpoint", [t_us, "v", "j", 1, t_us], True, t_us)


def down(node: str, t_us: int) -> tuple[Any, ...]:
    return ("fault", "down", None, None, t_us, node)


def preemption(*events: tuple[Any, ...]) -> list[str]:
    return feed(PreemptionChecker(), *events)


def test_preemption_a_victim_that_finished_its_work_meanwhile_lost_nothing() -> None:
    # Its last checkpoint holds all its work: released DONE, nothing to save.
    assert preemption(start("v", "j", 0), running(1), victim(5), release(9, "DONE")) == []
    assert len(preemption(start("v", "j", 0), running(1), victim(5), release(9))) == 1


def test_preemption_a_victim_whose_fault_domain_failed_while_no_cm_saw_it() -> None:
    # The CM was down when the fault domain lost power: no `fleet.health` event,
    # only the kernel's fault. The agent died with its machine.
    story = (start("v", "j", 10), running(11), down("r/dc0/fd0", 12), victim(15), release(19))
    assert preemption(*story) == []
    # A failure before the job started there excuses nothing.
    earlier = (down("r/dc0/fd0", 5), start("v", "j", 10), running(11), victim(15), release(19))
    assert len(preemption(*earlier)) == 1
    # Nor does one elsewhere (`fd0` is not a prefix of `fd01`'s hosts, nor the reverse).
    other = (start("v", "j", 10), running(11), down("r/dc0/fd01", 12), victim(15), release(19))
    assert len(preemption(*other)) == 1


def test_preemption_a_stopping_job_picked_again_keeps_its_stop_checkpoint() -> None:
    # The CM ordered v/j to stop with a checkpoint (CHECKPOINTING); v/j saved it;
    # the CM went down before it heard so, and a second plan picked v/j again.
    stopping = ("store", "fleet.state", [FENCE, 3, "v", "j", "CHECKPOINTING"], True, 3)
    before, after = (start("v", "j", 0), running(1)), (victim(8), release(9))
    assert preemption(*before, stopping, checkpoint(4), *after) == []
    # A periodic checkpoint of a job still training does not count.
    assert len(preemption(*before, checkpoint(4), *after)) == 1


def gang(*events: tuple[Any, ...]) -> list[str]:
    spec = {"id": "g", "jobs": [{"name": "a"}, {"name": "b"}]}
    submit = ("store", "queue.submit", [spec, 0, 0], True, 0)
    award = ("store", "queue.award", [FENCE, 1, "g", 7, "r"], True, 1)
    return feed(GangChecker(), submit, award, *events)


def to_running(t_us: int) -> tuple[Any, ...]:
    args = ["g", ["DISPATCHING"], "RUNNING", t_us, 7]
    return ("store", "queue.transition", args, True, t_us)


def test_gang_running_reported_late_after_a_job_of_a_whole_gang_finished() -> None:
    # The GMS was down: it hears that the gang started after job a is done.
    a_done = ("store", "fleet.release", [FENCE, 5, "g", "a", "DONE"], True, 5)
    assert gang(start("g", "a", 2), start("g", "b", 3), a_done, to_running(9)) == []
    # A gang that was never whole is still caught.
    early = gang(start("g", "a", 2), a_done, start("g", "b", 6), to_running(9))
    assert early == ["g RUNNING but jobs ['a'] hold no machines"]
