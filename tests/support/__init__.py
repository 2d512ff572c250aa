"""Helpers the test files share; a test file imports helpers from here, never from another test.

- `dsl`: the scripted-scenario DSL (tiny MAST worlds: `scenario`, `workload`,
  `job`, fault builders), `run`, and what a run left in its tables.
- `stories`: scripted stories several files tell (the lake, the preempted gang).
- `builtin`: built-in scenarios read as dicts, edited and run.
- `trace`: reading a run's trace by field name (`store_events`, `leaders`, …).
- `rundb`: reading a run database (metadata, trace, hash); `cli`: `mastemu` in-process.
- `broken`: deliberately broken components the checkers must catch.
- `report`: the MAST report of a run database.
- `harness`, `actors`: bare kernels and the small actors run on them.
- `placement_reference`, `placement_index`: the brute-force placement and index comparisons.
- `paths`: where the suite finds its data and the built-in scenarios.
- `imports`: the import graph of the project's modules (the layout tests).
"""
