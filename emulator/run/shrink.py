"""`mastemu shrink RUN.db`: the fewest faults that still break the same invariant.

A failing run under a random nemesis has dozens of faults, most of them beside
the point. Shrinking re-runs the run's own scenario and seed (both stored in
the run database) with faults taken away, keeps every removal after which the
same invariant is still violated, and writes what is left as a scenario file.

The nemesis draws its whole schedule up front from the run seed, so the
schedule of the failing run is first materialised: drawn again exactly as the
runner draws it and written out as an explicit fault list, with the nemesis
kept only for its final heal (`faults_max = 0`), at the same instant as in the
original run. That baseline must still fail before anything is removed.

The search is delta debugging (Zeller's ddmin): no faults at all first, then
remove halves, then smaller and smaller chunks down to single faults, and
start over from whatever still fails. Every candidate is checked by a real
run with only the target invariant enabled, stopping at its first violation;
the file written at the end enables the original invariants and is verified
once more exactly as `mastemu run FILE` runs it.

A run that broke no invariant may still have failed: an actor died on an
exception of its own (`actor-error`), or work never ran after the final heal
(`liveness`; `emulator.run.failures`). Such a failure is shrunk the same
way, with no checker enabled, and a candidate keeps it only if it fails
with the same detail (the same exception in the same kind of actor, work
stuck in the same states), so the reproducer shows the bug the run showed.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import tempfile
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import msgspec

from emulator.errors import InputError
from emulator.run import failures
from emulator.run.scenario import Fault, convert_scenario, decode_scenario, parse_raw
from emulator.units import MIN, Duration, H, S, parse_duration_us
from store import Store, StoreError
from store.runs import RunMeta, get_run_meta, list_violations
from store.trace import iter_trace

EXIT_WRITTEN, EXIT_NOTHING_TO_SHRINK = 0, 1
LINE_MAX = 100  # longer arrays are written one element per line


@dataclass(frozen=True)
class Schedule:
    """A run's faults as an explicit list, and when its nemesis' final heal came."""

    faults: list[Fault]
    heal_at_us: int | None


# ---- reading the failing run ---------------------------------------------------
# What a run failed of: an invariant (detail None: any violation of it counts), or
# one of `failures.KINDS` with the detail that tells that failure apart.
Target = tuple[str, str | None]


async def read_run(db: Path) -> tuple[RunMeta, list[tuple[int, int, str, str]]]:
    """The run's metadata and its violations (from the trace if it never finished)."""
    if not db.is_file():
        raise InputError(str(db), "", "no such run database")
    try:
        store = await Store.open(db)
    except StoreError as error:
        raise InputError(str(db), "", str(error)) from None
    try:
        meta = await get_run_meta(store)
        if meta is None:
            raise InputError(str(db), "", "no run metadata: not a finished or started run")
        found = [(v.seq or 0, v.t_us, v.invariant, v.message) for v in await list_violations(store)]
        if not found and meta.status == "running":
            # A killed run records its violations only in the trace.
            async for row in iter_trace(store, kinds=["violation"]):
                found.append((row.seq, row.t_us, row.type, str(row.payload)))
    finally:
        await store.close()
    return meta, found


async def read_other_failures(db: Path, meta: RunMeta) -> list[tuple[str, str]]:
    """How the stored run failed besides its violations, judged from its trace."""
    from emulator.liveness import judge_liveness
    from emulator.run.replay import trace_events

    invariants = decode_scenario(meta.scenario_text, f"{db} (stored scenario)").invariants
    events = [e async for e in trace_events(db)]
    return failures.beyond_invariants(
        failures.actor_errors(events),
        meta.status,
        invariants,
        lambda may_wait: judge_liveness(events, may_wait),
    )


def holds(found: dict[str, str | None], target: Target) -> bool:
    """Did a run that failed as `found` (kind → detail) fail as `target`?"""
    kind, detail = target
    return kind in found and (detail is None or found[kind] == detail)


