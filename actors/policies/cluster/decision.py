"""Whether a cluster policy's decision can be carried out on the view it was made from.

Both machineries that run cluster policies — the reference engine
(`actors/cluster/engine.py`) and the cluster scheduler actor — check a decision
whole before acting on any of it, with the same rules, so a policy bug is
reported the same way wherever it shows: a preempted job must be running, an
offered job waiting, each job named once; an offer must be exactly the job's
gang of GPUs, on known machines, within what is free once the decision's
preemptions are done; and its placement must be no looser than the tier it
claims.
"""

from __future__ import annotations

from collections.abc import Mapping

from actors.policies.cluster.api import ClusterView, Decision
from actors.policies.cluster.placement import TIERS, tier_of
from emulator.errors import PolicyContractError

__all__ = ["check_decision"]


def check_decision(
    policy: str, view: ClusterView, decision: Decision, rack_of: Mapping[str, str]
) -> None:
    """Raise `PolicyContractError` naming the policy and job if `decision` is not feasible."""

    def fail(job_id: str, what: str) -> PolicyContractError:
        return PolicyContractError(f"policy {policy!r}: job {job_id!r}: {what}")

    jobs = {j.job_id: j for j in view.jobs}
    free = {s.host: s.gpus_free for s in view.machines}
    preempted: set[str] = set()
    for job_id in decision.preempt:
        j = jobs.get(job_id)
        if j is None or not j.running or job_id in preempted:
            raise fail(job_id, "preempted but it is not running (or preempted twice)")
        preempted.add(job_id)
        for host, n in j.placement:
            free[host] = free.get(host, 0) + n
    offered: set[str] = set()
    for offer in decision.start:
        j = jobs.get(offer.job_id)
        if j is None or j.running or offer.job_id in offered:
            raise fail(offer.job_id, "offered but it is not waiting (or offered twice)")
        offered.add(offer.job_id)
        if sum(n for _, n in offer.placement) != j.gpus:
            raise fail(offer.job_id, f"offer of {offer.placement} is not {j.gpus} GPUs")
        for host, n in offer.placement:
            if host not in free or n < 1:
                raise fail(offer.job_id, f"offer names {host!r} with {n} GPUs")
            free[host] -= n
            if free[host] < 0:
                raise fail(offer.job_id, f"offer over the free GPUs of {host}")
        actual = tier_of(offer.placement, rack_of)
        if TIERS.index(actual) > TIERS.index(offer.tier):
            raise fail(offer.job_id, f"{actual}-tier placement offered as {offer.tier}")
