"""Invariant checkers and the liveness judge of the emulated MAST, kept apart from the system.

Each checker judges one invariant family over the whole history, from the
trace alone (store events the shared database committed, decisions, faults
and the system's `setup` facts), online during a run and offline in
`mastemu check`; `actors.plugin` registers every one by name. `base` holds
what they share (routing store events, following the job queue, reading the
facts); one module per family of MAST's protocol follows (`allocation`,
`gang`, `auction`, `preemption`, `colocation`, `quota`, `lost_workload`),
then the slow path's (`storage`: storage capacity and the migration cap)
and job progress (`progress`). `liveness` judges, after the final heal,
which workloads could have run but never did.
"""
