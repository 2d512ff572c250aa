"""The `cluster` system: one GPU cluster run by a cluster policy (Tiresias, Dally, Shockwave…).

Its scheduler actor, the agents that answer offers, the per-job bookkeeping,
the workload generators and traces it runs, and its report and metrics.
"""
