"""A run as a test sees it: `run_scenario` and the `Run` it returns.

What can be run: a built-in scenario's name, a scenario file's path, a TOML
(or JSON) text, or a dict of the scenario's tables. `overrides` set keys by
dotted path, with list items by index (`{"system.load": 3}`,
`{"faults[0].at": "10m"}`); a key that does not exist yet is created, so a
test can add a section. The scenario is validated as `mastemu run` validates
it: bad input raises `InputError` naming the key path.
"""

from __future__ import annotations

import asyncio
import copy
import io
import json
import shlex
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.errors import InputError
from emulator.kernel import ActorError
from emulator.registry import REPORTERS, VIEWERS, builtin_scenarios, load_plugins
from emulator.run.events import NamedEvent, named
from emulator.run.overrides import render, set_path
from emulator.run.replay import check
from emulator.run.runner import RunResult, execute, plan_run, recorded_warnings
from emulator.run.scenario import convert_scenario, parse_raw
from emulator.trace import TraceEvent
from emulator.units import format_duration, parse_duration_us
from store import Store
from store.trace import iter_trace


@dataclass(frozen=True)
class Violation:
    """An invariant a run broke: which, when, where in the trace, and how."""

    invariant: str
    t_us: int
    seq: int
    message: str


@dataclass
class Run:
    """One finished run: its result, and readers of its run database."""

    result: RunResult
    scenario_name: str
    source: str
    until_us: int | None = None
    _events: list[TraceEvent] | None = field(default=None, repr=False)

    # ---- what the run printed -------------------------------------------------------
    @property
    def status(self) -> str:
        return self.result.status

    @property
    def seed(self) -> int:
        return self.result.seed

    @property
    def db(self) -> Path:
        return self.result.out

    @property
    def trace_hash(self) -> str:
        return self.result.trace_hash

    @property
    def violations(self) -> list[Violation]:
        return [Violation(inv, t, seq, msg) for seq, t, inv, msg in self.result.violations]

    @property
    def actor_errors(self) -> list[ActorError]:
        return list(self.result.actor_errors)

    @property
    def reproduce(self) -> str:
        """The command that runs this scenario and seed again."""
        until = f" --until {format_duration(self.until_us)}" if self.until_us is not None else ""
        return f"mastemu run {self.source} --seed {self.seed}{until}"

    # ---- the trace -------------------------------------------------------------------
    def trace(self) -> list[TraceEvent]:
        """Every stored event, in order (read once, then kept)."""
        if self._events is None:
            self._events = asyncio.run(_read_trace(self.db))
        return self._events

    def events(
        self,
        kind: str | None = None,
        type: str | None = None,
        src: str | None = None,
        dst: str | None = None,
        since: int | None = None,
        until: int | None = None,
    ) -> Iterator[NamedEvent]:
        """The events matching every filter given, with named fields (`emulator.run.events`).

        `src` and `dst` match an address or a prefix ending in "/" (`"rms/"`);
        `since` and `until` bound the time in µs, `since <= t < until`.
        """
        for event in self.trace():
            if kind is not None and event.kind != kind:
                continue
            if type is not None and event.type != type:
                continue
            if src is not None and not _matches(event.src, src):
                continue
            if dst is not None and not _matches(event.dst, dst):
                continue
            if since is not None and event.t_us < since:
                continue
            if until is not None and event.t_us >= until:
                break
            yield named(event)

    # ---- reports, state, offline check -----------------------------------------------
    def report(self) -> dict[str, Any]:
        """The same dict as `mastemu report RUN.db --json` (for runs of a system)."""
        load_plugins()
        raw = parse_raw(self.result_text(), f"{self.db} (stored scenario)")
        kind = raw.get("system", {}).get("kind") if isinstance(raw, dict) else None
        reporter = REPORTERS.get(kind) if isinstance(kind, str) else None
        if reporter is None:
            raise InputError(str(self.db), "", "no report for this run (it emulates no system)")
        report = asyncio.run(reporter.report(self.db))
        # As `report --json` adds them: input the run accepted with a warning.
        report["warnings"] = [str(w) for w in asyncio.run(recorded_warnings(self.db))]
        return report

    def state_at(self, t_us: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """The store's tables (workloads, jobs, allocations, leases, replicas) at `t_us`.

        Before the end, the trace folded to `t_us` by the viewer the run's
        system registered (issue 18: every event at or before `t_us`, rows
        by primary key); at the end (or None), the database's own tables.
        """
        if t_us is not None and t_us < self.result.end_t_us:
            load_plugins()
            raw = parse_raw(self.result_text(), f"{self.db} (stored scenario)")
            system = raw.get("system") if isinstance(raw, dict) else None
            kind = system.get("kind", "") if isinstance(system, dict) else ""
            viewer = VIEWERS.get(kind) if isinstance(kind, str) else None
            if viewer is None:
                raise InputError(str(self.db), "", f"no state fold for runs of {kind!r}")
            return asyncio.run(viewer.state_tables(self.db, t_us))
        tables = ("workloads", "jobs", "allocations", "leases", "replicas")
        out: dict[str, list[dict[str, Any]]] = {}
        with closing(sqlite3.connect(self.db)) as conn:
            conn.row_factory = sqlite3.Row
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            for table in tables:
                if table in names:
                    rows = conn.execute(f"SELECT * FROM {table} ORDER BY {_key_of(conn, table)}")
                    rows = rows.fetchall()
                    out[table] = [dict(r) for r in rows]
        return out

    def check(self) -> tuple[int, str]:
        """`mastemu check` of this run: its exit code and what it printed."""
        load_plugins()
        text = io.StringIO()
        code = asyncio.run(check(self.db, out=text))
        return code, text.getvalue()

    def result_text(self) -> str:
        """The scenario text stored with the run."""
        with closing(sqlite3.connect(self.db)) as conn:
            row = conn.execute("SELECT scenario_text FROM run_meta").fetchone()
        return str(row[0]) if row else ""


def _matches(address: str, wanted: str) -> bool:
    return address.startswith(wanted) if wanted.endswith("/") else address == wanted


async def _read_trace(db: Path) -> list[TraceEvent]:
    async with Store.open_ctx(db) as store:
        return [
            TraceEvent(r.seq, r.t_us, r.kind, r.src, r.dst, r.type, r.payload)
            async for r in iter_trace(store)
        ]


# ---- running -------------------------------------------------------------------------------
def run_scenario(
    scenario: str | Path | Mapping[str, Any],
    *,
    seed: int | None = None,
    until: int | str | None = None,
    out_dir: Path,
    overrides: Mapping[str, Any] | None = None,
) -> Run:
    """Run `scenario` (a built-in name, a path, TOML/JSON text or a dict) into `out_dir`.

    `seed` defaults to the scenario's own; `until` is emulated time in µs or a
    duration string ("30m"). Bad input raises `InputError`.
    """
    load_plugins()
    raw, source, path = _raw(scenario)
    for key, value in (overrides or {}).items():
        set_path(raw, key, value)
    if path is not None and not overrides:
        text = path.read_text(encoding="utf-8")
    else:
        text = json.dumps(raw, sort_keys=True, default=str)
    loaded = convert_scenario(raw, source)
    out_dir.mkdir(parents=True, exist_ok=True)
    chosen = loaded.seed if seed is None else seed
    out = out_dir / f"{loaded.name}-{chosen}.db"
    n = 1
    while out.exists():  # one test may run the same scenario and seed twice
        n += 1
        out = out_dir / f"{loaded.name}-{chosen}-{n}.db"
    # The plan keeps the original source: a file's relative names resolve beside it.
    plan = plan_run(loaded, text, str(path) if path else source)
    shown = source
    if path is None:
        # What was run is written beside its database, so that the reproduce command runs it.
        written = out.with_suffix(".scenario.json")
        written.write_text(text, encoding="utf-8")
        shown = str(written)
    elif overrides:
        # The file itself, so that what it names relative to itself is found again.
        sets = "".join(f" --set {shlex.quote(f'{k}={render(v)}')}" for k, v in overrides.items())
        shown = shlex.quote(shown) + sets
    until_us = _until(until)
    result = asyncio.run(execute(plan, seed=chosen, out=out, until_us=until_us))
    return Run(result, loaded.name, shown, until_us)


def _raw(scenario: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], str, Path | None]:
    """The scenario's tables, what to call it, and the file it came from (if one)."""
    if isinstance(scenario, Mapping):
        return copy.deepcopy(dict(scenario)), "<dict>", None
    text = str(scenario)
    builtin = builtin_scenarios().get(text)
    path = builtin or (Path(text) if "\n" not in text and len(text) < 4096 else None)
    if path is not None and path.is_file():
        parsed = parse_raw(path.read_text(encoding="utf-8"), str(path))
        source = text if builtin is not None else str(path)
    else:
        parsed, source, path = parse_raw(text, "<text>"), "<text>", None
    if not isinstance(parsed, dict):
        raise InputError(source, "", "a scenario is a table of keys")
    return parsed, source, path


def _until(until: int | str | None) -> int | None:
    if until is None or isinstance(until, int):
        return until
    return parse_duration_us(until)


def _key_of(conn: sqlite3.Connection, table: str) -> str:
    """How `state_at` orders a table's rows: by rowid (insertion), or by the primary
    key where the table has no rowid (MAST's machines and allocations)."""
    keyed = conn.execute(
        "SELECT sql LIKE '%WITHOUT ROWID%' FROM sqlite_master WHERE name = ?", (table,)
    ).fetchone()
    if not keyed or not keyed[0]:
        return "rowid"
    info = conn.execute(f"PRAGMA table_info({table})").fetchall()
    return ", ".join(row[1] for row in sorted(info, key=lambda r: r[5]) if row[5]) or "1"