def describe(target: Target) -> str:
    """`violates gang`, `fails with actor-error (RuntimeError in rms)`."""
    kind, detail = target
    return f"violates {kind}" if detail is None else f"fails with {kind} ({detail})"


# ---- the schedule the run had --------------------------------------------------------
def materialise(plan: Any, seed: int) -> Schedule:
    """The scenario's faults followed by what its nemesis drew for `seed`.

    Uses the runner's own `fault_schedule`, fed the roles and topology the
    run had, so the list is the one the run injected.
    """
    from emulator.net.topology import Topology
    from emulator.run.runner import build_system, fault_schedule

    build = build_system(plan, seed)
    roles = list(plan.roles) + (build.roles if build is not None else [])
    faults = fault_schedule(plan, seed, roles, Topology(plan.scenario.world.regions))
    return Schedule(faults.scenario + faults.nemesis, faults.heal_at_us)


def duration_text(us: int) -> str:
    """Exact and readable: `1h2m3.456789s`, `5h`, `0.25s`; falls back to `Nus`."""
    hours, rest = divmod(us, H)
    minutes, rest = divmod(rest, MIN)
    seconds, micros = divmod(rest, S)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    if seconds or micros or not text:
        frac = f".{micros:06d}".rstrip("0") if micros else ""
        text += f"{seconds}{frac}s"
    return text if parse_duration_us(text) == us else f"{us}us"


@functools.cache
def _duration_fields(cls: type) -> frozenset[str]:
    """Fields typed `Duration` (or `Duration | None`): by type, since a default may be an int."""
    hints = typing.get_type_hints(cls)
    return frozenset(n for n, h in hints.items() if _is_duration(h))


def _is_duration(hint: Any) -> bool:
    """`Duration`, a bounded one (`at_least`), or either `| None`."""
    options = typing.get_args(hint) or (hint,)
    return any(isinstance(h, type) and issubclass(h, Duration) for h in options)


def fault_raw(fault: Fault) -> dict[str, Any]:
    """A fault as it would be written in a scenario file (durations as text)."""
    raw: dict[str, Any] = {"action": type(fault).__struct_config__.tag}
    durations = _duration_fields(type(fault))
    for name in fault.__struct_fields__:
        value = getattr(fault, name)
        if value is None:
            continue
        raw[name] = duration_text(int(value)) if name in durations else value
    return msgspec.to_builtins(raw)


def variant(
    raw: dict[str, Any], schedule: Schedule, keep: Sequence[int], invariants: dict[str, Any]
) -> dict[str, Any]:
    """The stored scenario with only the faults at indices `keep`, nemesis materialised."""
    out = {k: v for k, v in raw.items() if k not in ("faults", "nemesis", "invariants")}
    if schedule.heal_at_us is not None:
        # Draws nothing, but ends the run's faults with the same final heal.
        out["nemesis"] = {
            "enabled": True,
            "faults_max": 0,
            "heal_at": duration_text(schedule.heal_at_us),
        }
    elif "nemesis" in raw:
        out["nemesis"] = raw["nemesis"]
    out["faults"] = [fault_raw(schedule.faults[i]) for i in keep]
    out["invariants"] = invariants
    return out


