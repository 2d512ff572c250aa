"""Persistence of an emulated run: one SQLite file per run (docs/design.md §3).

Only this package writes SQL. It never imports `emulator` or `actors`.
Modules: `db` (Store, transactions), `migrations` (schema), `runs` (run
metadata, violations), `trace` (trace and metric tables), `leases` (leader
election, fencing), `kv` (typed actor state), `events` (trace tagging).
"""

from store.db import NestedTransactionError, Store, StoreError

__all__ = ["NestedTransactionError", "Store", "StoreError"]
