"""Smallest gang first, never preempting: the policy this package's team ships.

Waiting jobs are taken in order of the GPUs they ask for (then arrival);
each starts on the machines with the most free GPUs, so that a gang spans
as few machines as possible. The first job that does not fit stops the
pass: a large job waits, but a smaller one is never passed over, which is
the promise `checks.SmallestFirstOrder` holds every run to.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from actors.extend import AcceptsEveryOffer, ClusterView, Decision, JobView, Start, Tier


class SmallestFirstParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`max_starts`: jobs started per decision at most (bounds one pass's burst)."""

    max_starts: int = 64

    def __post_init__(self) -> None:
        if not 1 <= self.max_starts <= 10_000:
            raise ValueError(f"max_starts must be in 1..10000, got {self.max_starts}")


class SmallestFirst(AcceptsEveryOffer):
    name: ClassVar[str] = "smallest-first"
    Params: ClassVar[type] = SmallestFirstParams

    def initial_state(self, params: SmallestFirstParams) -> None:
        del params

    def order(self, job: JobView) -> tuple[int, int, str]:
        """The order waiting jobs are considered in: fewest GPUs, then arrival."""
        return (job.gpus, job.submit_us, job.job_id)

    def decide(
        self, view: ClusterView, state: None, params: SmallestFirstParams
    ) -> tuple[Decision, None]:
        free = {s.host: s.gpus_free for s in view.machines}
        racks = {s.host: s.rack for s in view.machines}
        waiting = sorted((j for j in view.jobs if not j.running), key=self.order)
        starts: list[Start] = []
        for job in waiting[: params.max_starts]:
            placement = _fewest_machines(free, job)
            if placement is None:
                break
            for host, n in placement:
                free[host] -= n
            starts.append(
                Start(job_id=job.job_id, placement=placement, tier=_tier(placement, racks))
            )
        return Decision(start=tuple(starts)), state


def _fewest_machines(free: dict[str, int], job: JobView) -> tuple[tuple[str, int], ...] | None:
    if sum(free.values()) < job.gpus:
        return None
    taken: list[tuple[str, int]] = []
    need = job.gpus
    for host in sorted(free, key=lambda h: (-free[h], h)):
        if need == 0 or free[host] == 0:
            break
        n = min(need, free[host])
        taken.append((host, n))
        need -= n
    return tuple(sorted(taken))


def _tier(placement: tuple[tuple[str, int], ...], racks: dict[str, str]) -> Tier:
    if len(placement) == 1:
        return "machine"
    return "rack" if len({racks[h] for h, _ in placement}) == 1 else "network"


__all__ = ["SmallestFirst", "SmallestFirstParams"]
