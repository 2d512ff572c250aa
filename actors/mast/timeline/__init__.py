"""The state of a recorded run at any instant, and the scenario player that shows it.

`fold` folds a run's trace (its setup facts, committed store writes,
decisions, faults, crashes) into a `state.SystemState` at a time T: the
MAST tables the store keeps (workloads, jobs, allocations, leases,
replicas, copies) plus what only the trace knows (actors down or paused,
regions and machines down, partitions, the latest auctions with their
bids). `recording` reads a run database into that fold; `page` writes the
self-contained HTML player (`mastemu view`); `viewer` is what
`actors.plugin` registers for the CLI and `Run.state_at`.
"""
