"""The cluster manager of one dynamic cluster, shared by every system.

`manager.py` is the actor (handlers, timers, the jobs it runs); `plans.py`
executes plans and `recovery.py` settles what a new leader finds; both are
collaborators that see the actor through the protocols of `state.py`. The
`ledger.py` keeps the cluster as an actor knows it (also the RMS's cache),
and `setup.py` draws container setup times.
"""
