"""Tetris, the slow path's daily data placement: cost, the pass, replicas, settings.

The cost model (`cost.py`), the pass's incremental state (`state.py`), its
hill climbing (`plan.py`) and group moves (`groups.py`), extra replicas
(`replicas.py`), the placement figures (`metrics.py`), and the
`[system.tetris]` settings (`settings.py`).
"""
