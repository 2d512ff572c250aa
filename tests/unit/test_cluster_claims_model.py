"""The scheduler's claims and its CM agree, whatever order the news comes in (model-based).

The policy decides on `policy_view`: a host's free GPUs are those no offered,
dispatching or running job holds (a stopping job's count as free). A start is
carried out with `claims_for` (which stopping jobs' GPUs it counts on) and
sent to the CM as a plan naming those victims (`plan_victims`). The CM, as
`actors/common/cm/plans.py` does, refuses a plan whose GPUs are neither free
nor its victims', and starts it once its victims have let theirs go; its
answers and end reports reach the scheduler in any order. explore found
three ways this went wrong: the scheduler crashed (`ComponentBug: a start
counts on N GPUs nobody frees`), or named a victim the CM did not run and
re-sent the refused plan forever. Here hypothesis drives a small cluster
through starts, preemptions (before or after the CM's answer), the CM's
releases and the scheduler hearing each message late, with the account
functions the scheduler uses: a start of all the GPUs the view shows free
on a host may never raise, and the CM may refuse no plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.cluster.jobs import (
    JobAccount,
    begin_run,
    claims_for,
    close_run,
    hand_over,
    merged,
    plan_victims,
    policy_view,
    preempt,
    requeue,
)
from actors.common.messages import Pace
from actors.policies.cluster.api import Start, TraceJob
from store.mast.records import Machine
from tests.support.examples import examples

HOSTS = {"h0": 4, "h1": 2}
MACHINES = [
    (Machine(host=h, region="r", rack=f"r/{h}", fault_domain="r", gpu_type="gpu", gpus=n), True)
    for h, n in HOSTS.items()
]
TRACE = {
    f"j{i}": TraceJob(job_id=f"j{i}", submit_us=0, gpus=g, model="resnet50", duration_us=10**9)
    for i, g in enumerate([1, 2, 3, 2, 1, 4])
}
PACE = Pace(slowdown=1.0, mode="static", checkpoint_us=1_000, restore_us=500, overhead_us=0)
Placement = tuple[tuple[str, int], ...]


@dataclass
class CM:
    """The cluster manager's side: what holds GPUs, what waits, what it told the scheduler."""

    hold: dict[str, Placement] = field(default_factory=dict)
    stopping: set[str] = field(default_factory=set)
    pending: dict[str, tuple[Placement, set[str]]] = field(default_factory=dict)
    inbox: dict[str, list[str]] = field(default_factory=dict)  # per job, in order sent

    def used(self, host: str) -> int:
        return sum(n for p in self.hold.values() for h, n in p if h == host)

    def tell(self, job: str, news: str) -> None:
        self.inbox.setdefault(job, []).append(news)

    def plan(self, job: str, placement: Placement, victims: tuple[str, ...]) -> None:
        here = {v for v in victims if v in self.hold}
        for host, n in placement:
            freed = sum(m for v in here for h, m in self.hold[v] if h == host)
            free = HOSTS[host] - self.used(host) + freed
            assert n <= free, f"CM refuses {job}: {host} has {free} GPUs free, needs {n}"
        self.stopping |= here
        self.pending[job] = (placement, here)
        self.start_ready()

    def stop(self, job: str) -> None:
        if job in self.pending:
            del self.pending[job]
            self.tell(job, "ended")  # withdrawn: it never started
        elif job in self.hold:
            self.stopping.add(job)

    def release(self, job: str) -> None:
        del self.hold[job]
        self.stopping.discard(job)
        self.tell(job, "ended")
        for _, waiting in self.pending.values():
            waiting.discard(job)
        self.start_ready()

    def start_ready(self) -> None:
        for job, (placement, waiting) in list(self.pending.items()):
            if waiting:
                continue
            del self.pending[job]
            for host, n in placement:
                assert n <= HOSTS[host] - self.used(host), f"CM: machines taken for {job}"
            self.hold[job] = placement
            self.tell(job, "started")


