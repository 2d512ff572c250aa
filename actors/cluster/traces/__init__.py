"""Import of cluster traces in three formats, with a consistency report.

- `"tiresias"` and `"shockwave"`: the two peer simulators' own formats
  (`peers.py`);
- `"jobs-csv"`: any jobs CSV with a column mapping in the scenario, for the
  public GPU-cluster logs (Helios, AcmeTrace, Philly-derived per-VC logs)
  as they are published (`jobs_csv.py`).

`load.py` reads a file and says what is fatal and what is listed;
`report.py` is the report (skipped, dropped, unknown, not honoured);
`rows.py` the typed field parsing every format shares.
"""

from actors.cluster.traces.jobs_csv import CsvColumns
from actors.cluster.traces.load import FORMATS, load_trace, parse_trace
from actors.cluster.traces.peers import SHOCKWAVE_COLUMNS, TIRESIAS_COLUMNS
from actors.cluster.traces.report import (
    FitProblem,
    NameCount,
    NotHonoured,
    TraceReport,
    check_fit,
    describe,
)
from actors.cluster.traces.rows import RowProblem, TraceFormat, model_key, trace_error

__all__ = [
    "FORMATS",
    "SHOCKWAVE_COLUMNS",
    "TIRESIAS_COLUMNS",
    "CsvColumns",
    "FitProblem",
    "NameCount",
    "NotHonoured",
    "RowProblem",
    "TraceFormat",
    "TraceReport",
    "check_fit",
    "describe",
    "load_trace",
    "model_key",
    "parse_trace",
    "trace_error",
]
