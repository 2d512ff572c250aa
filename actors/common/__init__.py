"""Machinery every emulated system shares, and none owns.

Leadership through a lease, the client that submits workloads, the job
agent, the messages of the shared protocol, cluster membership, and the
cluster manager (`cm/`). Nothing here imports the package of one system.
"""