def free_gpus(accounts: dict[str, JobAccount], now_us: int) -> dict[str, int]:
    view = policy_view(accounts, TRACE, MACHINES, now_us, "gpu", None)
    return {slot.host: slot.gpus_free for slot in view.machines}


def dispatch(a: JobAccount, accounts: dict[str, JobAccount], cm: CM) -> None:
    a.state, a.pace = "dispatching", PACE
    cm.plan(a.job_id, a.placement, plan_victims(accounts, a.claims))


def start(a: JobAccount, host: str, n: int, accounts: dict[str, JobAccount], cm: CM, now: int):
    """The scheduler's decision, its offer accepted: dispatched (or held, if stopping)."""
    placement = ((host, n),)
    a.claims, a.begins_us = claims_for(accounts, placement, now, HOSTS)
    if a.state == "stopping":
        a.deferred = Start(job_id=a.job_id, placement=placement, tier="machine")
    else:
        a.placement = placement
        dispatch(a, accounts, cm)


def hear(a: JobAccount, news: str, accounts: dict[str, JobAccount], cm: CM, now: int) -> None:
    """The scheduler hears the CM's answer or end report, as `ClusterScheduler` acts on it."""
    if news == "started":
        if a.state == "dispatching":
            begin_run(a, now)
    elif a.state in ("dispatching", "running", "stopping"):
        hand_over(accounts, a, now)
        held, stop_us = (a.claims, a.begins_us), a.stop_us
        close_run(a, now, a.work_us, preempted=True)
        requeue(a, now, preempted=True, stop_us=stop_us)
        if a.deferred is not None:
            deferred, a.deferred = a.deferred, None
            a.claims, a.begins_us = held
            a.placement = merged(deferred.placement)
            dispatch(a, accounts, cm)


def actions(accounts: dict[str, JobAccount], cm: CM, now: int) -> list[tuple[str, str, str]]:
    """Every step that can happen next (drawing only these keeps the runs meaningful)."""
    out = [("tick", "", "")]
    free = free_gpus(accounts, now)
    for job, a in accounts.items():
        # A job the CM still holds (its end unheard) is not started again.
        idle = job not in cm.hold and job not in cm.pending
        if a.state in ("waiting", "stopping") and a.deferred is None and idle:
            out += [("start", job, h) for h in HOSTS if free[h]]
        if cm.inbox.get(job):
            out.append(("hear", job, ""))
        if a.state in ("dispatching", "running", "stopping"):
            out.append(("preempt", job, ""))
        if job in cm.stopping:
            out.append(("release", job, ""))
    return out


@settings(max_examples=examples(150), deadline=None)
@given(st.data())
def test_the_claims_and_the_cm_agree(data: st.DataObject) -> None:
    run_model(data)


@pytest.mark.slow
@settings(max_examples=examples(2500), deadline=None)
@given(st.data())
def test_the_claims_and_the_cm_agree_at_length(data: st.DataObject) -> None:
    run_model(data)


def run_model(data: st.DataObject) -> None:
    """Up to 40 steps drawn among those that can happen next, checked after each."""
    accounts = {j: JobAccount(job_id=j, state="waiting") for j in TRACE}
    cm = CM()
    now = 0
    for _ in range(data.draw(st.integers(0, 40))):
        op, job, host = data.draw(st.sampled_from(actions(accounts, cm, now)))
        a = accounts.get(job)
        if op == "tick":
            now += 1_000
        elif op == "start" and a is not None:
            n = min(TRACE[job].gpus, free_gpus(accounts, now)[host])
            start(a, host, n, accounts, cm, now)
        elif op == "hear" and a is not None:
            hear(a, cm.inbox[job].pop(0), accounts, cm, now)
        elif op == "preempt" and a is not None:
            if preempt(a, now) == "stop":
                cm.stop(job)
        elif op == "release":
            cm.release(job)
        for h, free in free_gpus(accounts, now).items():
            if free:  # all the policy sees free on a host, the claims find (no ComponentBug)
                claims_for(accounts, ((h, free),), now, HOSTS)
