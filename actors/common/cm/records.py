"""What a cluster ledger keeps of each machine and each job (`actors/common/cm/ledger.py`)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TypeVar

from actors.policies.mast.placement.snapshot import MachineState
from store.mast.records import Machine

K = TypeVar("K", bound=Hashable)


def uncount(counts: dict[K, int], key: K, n: int) -> None:
    """Take `n` off `key`'s count; a count that reaches zero leaves the map."""
    left = counts.get(key, 0) - n
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


def machine_state(m: Machine, gpus_free: int, cpu_free: bool, healthy: bool) -> MachineState:
    return MachineState(
        host=m.host,
        rack=m.rack,
        gpu_type=m.gpu_type,
        gpus_total=m.gpus,
        gpus_free=gpus_free,
        cpu_free=cpu_free,
        healthy=healthy,
    )


class HostRecord:
    """What a snapshot rebuild needs of one machine, in one place (the ledger's docstring).

    `state` is the machine's state in the last snapshot made (None before
    the first), `position` its index in the snapshot's machines; `gpus` and
    `rack` are the Machine's, copied here so a rebuild does not touch the
    Machine for them (one object fewer per machine); a usable CPU
    machine's two states, `taken` and `free`, are made once and then shared.
    `ok` is what `ClusterLedger.usable` says of it (healthy, not in transit),
    kept by every change of either (`ClusterLedger._recheck`). `used` counts
    the GPUs its jobs hold, `busy` the jobs holding it as a CPU machine (an
    RMS's view may count two for a while: a dispatched job and its victim,
    until the victim's checkpoint is saved and its JobEnded arrives). `dirty`
    says it waits in the ledger's list of machines to remake at the next
    snapshot: a change finds the record once and the rebuild walks the
    records themselves, where maps keyed by host cost a lookup each.
    """

    __slots__ = (
        "busy",
        "dirty",
        "free",
        "gpus",
        "host",
        "machine",
        "ok",
        "position",
        "rack",
        "state",
        "taken",
        "used",
    )

    def __init__(self, machine: Machine, position: int, ok: bool) -> None:
        self.machine = machine
        self.host = machine.host
        self.ok = ok
        self.gpus = machine.gpus
        self.rack = machine.rack
        self.position = position
        self.used = 0
        self.busy = 0
        self.dirty = True
        self.state: MachineState | None = None
        self.taken: MachineState | None = None
        self.free: MachineState | None = None


@dataclass
class Held:
    """What one job holds in the cluster."""

    priority: int
    started_us: int
    gpus: dict[str, int] = field(default_factory=dict)
    cpu_hosts: list[str] = field(default_factory=list)
    # The jobs this holding's plan preempts (`ClusterLedger`: claimed victims).
    claims: tuple[tuple[str, str], ...] = ()

    @property
    def hosts(self) -> list[str]:
        return sorted(set(self.gpus) | set(self.cpu_hosts))
