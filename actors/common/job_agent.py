"""The job agent: the per-job local scheduler, one per attempt of a job.

It lives on the job's first machine (so it dies with it), sets up the
containers, trains in emulated time, saves checkpoints, and stops on its
cluster manager's order — saving a checkpoint first when preempted. Progress
is work done in µs; what survives a stop or a crash is the last checkpoint.
Later issues' cluster policies make their per-job decisions here.

Gang: the containers are set up at once, but training starts only when every
job of the workload holds machines (`fleet.gang_placed`, read from the store
every `gang_poll_us` until it does). Jobs of one workload are started by
different cluster managers, and one of them may be down for minutes: without
this barrier a short job could do all its work, and end, before its gang was
placed. A gang that does not form within `gang_checks_max` polls is given up:
the agent reports itself stopped and the RMS rolls the workload back.

Reports to the cluster manager go at least once (`send_reliably`): a CM that
is down or between leaders when a job ends would otherwise never learn it,
and would keep the job's machines (and later preempt a job that no longer
runs). After its last report the agent lingers, doing nothing, until that
report is acknowledged.

The agent answers its CM's `AgentProbe` at once in every state, so a CM that
begins to lead can tell a live agent from one that died unseen: no handler of
the agent waits in emulated time (the checkpoint a stop saves is a timer,
`_Saved`, not a sleep), or a probe could go unanswered behind it.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from actors.common.messages import (
    AgentAlive,
    AgentFinished,
    AgentLost,
    AgentProbe,
    AgentRunning,
    AgentStart,
    AgentStop,
    AgentStopped,
)
from actors.policies.cluster.job_pace import finish_at, saved_work, work_at
from emulator.actor import RESEND_US, Actor, on
from store.mast import fleet


class _Up(msgspec.Struct, frozen=True, tag=True):
    """Timer: containers are set up."""


class _GangCheck(msgspec.Struct, frozen=True, tag=True):
    """Timer: look again whether the whole gang holds machines."""


class _Checkpoint(msgspec.Struct, frozen=True, tag=True):
    """Timer: time for a periodic checkpoint."""


class _Finish(msgspec.Struct, frozen=True, tag=True):
    """Timer: the remaining work is done."""


class _Saved(msgspec.Struct, frozen=True, tag=True):
    """Timer: the checkpoint a stop order asked for is written (it holds `progress_us`)."""

    progress_us: int


class _Leave(msgspec.Struct, frozen=True, tag=True):
    """Timer: exit if the last report has been acknowledged."""


class JobAgent(Actor):
    kind = "job-agent"
    params: AgentStart
    restart_on_host_up = False
    # A day of MAST's fleet starts ~27,000 agents; kept after their exit they
    # held most of a week's 3.8 GB.
    forget_on_exit = True
    # Its host restarts it when it dies alone (a crash fault with no restart): the
    # restart tells the CM the attempt is over (`on_start`). Without it nothing
    # would: the job held its machines, RUNNING and doing nothing, to the end.
    supervised_restart_us: ClassVar[int | None] = 5_000_000
    # The RMS gives up on a dispatch after 15 min (`dispatch_timeout`) and stops
    # its jobs; the agent's own limit is a backstop for an RMS that never does.
    gang_poll_us: ClassVar[int] = 5_000_000
    gang_checks_max: ClassVar[int] = 720

    async def on_start(self) -> None:
        if self.restarted:
            # Crashed mid-job, its progress since the last checkpoint gone: the
            # attempt is over, which its CM may not know (a crash of the agent
            # alone leaves the machines up), or the job would hold them, doing
            # nothing, until stopped.
            self.timers = []
            p = self.params
            self._last_report(AgentLost(workload_id=p.workload_id, job=p.job, attempt=p.attempt))
            return
        p = self.params
        self.saved_us = p.progress_us  # the last checkpoint this attempt saved (or started from)
        # Training runs from `running_since` on, from `start_us` of progress:
        # what it has done is measured from there, not from the last checkpoint
        # (that one already holds part of the same run).
        self.running_since: int | None = None
        self.start_us = p.progress_us
        self.gang_checks = 0
        self.ended = False  # the last report (finished or stopped) is sent
        self.saving = False  # stopped, saving the checkpoint the stop order asked for
        self.timers: list[int] = [self.set_timer(p.setup_us, _Up())]

    def _progress(self) -> int:
        if self.running_since is None:
            return self.saved_us
        p = self.params
        elapsed = self.now_us - self.running_since
        if p.pace is None:
            return min(p.work_us, self.start_us + elapsed)
        # The run clock the reference engine keeps too (job_pace.segments).
        done = work_at(
            self.start_us, self.running_since, self.now_us, p.work_us, p.pace.mode, p.pace.slowdown
        )
        return saved_work(done)

    def _time_to_finish(self) -> int:
        p = self.params
        if p.pace is None or self.running_since is None:
            return max(0, p.work_us - self.start_us)
        pace = p.pace
        end = finish_at(self.start_us, self.running_since, p.work_us, pace.mode, pace.slowdown)
        return end - self.now_us

    @on(_Up, _GangCheck)
    async def up(self, _: _Up | _GangCheck) -> None:
        p = self.params
        if self.ended:
            return
        if not await self.store(fleet.gang_placed, p.workload_id):
            self.gang_checks += 1
            if self.gang_checks > self.gang_checks_max:
                self.decision("agent.gang-timeout", {"workload": p.workload_id, "job": p.job})
                self._last_report(self._stopped())
            else:
                self.timers = [self.set_timer(self.gang_poll_us, _GangCheck())]
            return
        self.running_since = self.now_us
        self.send_reliably(
            p.cm, AgentRunning(workload_id=p.workload_id, job=p.job, attempt=p.attempt)
        )
        self.timers = [self.set_timer(self._time_to_finish(), _Finish())]
        if p.checkpoint_every_us > 0:
            self.timers.append(self.set_timer(p.checkpoint_every_us, _Checkpoint()))

    @on(_Checkpoint)
    async def periodic(self, _: _Checkpoint) -> None:
        p = self.params
        self.timers.append(self.set_timer(p.checkpoint_every_us, _Checkpoint()))
        await self._save(self._progress())

    async def _save(self, progress_us: int) -> None:
        p = self.params
        if await self.store(
            fleet.checkpoint, self.now_us, p.workload_id, p.job, p.attempt, progress_us
        ):
            self.saved_us = max(self.saved_us, progress_us)

    @on(_Finish)
    async def finish(self, _: _Finish) -> None:
        p = self.params
        await self._save(p.work_us)
        self._last_report(AgentFinished(workload_id=p.workload_id, job=p.job, attempt=p.attempt))

    @on(AgentStop)
    def stop(self, msg: AgentStop) -> None:
        if self.ended or self.saving:
            return  # already stopping: the first order's report is on its way
        for timer in self.timers:
            self.cancel_timer(timer)
        progress = self._progress()
        was_running = self.running_since is not None
        if self.params.pace is not None and self.running_since == self.now_us:
            # A cluster-policy run stopped the instant it began training has
            # nothing to save, and the reference engine charges no checkpoint
            # then; MAST's jobs save one anyway (invariant 6 waits for it).
            was_running = False
        self.running_since = None
        if msg.checkpoint and was_running:
            # Saved even without progress since the last one: a preempted job's
            # machines are reused only after this checkpoint (invariant 6).
            self.saving = True
            self.timers = [self.set_timer(self.params.checkpoint_cost_us, _Saved(progress))]
            return
        self._last_report(self._stopped())

    @on(_Saved)
    async def saved(self, msg: _Saved) -> None:
        await self._save(msg.progress_us)
        self._last_report(self._stopped())

    @on(AgentProbe)
    def probe(self, msg: AgentProbe) -> None:
        # Alive even once ended: the last report is still being resent to the CM.
        self.reply(AgentAlive(workload_id=msg.workload_id, job=msg.job, attempt=msg.attempt))

    def _stopped(self) -> AgentStopped:
        p = self.params
        return AgentStopped(
            workload_id=p.workload_id, job=p.job, attempt=p.attempt, progress_us=self.saved_us
        )

    def _last_report(self, msg: AgentFinished | AgentStopped | AgentLost) -> None:
        self.ended = True
        self.running_since = None
        for timer in self.timers:
            self.cancel_timer(timer)
        self.timers = []
        self.send_reliably(self.params.cm, msg)
        self.set_timer(RESEND_US, _Leave())

    @on(_Leave)
    def leave(self, _: _Leave) -> None:
        # `send_reliably` keeps a message until it is acknowledged (or given up
        # on after its resend limit), so an empty outbox means the CM has it.
        if self.unacknowledged:
            self.set_timer(RESEND_US, _Leave())
        else:
            self.exit()
