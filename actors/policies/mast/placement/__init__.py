"""Placement of a workload's jobs on a region's dynamic clusters, scored by P_score.

Snapshots and plans (`snapshot.py`), per-snapshot indices of free capacity
and preemption candidates (`capacity.py`, `racks.py`), and the search
(`place.py`).
"""
