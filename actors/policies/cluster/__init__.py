"""Cluster policies: pure decisions over a frozen `ClusterView` of one GPU cluster.

The contract (`api.py`) and registry, the baselines, Gavel and Themis, the
performance model, and a folder per larger family (`tiresias/`, `dally/`,
`shockwave/`).
"""
