"""How long a job's containers take to come up, drawn when a cluster manager starts an agent.

MAST §5.5: acquiring and setting up a workload's containers takes
p50/p90/p99 = 150/278/449 s. A cluster manager draws it for every agent it
starts without a performance model (`Pace`, which brings its own costs),
from its `setup` random stream: the draw is part of the run's history, so it
must stay one `rng.random()` call per start.
"""

from __future__ import annotations

import random

from actors.common.percentiles import percentiles
from emulator.units import US_PER_S

# MAST §5.5: acquiring and setting up a workload's containers,
# p50/p90/p99 = 150/278/449 s. p0 = 60 s (image pull and start of a warm
# host); p100 = 900 s ("10 minutes or longer" for massive LLM jobs).
SETUP_S = percentiles(60, 150, 278, 449, 900)


def setup_time_us(rng: random.Random) -> int:
    """Container acquisition and setup of a workload (MAST §5.5: 150/278/449 s)."""
    return round(SETUP_S.sample(rng) * US_PER_S)
