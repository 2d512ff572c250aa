"""The job agent: the per-job local scheduler, one per attempt of a job.

It lives on the job's first machine (so it dies with it), sets up the
containers, trains in emulated time, saves checkpoints, and stops on its
cluster manager's order — saving a checkpoint first when preempted. Progress
is work done in µs; what survives a stop or a crash is the last checkpoint.
Later issues' cluster policies make their per-job decisions here.
"""

from __future__ import annotations

import msgspec

from actors.messages import AgentFinished, AgentRunning, AgentStart, AgentStop, AgentStopped
from emulator.actor import Actor, on
from store import fleet


class _Up(msgspec.Struct, frozen=True, tag=True):
    """Timer: containers are set up."""


class _Checkpoint(msgspec.Struct, frozen=True, tag=True):
    """Timer: time for a periodic checkpoint."""


class _Finish(msgspec.Struct, frozen=True, tag=True):
    """Timer: the remaining work is done."""


class JobAgent(Actor):
    kind = "job-agent"
    params: AgentStart
    restart_on_host_up = False

    async def on_start(self) -> None:
        if self.restarted:
            # Crashed mid-job: the cluster manager has already given up on this
            # attempt (it restarts the job from the last checkpoint elsewhere).
            self.exit()
            return
        p = self.params
        self.saved_us = p.progress_us
        self.running_since: int | None = None
        self.timers: list[int] = [self.set_timer(p.setup_us, _Up())]

    def _progress(self) -> int:
        if self.running_since is None:
            return self.saved_us
        return min(self.params.work_us, self.saved_us + self.now_us - self.running_since)

    @on(_Up)
    def up(self, _: _Up) -> None:
        p = self.params
        self.running_since = self.now_us
        self.send(p.cm, AgentRunning(workload_id=p.workload_id, job=p.job, attempt=p.attempt))
        self.timers = [self.set_timer(max(0, p.work_us - self.saved_us), _Finish())]
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
        self.send(p.cm, AgentFinished(workload_id=p.workload_id, job=p.job, attempt=p.attempt))
        self.exit()

    @on(AgentStop)
    async def stop(self, msg: AgentStop) -> None:
        p = self.params
        for timer in self.timers:
            self.cancel_timer(timer)
        progress = self._progress()
        was_running = self.running_since is not None
        self.running_since = None
        if msg.checkpoint and was_running:
            # Saved even without progress since the last one: a preempted job's
            # machines are reused only after this checkpoint (invariant 6).
            await self.sleep(p.checkpoint_cost_us)
            await self._save(progress)
        self.send(
            p.cm,
            AgentStopped(
                workload_id=p.workload_id, job=p.job, attempt=p.attempt, progress_us=self.saved_us
            ),
        )
        self.exit()
