"""mastemu in other people's test suites: run a scenario, read what happened, assert.

`run_scenario` runs a built-in scenario, a file, a TOML string or a dict,
with keys overridden by dotted path, and returns a `Run`: its status, its
violations, its actor errors, its events with named fields, its report, its
offline check. `assertions` says things about a run in the protocol's terms
(`assert_clean`, `assert_eventually`, `assert_never`), with failure messages
that show the trace around the point that failed. The pytest plugin
(`emulator.testing.pytest_plugin`, installed as a `pytest11` entry point)
gives tests a `mastemu` fixture and the `mastemu_seeds` marker.
"""

from emulator.testing.assertions import assert_clean, assert_eventually, assert_never
from emulator.testing.fixture import MastemuFixture
from emulator.testing.runs import Run, Violation, run_scenario

__all__ = [
    "MastemuFixture",
    "Run",
    "Violation",
    "assert_clean",
    "assert_eventually",
    "assert_never",
    "run_scenario",
]
