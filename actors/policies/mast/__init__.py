"""MAST-level policies: pure decisions over frozen snapshots, by name in `registry.py`.

The contract (`api.py`), ranking, quota and credit, routing (the auction,
the federated baseline), placement (`placement/`), the slow path's Tetris
(`tetris/`), data migration and on-demand replication, RAS. They import
value types only.
"""
