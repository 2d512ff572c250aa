"""MAST's invariant 6, `preemption`: lower-priority victims, checkpoints before release.

Victims have strictly lower priority than the workload that preempts them (a
larger number: 0 is the highest). A victim is what its RMS's view holds under
the job's name in the RMS's region: a live attempt (its `fleet.start`, until
its release) or the reservation of the workload's latest dispatch there, which
may not have started yet (its CM dark); of the two, the later stands for it,
as the view's own entry does. And a running victim's machines are released
only after it saved a checkpoint — one saved after its CM ordered it to stop
and save (the job went CHECKPOINTING) also counts for a later plan that picks
the stopping job again — unless it finished its work meanwhile (released DONE:
its last checkpoint holds all of it) or lost a machine it held (a hardware
failure, seen in the kernel's `fault` events even when no CM was up to record
it, or RAS moving the machine away), or its agent died with the emulator
process (an attempt begun before a `resume` event), or its agent could not
save it: crashed since the attempt began, or paused between the stop order and
the release (the kernel's `crash` and `pause` events; a CM gives a silent
agent `stop_timeout` before it frees the machines, and cannot tell a slow
agent from a dead one).
"""

from __future__ import annotations

from typing import Any

from actors.checks.base import Key, StoreChecker
from actors.common.messages import agent_address
from emulator.trace import TraceEvent


