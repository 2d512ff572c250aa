"""The emulated MAST: its control plane, world, workloads and reports.

The global scheduler (`gms.py`), the regional schedulers and their auctions
(`rms.py`), RAS, Tetris and the data-migration service, the world and its
data warehouse, the workload model (`workload/`), reports (`report/`) and
benchmarks (`bench/`). Its decisions are the policies of `actors.policies.mast`.
"""
