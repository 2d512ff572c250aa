"""Reports of MAST runs: what `mastemu report` and `mastemu compare` show for `kind = "mast"`.

A report is one JSON-able dict read from a run database: `fold` makes the
one pass over the trace, `figures` turns it and the store's tables into the
fast path's figures (allocation rate, scheduling events and their SLO,
control-plane latencies; definitions in its docstring) and `slow_figures`
adds the slow path's (Tetris's placement, data moved, storage), all with
`arithmetic`'s helpers. `text` renders reports as a terminal table, `page`
as an HTML page with the PNG figures of `plots` and `slow_plots`, and
`reporter` ties these together as the `MastReporter` that `actors.plugin`
registers.
"""
