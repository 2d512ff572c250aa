"""A job's own agent in a cluster-policy run: it answers the scheduler's offers.

It lives from the start of the run to its end on a control host (one per
trace job), holds no state of its own, and answers an offer with its
policy's `accepts` on the offer and on the view of the job that came with
it — everything Dally's agent needs to apply its delay timers is in the
offer's note. Training itself is run by the job agents that cluster
managers start (`actors/common/job_agent.py`), as in MAST.
"""

from __future__ import annotations

from typing import Any

import msgspec

from actors.cluster.messages import Offer, OfferReply
from actors.policies.cluster.registry import cluster_policy
from emulator.actor import Actor, on


class JobAgentParams(msgspec.Struct, frozen=True, kw_only=True):
    """The job's id, its policy (by name) with its validated params, and where answers go."""

    job_id: str
    policy: str
    policy_params: Any
    scheduler: str


class OfferAgent(Actor):
    kind = "cluster-job-agent"
    params: JobAgentParams

    async def on_start(self) -> None:
        self.policy = cluster_policy(self.params.policy)

    @on(Offer)
    def offer(self, msg: Offer) -> None:
        p = self.params
        accept = self.policy.accepts(msg.start, msg.job, self.now_us, p.policy_params)
        self.decision(
            "agent.offer",
            {
                "job": p.job_id,
                "offer": msg.offer_id,
                "tier": msg.start.tier,
                "waited_s": (self.now_us - msg.job.queued_since_us) / 1e6,
                "accept": accept,
            },
        )
        self.send(p.scheduler, OfferReply(offer_id=msg.offer_id, job_id=p.job_id, accept=accept))