# ---- TOML out -------------------------------------------------------------------------
def _key(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else _string(key)


def _string(text: str) -> str:
    # JSON's escapes are TOML's, except that TOML also wants DEL escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = [f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _entry(key: str, value: Any) -> str:
    """`key = value`; a long array of tables goes one element per line."""
    line = f"{_key(key)} = {_value(value)}"
    if len(line) <= LINE_MAX or not isinstance(value, list) or len(value) < 2:
        return line
    return f"{_key(key)} = [\n" + "".join(f"  {_value(v)},\n" for v in value) + "]"


def to_toml(raw: dict[str, Any], header: Sequence[str] = ()) -> str:
    """Plain data → TOML: scalars, then one `[table]` per dict, then `[[arrays]]` of tables."""
    lines = [f"# {h}" for h in header]
    tables = []
    arrays = []
    for key, value in raw.items():
        if value is None:  # TOML has no null; a missing key means the default
            continue
        if isinstance(value, dict):
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            arrays.append((key, value))
        else:
            lines.append(_entry(key, value))
    for key, table in tables:
        lines += ["", f"[{_key(key)}]"]
        lines += [_entry(k, v) for k, v in table.items() if v is not None]
    for key, items in arrays:
        for item in items:
            lines += ["", f"[[{_key(key)}]]"]
            lines += [_entry(k, v) for k, v in item.items() if v is not None]
    return "\n".join(lines) + "\n"


# ---- delta debugging ------------------------------------------------------------------
def ddmin(
    items: list[int], fails: Callable[[list[int]], bool], budget: Callable[[], bool]
) -> list[int]:
    """A smallest-found sublist of `items` for which `fails` still holds.

    `fails(items)` is known to hold. `budget()` says whether another test may
    run; when it is spent the best list found so far is returned.
    """
    if budget() and fails([]):
        return []
    n = 2
    while len(items) >= 2 and budget():
        size = -(-len(items) // n)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        for i in range(len(chunks)):
            if not budget():
                return items
            rest = [x for j, chunk in enumerate(chunks) if j != i for x in chunk]
            if fails(rest):
                items, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    return items


class Shrinker:
    """Runs candidate schedules of one failing run and remembers their outcomes."""

    def __init__(
        self,
        raw: dict[str, Any],
        schedule: Schedule,
        seed: int,
        target: Target,
        workdir: Path,
        runs_max: int,
        log: TextIO,
    ) -> None:
        self.raw = raw
        self.schedule = schedule
        self.seed = seed
        self.target = target
        self.workdir = workdir
        self.runs_max = runs_max
        self.runs = 0
        self.log = log
        self._seen: dict[tuple[int, ...], bool] = {}

    def budget(self) -> bool:
        return self.runs < self.runs_max

    def fails(self, keep: list[int]) -> bool:
        """Does the run with only these faults still fail as the target?"""
        key = tuple(keep)
        if key not in self._seen:
            self.runs += 1
            kind, _ = self.target
            # Only the target's checker, stopping at its first violation; none for a
            # failure no invariant names (its run must reach its end to be judged).
            quick = dict(self.raw.get("invariants", {}))
            quick["enabled"] = [] if kind in failures.KINDS else [kind]
            quick["stop_on_violation"] = kind not in failures.KINDS
            text = json.dumps(variant(self.raw, self.schedule, keep, quick))
            found = run_text(text, "candidate", self.seed, self.workdir)
            self._seen[key] = holds(found, self.target)
            verdict = "still " + describe(self.target) if self._seen[key] else "clean"
            print(f"run {self.runs}: {len(keep)} fault(s): {verdict}", file=self.log)
        return self._seen[key]


def run_text(text: str, source: str, seed: int, workdir: Path) -> dict[str, str | None]:
    """How one run of this scenario text failed: each invariant it violated (detail
    None), and each failure of `failures.KINDS` with its detail."""
    from emulator.liveness import LivenessWatch
    from emulator.run.runner import execute, plan_run

    scenario = convert_scenario(parse_raw(text, source), source)
    plan = plan_run(scenario, text, source)
    watch = LivenessWatch()
    result = asyncio.run(
        execute(plan, seed=seed, out=workdir / "candidate.db", on_setup=watch.attach)
    )
    found: dict[str, str | None] = {v[2]: None for v in result.violations}
    others = failures.beyond_invariants(
        result.actor_errors, result.status, scenario.invariants, watch.reports
    )
    for kind, detail in others:
        found.setdefault(kind, detail)
    return found


# ---- the command ----------------------------------------------------------------------
def shrink_run(
    db: Path,
    *,
    invariant: str | None = None,
    target: Path | None = None,
    runs_max: int = 200,
    out: TextIO | None = None,
) -> int:
    """Shrink the failing run `db` into `target` (default RUN.min.toml), telling `out` how.

    Returns EXIT_WRITTEN (0) when a reproducer was written, EXIT_NOTHING_TO_SHRINK
    (1) when there was nothing to shrink; bad input raises InputError.
    """
    out = out or sys.stdout
    meta, violations = asyncio.run(read_run(db))
    found: dict[str, str | None] = {v[2]: None for v in violations}
    if not found or invariant in failures.KINDS:
        for kind, detail in asyncio.run(read_other_failures(db, meta)):
            found.setdefault(kind, detail)
    if not found:
        print(
            f"{db}: the run ({meta.status}) violated no invariant and failed no other way: "
            "nothing to shrink",
            file=out,
        )
        return EXIT_NOTHING_TO_SHRINK
    invariant = invariant or next(iter(found))
    if invariant not in found:
        named = ", ".join(sorted(found))
        raise InputError("--invariant", "", f"{invariant!r} was not violated (found: {named})")
    goal: Target = (invariant, found[invariant])
    source = f"{db} (stored scenario)"
    raw = parse_raw(meta.scenario_text, source)
    target = target or db.with_suffix(".min.toml")
    if target.is_dir():
        raise InputError(str(target), "", "is a directory")
    plan = _plan(raw, meta.scenario_text, source)
    schedule = materialise(plan, meta.seed)
    everything = list(range(len(schedule.faults)))
    print(
        f"shrinking {db}: {describe(goal)} with seed {meta.seed}; "
        f"{len(everything)} fault(s) in its schedule",
        file=out,
    )
    with tempfile.TemporaryDirectory(prefix="mastemu-shrink-") as tmp:
        shrinker = Shrinker(raw, schedule, meta.seed, goal, Path(tmp), runs_max, out)
        if not shrinker.fails(everything):
            print(
                f"{db}: the materialised schedule no longer {describe(goal)} "
                "(a different mastemu version, or a fault target chosen at random when it "
                "fires?): nothing written",
                file=out,
            )
            return EXIT_NOTHING_TO_SHRINK
        keep = ddmin(everything, shrinker.fails, shrinker.budget)
        if not shrinker.budget():
            print(f"stopped after {shrinker.runs} runs (--runs-max)", file=out)
        try:
            text = reproducer(raw, schedule, keep, meta, goal, db)
        except TypeError as error:  # a JSON scenario holding something TOML cannot say
            raise InputError(source, "", str(error)) from None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        except OSError as error:
            raise InputError(str(target), "", f"cannot write: {error.strerror or error}") from None
        # Exactly what the user will run: the file as written, its own seed.
        if not holds(run_text(text, str(target), meta.seed, Path(tmp)), goal):
            print(f"{target}: written, but it no longer {describe(goal)}", file=out)
            return EXIT_NOTHING_TO_SHRINK
    print(f"faults: {len(everything)} before, {len(keep)} after ({shrinker.runs} runs)", file=out)
    print(f"wrote {target}", file=out)
    print(f"reproduce: mastemu run {target}", file=out)
    return EXIT_WRITTEN


def reproducer(
    raw: dict[str, Any],
    schedule: Schedule,
    keep: list[int],
    meta: RunMeta,
    target: Target,
    db: Path,
) -> str:
    """The minimal scenario as TOML: original invariants, its own name and the run's seed."""
    result = variant(raw, schedule, keep, raw.get("invariants", {}))
    # A new name, so that running it does not replace the original run's database.
    result["name"] = f"{raw.get('name', meta.scenario_name)}-min"
    result["seed"] = meta.seed
    result["description"] = (
        f"Minimal reproducer of a run that {describe(target)} (seed {meta.seed}), shrunk from "
        f"{db}. The original: {raw.get('description', '')}"
    ).strip()
    header = [
        f"Shrunk by `mastemu shrink {db}`: {len(keep)} of {len(schedule.faults)} faults,",
        f"still {describe(target)} with seed {meta.seed}.",
    ]
    return to_toml(result, header)


def _plan(raw: Any, text: str, source: str) -> Any:
    from emulator.run.runner import plan_run

    if not isinstance(raw, dict):
        raise InputError(source, "", "not a scenario table")
    return plan_run(convert_scenario(raw, source), text, source)
