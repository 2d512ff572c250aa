"""Registries that the emulated system plugs into (the emulator never imports `actors`).

Actor kinds and built-in scenario folders arrive through the `mastemu.plugins`
entry point group: `actors.plugin:register` fills these tables when the CLI
or a test calls `load_plugins()`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Protocol

import msgspec

from emulator.actor import Actor
from emulator.errors import EmulatorInternalError, InputWarning
from emulator.net.specs import RegionSpec
from store.migrations import SchemaPart


@dataclass
class SystemBuild:
    """What a system contributes to one run (see `System.build`)."""

    actors: list[tuple[str, str, int, Callable[[], Actor]]]
    roles: list[str]
    # Seeds the run's store before the first event: setup(store, record), where
    # record(type, payload) puts a `setup` fact in the trace (checkers read them).
    setup: Callable[[Any, Callable[[str, Any], None]], Awaitable[None]]
    hardware_watchers: tuple[str, ...] = ()
    summary: dict[str, Any] = field(default_factory=dict)
    # Every message of the run takes exactly this long (`Network.fix_latency`;
    # 0: delivered at the instant it is sent); None keeps the scenario's network.
    message_latency_us: int | None = None
    # The system ends the run once its work is done (`Actor.end_run`): its
    # `duration` is then an upper bound, and a run that reaches it first is
    # cut short (`Kernel.cut_short`, a `run`/`cut-short` trace event).
    ends_when_done: bool = False
    # Kinds of the actors that do a unit of work each (a job's agent), started by
    # the system itself: `explore` faults them as `a live KIND`.
    workers: tuple[str, ...] = ()


@dataclass
class ReferenceRun:
    """What a system's reference engine made of a run (`mastemu run FILE --engine reference`).

    A system with a reference engine has a method `reference(params, seed,
    end_us, base_dir) -> ReferenceRun` next to `build`; the run database
    then holds the build's setup facts, each of `facts` as a `reference`
    trace event (hashed like any event), and `kv` as typed key-value rows
    (namespace, key, Struct) for its reporter, so `report` reads it like a
    run of the actors.
    """

    end_us: int
    done: bool  # its work was done by `end_us` (else the run is cut short)
    facts: list[tuple[str, Any]] = field(default_factory=list)
    kv: list[tuple[str, str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ActorFactory:
    """Makes one system actor, `cls(address, params)`, with its params left readable:
    the fault search reads the durations they set (`explore --grid`'s clocks)."""

    cls: type[Actor]
    address: str
    params: Any

    def __call__(self) -> Actor:
        return self.cls(self.address, self.params)


def actor_entry(
    address: str, host: str, cls: type[Actor], params: Any
) -> tuple[str, str, int, Callable[[], Actor]]:
    """One `SystemBuild.actors` entry: `cls(address, params)` on `host`, started at t=0."""
    return (address, host, 0, ActorFactory(cls, address, params))


class System(Protocol):
    """An emulated system a scenario names with `[system] kind = "..."`.

    `regions` and `addresses` are static (validation needs them before a
    seed is chosen); `build` is a pure function of the params and the seed.
    """

    kind: str
    Params: ClassVar[type[msgspec.Struct]]

    def regions(self, params: Any) -> list[RegionSpec]: ...

    def addresses(self, params: Any) -> list[str]: ...

    def check(self, params: Any, base_dir: Path) -> Sequence[InputWarning] | None:
        """Check what params refer to (files…); raise ValueError with a message.

        What is allowed but suspicious comes back as warnings (paths below the
        scenario), which `run` prints once and records in the run's trace.
        """
        ...

    def build(self, params: Any, seed: int, duration_us: int, base_dir: Path) -> SystemBuild: ...


class Reporter(Protocol):
    """Turns a run database of one system into a report (`mastemu report`, `compare`)."""

    async def report(self, db: Path) -> dict[str, Any]:
        """The report as one JSON-able object."""
        ...

    def render_text(self, reports: list[dict[str, Any]]) -> str:
        """A table for the terminal: one report, or several side by side."""
        ...

    def render_html(self, report: dict[str, Any], db: Path, out_dir: Path) -> Path:
        """Write an HTML page with plots into `out_dir`; return its path."""
        ...


class Viewer(Protocol):
    """Folds a run's trace into the system's state over time (`mastemu view`, `Run.state_at`)."""

    async def state_tables(self, db: Path, t_us: int | None) -> dict[str, list[dict[str, Any]]]:
        """The store's tables (workloads, jobs, allocations, leases, replicas) at `t_us`.

        After every event at or before `t_us` (None: the run's end); rows by primary key.
        """
        ...

    async def render_view(self, db: Path) -> str:
        """The self-contained HTML page that plays the run (no network access)."""
        ...

    async def status_line(self, db: Path) -> Any:
        """For `replay --step`: an object with `feed(event)`, fed every event in order,
        and `status() -> str`, one line (at most 100 columns) on the state so far."""
        ...


class Exporter(Protocol):
    """Groups a run's trace the way its system is built (`mastemu export --format chrome`).

    A run whose system registered none gets `emulator.run.chrome.GenericExport`.
    """

    def chrome_events(self, events: Iterable[Any], level: str) -> Iterator[dict[str, Any]]:
        """Chrome trace events (Perfetto) for `events`, the run's trace in order.

        `level` is "messages" or "decisions"; at "decisions" `events` holds no
        message traffic (deliveries, drops, timers). Yields as it goes, with the
        process and thread names (`ph: "M"`) last.
        """
        ...


# A benchmark takes its options (e.g. {"span_us": …}) and returns one JSON object.
Bench = Callable[[dict[str, Any]], dict[str, Any]]

ACTOR_KINDS: dict[str, type[Actor]] = {}
SYSTEMS: dict[str, System] = {}
REPORTERS: dict[str, Reporter] = {}
# By system kind; "" is a run of scenario-declared actors only (the lease demonstration).
VIEWERS: dict[str, Viewer] = {}
# By system kind, as VIEWERS; a kind without one is exported grouped by address prefix.
EXPORTERS: dict[str, Exporter] = {}
BENCHES: dict[str, Bench] = {}
SCENARIO_DIRS: list[Path] = []
# The systems' own tables, created in every run database after its own.
SCHEMA_PARTS: dict[str, SchemaPart] = {}
_loaded = False


def register_actor(cls: type[Actor]) -> type[Actor]:
    existing = ACTOR_KINDS.get(cls.kind)
    if existing is not None and existing is not cls:
        raise ValueError(f"actor kind {cls.kind!r} registered twice")
    ACTOR_KINDS[cls.kind] = cls
    return cls


def register_system(system: System) -> None:
    SYSTEMS[system.kind] = system


def register_reporter(system_kind: str, reporter: Reporter) -> None:
    REPORTERS[system_kind] = reporter


def register_viewer(system_kind: str, viewer: Viewer) -> None:
    VIEWERS[system_kind] = viewer


def register_exporter(system_kind: str, exporter: Exporter) -> None:
    EXPORTERS[system_kind] = exporter


def register_bench(name: str, bench: Bench) -> None:
    BENCHES[name] = bench


def register_schema_part(part: SchemaPart) -> None:
    known = SCHEMA_PARTS.get(part.name)
    if known is not None and known != part:
        raise ValueError(f"schema part {part.name!r} registered twice")
    SCHEMA_PARTS[part.name] = part


def schema_parts() -> tuple[SchemaPart, ...]:
    """Every registered schema part, in name order (what `Store.open` creates for a run)."""
    load_plugins()
    return tuple(SCHEMA_PARTS[name] for name in sorted(SCHEMA_PARTS))


def register_scenario_dir(path: Path) -> None:
    if path not in SCENARIO_DIRS:
        SCENARIO_DIRS.append(path)


def load_plugins() -> None:
    """Load every `mastemu.plugins` entry point once.

    The emulator never imports a system: systems, reporters, checkers and
    scenario folders arrive only through entry points (mastemu's own through
    `actors.plugin:register`), so a package that is not installed has none.
    """
    global _loaded
    if _loaded:
        return
    found = sorted(entry_points(group="mastemu.plugins"), key=lambda e: e.name)
    if not found:
        raise EmulatorInternalError(
            "no mastemu.plugins entry point is installed: install the package "
            '(pip install -e ".[test]") so that its systems are registered'
        )
    _loaded = True
    for ep in found:
        ep.load()()


def builtin_scenarios() -> dict[str, Path]:
    """Name → file of every built-in scenario."""
    load_plugins()
    found: dict[str, Path] = {}
    for folder in SCENARIO_DIRS:
        for path in sorted(folder.glob("*.toml")):
            found.setdefault(path.stem, path)
    return found