class PreemptionChecker(StoreChecker):
    name = "preemption"
    kinds = ("store", "decision", "fault", "run", "crash", "pause")
    _routes = {
        "fleet.start": "on_start",
        "fleet.state": "on_state",
        "fleet.checkpoint": "on_checkpoint",
        "fleet.release": "on_release",
        "fleet.health": "on_health",
        "fleet.membership": "on_membership",
    }
    other_types = {"decision": frozenset({"rms.dispatch"})}

    def __init__(self) -> None:
        # Priorities of what a victim's name may stand for, with the trace
        # position that set them: the job's live attempt (the store keeps one
        # row a job), with its cluster and attempt number; each region's latest
        # dispatch of a workload.
        self.live: dict[Key, tuple[int, int, str, int]] = {}
        self.dispatched: dict[str, dict[str, tuple[int, int]]] = {}
        self.hosts: dict[Key, set[str]] = {}
        self.running: set[Key] = set()
        # Victims told to stop, and whether they saved a checkpoint since.
        self.victims: dict[Key, bool] = {}
        # Jobs told to stop with a checkpoint (CHECKPOINTING), and those of them
        # that saved it: they do no more work, so nothing of theirs is lost.
        self.checkpointing: set[Key] = set()
        self.saved_for_stop: set[Key] = set()
        # Hosts that failed or that RAS moved out of their cluster: a victim
        # losing one cannot checkpoint first, and nobody reuses it in its cluster.
        self.failed_hosts: set[str] = set()
        # When each job (its current attempt) started, and when each machine,
        # rack, fault domain... last went down (the kernel's hardware faults).
        self.started_us: dict[Key, int] = {}
        self.down_us: dict[str, int] = {}
        # The trace position of each attempt's start and of the last `resume`:
        # the killed process took every agent with it, as a failure of every
        # machine would (positions, not times: a kill and a restart share one).
        self.started_seq: dict[Key, int] = {}
        self.resumed_seq = 0
        # Each job's current attempt, when it was ordered to stop and save, and
        # when each agent could not answer: [from, to) spans, a crash to the end.
        self.attempt: dict[Key, int] = {}
        self.stop_us: dict[Key, int] = {}
        self.silent: dict[str, list[tuple[int, float]]] = {}

    def observe(self, event: TraceEvent) -> list[str]:
        if event.kind == "decision":
            if event.type != "rms.dispatch":
                return []
            return self._dispatch(_region_of(event.src), event.seq, event.payload)
        if event.kind == "run":
            if event.type == "resume":
                self.resumed_seq = event.seq
            return []
        if event.kind == "crash":
            self.silent.setdefault(event.dst, []).append((event.t_us, float("inf")))
            return []
        if event.kind == "pause":
            span = (event.t_us, event.t_us + int(event.payload))
            self.silent.setdefault(event.dst, []).append(span)
            return []
        if event.kind == "fault":
            if event.type == "down":
                self.down_us[event.dst] = event.t_us
            return []
        return super().observe(event)

    def _lost_a_machine(self, key: Key) -> bool:
        """Whether a machine the job holds failed or left its cluster since it started."""
        hosts = self.hosts.get(key, set())
        if hosts & self.failed_hosts:
            return True
        if self.started_seq.get(key, 0) < self.resumed_seq:
            return True
        since = self.started_us.get(key, 0)
        return any(
            t >= since and any(h == node or h.startswith(node + "/") for h in hosts)
            for node, t in self.down_us.items()
        )

    def _agent_silent(self, key: Key, now_us: int) -> bool:
        """Whether the attempt's agent crashed, or was paused after its stop order."""
        spans = self.silent.get(agent_address(*key, self.attempt.get(key, 0)), ())
        since = self.started_us.get(key, 0)
        stop = self.stop_us.get(key, since)
        return any(
            t >= since and (end == float("inf") or (t < now_us and end > stop)) for t, end in spans
        )

    def _victim_priority(self, region: str | None, w: str, j: str) -> int | None:
        """The priority of the latest attempt or dispatch a victim's name stands for."""
        seen = []
        if (w, j) in self.live:
            seq, priority, cluster, _attempt = self.live[(w, j)]
            if region is None or _region_of_cluster(cluster) == region:
                seen.append((seq, priority))
        by_region = self.dispatched.get(w, {})
        seen += [e for r, e in by_region.items() if region is None or r == region]
        return max(seen)[1] if seen else None

    def _dispatch(self, region: str | None, seq: int, payload: dict[str, Any]) -> list[str]:
        out = []
        for w, j in payload["victims"]:
            key = (w, j)
            victim_priority = self._victim_priority(region, w, j)
            if victim_priority is not None and victim_priority <= payload["priority"]:
                out.append(
                    f"{payload['workload']} (priority {payload['priority']}) preempts "
                    f"{w}/{j} of priority {victim_priority}"
                )
            if key in self.running:
                self.victims[key] = key in self.saved_for_stop
        if region is not None:
            self.dispatched.setdefault(payload["workload"], {})[region] = (seq, payload["priority"])
        return out

    def on_start(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        if result is not None:
            key = (args[2], args[3])
            self.live[key] = (event.seq, args[5], args[4], int(result[0]))
            self.hosts[key] = {h for h, _n in args[6]} | set(args[7])
            self.started_us[key] = args[1]
            self.started_seq[key] = event.seq
            self.attempt[key] = int(result[0])
            self.stop_us.pop(key, None)
            self.running.discard(key)
            self.victims.pop(key, None)
            self.checkpointing.discard(key)
            self.saved_for_stop.discard(key)
        return []

    def on_state(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        if result and args[4] == "RUNNING":
            self.running.add((args[2], args[3]))
        elif result and args[4] == "CHECKPOINTING":
            self.checkpointing.add((args[2], args[3]))
            self.stop_us[(args[2], args[3])] = event.t_us
        return []

    def on_checkpoint(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        key = (args[1], args[2])
        if result and key in self.victims:
            self.victims[key] = True
        if result and key in self.checkpointing:
            self.saved_for_stop.add(key)
        return []

    def on_health(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if not args[1]:
            self.failed_hosts.update(args[0])
        return []

    def on_membership(self, args: list[Any], result: Any, _: TraceEvent) -> list[str]:
        if result:
            self.failed_hosts.update(host for host, src, _dst in args[2] if src is not None)
        return []

    def on_release(self, args: list[Any], result: Any, event: TraceEvent) -> list[str]:
        if not result:
            return []
        key = (args[2], args[3])
        attempt = args[5] if len(args) > 5 else None
        current = attempt is None or (key in self.live and self.live[key][3] == attempt)
        if current:
            self.live.pop(key, None)
        self.running.discard(key)
        self.checkpointing.discard(key)
        self.saved_for_stop.discard(key)
        saved = self.victims.pop(key, None)
        out = []
        if (
            saved is False
            and args[4] != "DONE"
            and not self._lost_a_machine(key)
            and not self._agent_silent(key, event.t_us)
        ):
            out.append(
                f"preempted {key[0]}/{key[1]} released its machines before saving a checkpoint"
            )
        if current:
            # The attempt is over: what only it needed goes (its next start sets all of
            # it again), so the checker's memory follows the jobs alive, not every job
            # of the run (a week of meta-day: ~100k workloads).
            for book in (self.hosts, self.started_us, self.started_seq, self.attempt, self.stop_us):
                book.pop(key, None)
        return out


def _region_of(address: str) -> str | None:
    """The region of an RMS's address (`rms/REGION/N`); None for any other sender."""
    parts = address.split("/")
    return parts[1] if len(parts) == 3 and parts[0] == "rms" else None


def _region_of_cluster(cluster: str) -> str:
    return cluster.split("/", 1)[0]
