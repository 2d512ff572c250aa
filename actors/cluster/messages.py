"""Messages between the cluster scheduler and the jobs' agents: offers and their answers.

A cluster policy's start is an *offer* (`actors/policies/cluster/api.py`):
the scheduler reserves the GPUs and asks the job's agent, which answers
with the policy's `accepts` — Dally's delay scheduling turns down offers
looser than the job's timers allow. Only an accepted offer becomes a plan
for the cluster manager. Offers are not resent: one lost, or not answered
within the scheduler's `offer_timeout`, counts as turned down.
"""

from __future__ import annotations

from actors.common.messages import Msg
from actors.policies.cluster.api import JobView, Start


class Offer(Msg):
    """Scheduler → job agent: will you run on this placement? `job` is the policy's view of you."""

    offer_id: int
    start: Start
    job: JobView


class OfferReply(Msg):
    """Job agent → scheduler: the answer to offer `offer_id`."""

    offer_id: int
    job_id: str
    accept: bool
