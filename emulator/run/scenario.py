"""Scenario files: TOML decoded by msgspec into typed Structs.

msgspec rejects unknown keys, wrong types and out-of-range values with the key
path (`$.faults[2].at`); references between parts of a scenario (an actor's
host, a fault's target region or actor) are checked afterwards by
`check_references`. Every problem becomes one `InputError` naming the file
and the key path, which the CLI prints without a traceback (exit code 2).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from emulator.bugs import check_bugs
from emulator.errors import InputError
from emulator.net.specs import (
    Name,
    NetworkSpec,
    Probability,
    Spec,
    WorldSpec,
)
from emulator.net.topology import iter_nodes
from emulator.registry import load_plugins
from emulator.run.targets import check_target, instance_role, listed
from emulator.units import (
    DURATION_DOC,
    MS,
    Duration,
    S,
    at_least,
    decode_duration,
    duration_schema,
)

# Validation enumerates every node of the world; this keeps it to about a second.
WORLD_MACHINES_MAX = 1_000_000

# A window of a fault lasts some time: a zero-length one is a typo (`0s`).
Window = at_least(1)
# The nemesis draws a fault about every `interval_mean`: near zero it would
# spend its `faults_max` at one instant.
NemesisInterval = at_least(S)
# A scenario's name names its run database (`runs/NAME-SEED.db`): a plain
# file name, no folder in it, not hidden.
_RUN_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.+=,@-]{0,99}$"
_RUN_NAME = re.compile(_RUN_NAME_PATTERN)
RunName = Annotated[str, Meta(min_length=1, max_length=100, pattern=_RUN_NAME_PATTERN)]


def _dec_hook(type_: type, obj: Any) -> Any:
    if isinstance(type_, type) and issubclass(type_, Duration):
        return decode_duration(obj, type_)
    raise NotImplementedError(f"no decoder for {type_}")


def _schema_hook(type_: type) -> dict[str, Any]:
    if isinstance(type_, type) and issubclass(type_, Duration):
        return duration_schema(type_)
    raise NotImplementedError


# ---- actors ------------------------------------------------------------
class ActorSpec(Spec, kw_only=True):
    kind: Name
    address: Name
    host: Name
    # Duration defaults are plain ints (µs): see scenario_json_schema.
    start_at: Duration = 0
    params: dict[str, Any] = {}


# ---- faults (tagged by `action`) -----------------------------------------
class FaultBase(Spec, tag_field="action", kw_only=True):
    at: Duration


class CrashFault(FaultBase, tag="crash", kw_only=True):
    """Crash an actor or a role-relative target (`emulator.run.targets`); restart after
    `restart_after` if given."""

    target: Name
    restart_after: Duration | None = None


class RestartFault(FaultBase, tag="restart", kw_only=True):
    target: Name


class PauseFault(FaultBase, tag="pause", kw_only=True):
    """Freeze an actor (GC pause, stopped VM): its lease may expire meanwhile."""

    target: Name
    duration: Window


class PartitionFault(FaultBase, tag="partition", kw_only=True):
    """Cut the link between two regions, or between two hosts (both ways).

    Exactly one of `regions` and `hosts` is given; heal after `duration` if given.
    """

    regions: Annotated[list[Name], Meta(min_length=2, max_length=2)] | None = None
    hosts: Annotated[list[Name], Meta(min_length=2, max_length=2)] | None = None
    duration: Window | None = None


class HealFault(FaultBase, tag="heal", kw_only=True):
    """Heal every partition and remove every loss/duplication/delay rule."""


class LinkFault(FaultBase, kw_only=True):
    duration: Window
    between: Annotated[list[Name], Meta(min_length=2, max_length=2)] | None = None


class LossFault(LinkFault, tag="loss", kw_only=True):
    probability: Probability


class DuplicateFault(LinkFault, tag="duplicate", kw_only=True):
    probability: Probability


class DelayFault(LinkFault, tag="delay", kw_only=True):
    extra_ms: Annotated[float, Meta(gt=0.0, le=3_600_000.0)]


class DownFault(FaultBase, tag="down", kw_only=True):
    """Take a machine, rack, fault domain, datacenter or region (`NAME` or
    `region NAME`) down."""

    node: Name
    duration: Window | None = None


class UpFault(FaultBase, tag="up", kw_only=True):
    node: Name


class SlowStoreFault(FaultBase, tag="slow-store", kw_only=True):
    """For `duration`, every store call of the target's actors (an actor, a
    role-relative target or `region NAME`, resolved when the fault fires)
    answers `latency` late: the call takes effect when made, its caller
    resumes only `latency` later, so its lease may expire while it waits."""

    target: Name
    duration: Window
    latency: Duration


Fault = (
    CrashFault
    | RestartFault
    | PauseFault
    | PartitionFault
    | HealFault
    | LossFault
    | DuplicateFault
    | DelayFault
    | DownFault
    | UpFault
    | SlowStoreFault
)

NemesisAction = Literal[
    "crash", "pause", "partition", "loss", "duplicate", "delay", "down", "slow-store"
]


class NemesisSpec(Spec, kw_only=True):
    """A seeded random fault schedule, always ending with a final heal."""

    enabled: bool = False
    start: Duration = 600_000_000
    # At or after `start` (and at most the run's duration).
    heal_at: Duration | None = None
    interval_mean: NemesisInterval = 1_200_000_000
    duration_mean: Window = 300_000_000
    actions: Annotated[list[NemesisAction], Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: ["crash", "pause", "partition", "loss"]
    )
    loss_probability: Probability = 0.2
    # `slow-store` faults: each call's extra latency is drawn around this mean.
    store_latency_mean: at_least(MS) = 20_000_000
    faults_max: Annotated[int, Meta(ge=0, le=100_000)] = 1_000


class KernelSpec(Spec, kw_only=True):
    yield_every_events: Annotated[int, Meta(ge=1, le=10_000_000)] = 2_000
    restart_delay: Duration = 1_000_000
    restarts_max: Annotated[int, Meta(ge=0, le=1_000_000)] = 1_000
    mailbox_len_max: Annotated[int, Meta(ge=1, le=100_000_000)] = 100_000


class TraceSpec(Spec, kw_only=True):
    # "full": every event is stored; "decisions": message traffic is not
    # (emulator/trace.py, MESSAGE_KINDS), every event still counts in the hash.
    level: Literal["full", "decisions"] = "full"


class InvariantsSpec(Spec, kw_only=True):
    enabled: list[Name] = []
    stop_on_violation: bool = False
    # Exception types (class names) an actor may die on without failing the run:
    # for scenarios that exercise a deliberately broken component. Still reported.
    tolerate_errors: Annotated[list[Name], Meta(max_length=64)] = []
    # Units of work (workload ids) the scenario leaves waiting on purpose (data a
    # full region's storage cannot take): liveness counts them as waiting, not stuck.
    may_wait: Annotated[list[Name], Meta(max_length=1024)] = []
    # Campaigns (`sweep`, `explore`) fail a run whose work stalled after the final
    # heal; off for a search that hunts one kind of failure only (`bench bugzoo`).
    liveness: bool = True


class Scenario(Spec, kw_only=True):
    """A whole run: world, network, actors, faults, invariants, length."""

    name: RunName
    duration: Window
    description: Annotated[str, Meta(max_length=10_000)] = ""
    seed: Annotated[int, Meta(ge=0, le=2**63 - 1)] = 1
    world: WorldSpec | None = None
    system: dict[str, Any] = {}
    network: NetworkSpec = NetworkSpec()
    kernel: KernelSpec = KernelSpec()
    actors: list[ActorSpec] = []
    faults: list[Fault] = []
    nemesis: NemesisSpec = NemesisSpec()
    invariants: InvariantsSpec = InvariantsSpec()
    trace: TraceSpec = TraceSpec()
    bugs: Annotated[list[Name], Meta(max_length=64)] = []  # seeded bugs (emulator/bugs.py)


# ---- loading -------------------------------------------------------------
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_FIELD_ERROR = re.compile(r"Object (contains unknown|missing required) field `(.*)`", re.S)


def _path_of(error: msgspec.ValidationError) -> tuple[str, str]:
    """(key path, message) of a msgspec error; an unknown or missing key is named
    in the path itself (`network.bogus`), not only in the message."""
    text = str(error)
    marker = " - at `"
    path = ""
    message = text
    if marker in text:
        # rpartition: the message may quote a key that contains the marker.
        message, _, rest = text.rpartition(marker)
        path = rest.removesuffix("`").removeprefix("$.").removeprefix("$")
    field = _FIELD_ERROR.fullmatch(message)
    if field is not None:
        # A key that is not bare in TOML is quoted, as it is written in the file.
        key = field[2] if _BARE_KEY.fullmatch(field[2]) else json.dumps(field[2])
        path = f"{path}.{key}" if path else key
        message = "unknown key" if field[1] == "contains unknown" else "missing required key"
    return path, message


# Deeper than any scenario needs; TOML and JSON parsers recurse per level.
NESTING_MAX = 64


def parse_raw(text: str, source: str) -> Any:
    """A scenario's text as plain data: JSON for a `.json` file or text that starts
    with `{` or `[`, else TOML. A UTF-8 byte-order mark is ignored."""
    text = text.removeprefix("\ufeff")
    stripped = text.lstrip()
    if source.endswith(".json") or stripped[:1] in ("{", "["):
        try:
            raw = msgspec.json.decode(text)
        except msgspec.DecodeError as error:
            raise InputError(source, "", f"not valid JSON: {error}") from None
        except RecursionError:
            raise InputError(source, "", f"nested more than {NESTING_MAX} levels deep") from None
    else:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise InputError(source, "", f"not valid TOML: {error}") from None
        except RecursionError:
            raise InputError(source, "", f"nested more than {NESTING_MAX} levels deep") from None
    path = _too_deep(raw, NESTING_MAX)
    if path is not None:
        raise InputError(source, path, f"nested more than {NESTING_MAX} levels deep")
    return raw


def _too_deep(raw: Any, levels: int, path: str = "") -> str | None:
    """The key path where `raw` nests deeper than `levels`, or None (iterative: no recursion)."""
    stack: list[tuple[Any, str, int]] = [(raw, path, 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > levels:
            return where if len(where) <= 60 else where[:60] + "…"
        if isinstance(value, dict):
            stack.extend(
                (v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in value.items()
            )
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
    return None


def decode_scenario(text: str, source: str) -> Scenario:
    """Decode and validate a scenario; raise `InputError` on any problem."""
    return convert_scenario(parse_raw(text, source), source)


def convert_scenario(raw: Any, source: str) -> Scenario:
    """Validate plain data (`parse_raw`) as a scenario; `InputError` on any problem."""
    if not isinstance(raw, dict):
        got = type(raw).__name__.replace("list", "an array").replace("str", "a string")
        raise InputError(source, "", f"a scenario is a table of keys (a JSON object), not {got}")
    name = raw.get("name")
    if isinstance(name, str) and not _RUN_NAME.fullmatch(name):
        raise InputError(
            source,
            "name",
            f"{name[:60]!r} cannot name a run database (runs/NAME-SEED.db): use letters, "
            "digits and _ . + = , @ - (not first), no folder",
        )
    try:
        scenario = msgspec.convert(raw, Scenario, dec_hook=_dec_hook, strict=True)
    except msgspec.ValidationError as error:
        path, message = _path_of(error)
        raise InputError(source, path, message) from None
    if scenario.bugs:
        load_plugins()  # the catalogue of bugs comes with the plugins
        check_bugs(scenario.bugs, source)
    if scenario.system:
        kind = scenario.system.get("kind")
        if kind is None:
            raise InputError(source, "system.kind", "missing: the system to emulate, e.g. 'mast'")
        if not isinstance(kind, str):
            raise InputError(
                source, "system.kind", f"expected the name of a system (e.g. 'mast'), got {kind!r}"
            )
        # The system contributes regions and actors: checked when the run is planned.
        return scenario
    if scenario.world is None:
        raise InputError(source, "world", "missing required key (or name a [system])")
    check_references(scenario, source)
    return scenario


def load_scenario_file(path: str | Path) -> tuple[Scenario, str]:
    """Read and validate a scenario file; returns it with its text (stored in the run)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(str(p), "", f"cannot read: {error}") from None
    return decode_scenario(text, str(p)), text


def resolve_scenario(ref: str) -> tuple[Scenario, str, str]:
    """A built-in scenario's name or a file path -> (scenario, its text, its source)."""
    from emulator.registry import builtin_scenarios

    path = Path(ref)
    if not path.is_file():
        builtin = builtin_scenarios().get(ref)
        if builtin is None:
            raise InputError(ref, "", "no such file or built-in scenario (see `mastemu list`)")
        path = builtin
    scenario, text = load_scenario_file(path)
    return scenario, text, str(path)


def scenario_json_schema() -> dict[str, Any]:
    """JSON Schema of scenario files, `[system]` and actors' `params` included.

    Every bound a value has is in it (`minimum`, `maximum`, lengths, patterns;
    a bounded duration says its minimum in its description), and each
    Struct's docstring is its description, so rules between two values are
    stated there. `system` is one of the registered systems' parameters,
    told apart by `kind`. Duration fields default to plain ints (µs) because
    msgspec cannot put an int subclass into a schema; a bare number in a
    scenario means seconds, so those defaults are converted here.
    """
    from emulator.registry import ACTOR_KINDS, SYSTEMS

    load_plugins()
    systems = {kind: system.Params for kind, system in sorted(SYSTEMS.items())}
    actors = [cls.Params for _, cls in sorted(ACTOR_KINDS.items()) if cls.Params is not None]
    (top, *refs), defs = msgspec.json.schema_components(
        [Scenario, *systems.values(), *actors],
        schema_hook=_schema_hook,
        ref_template="#/$defs/{name}",
    )
    for kind, ref in zip(systems, refs, strict=False):
        params = defs[ref["$ref"].rsplit("/", 1)[1]]
        about = f"the system to emulate: {kind!r}"
        params["properties"] = {
            "kind": {"const": kind, "description": about},
            **params["properties"],
        }
        params["required"] = ["kind", *params.get("required", [])]
    scenario = defs["Scenario"]["properties"]
    scenario["system"] = {
        "anyOf": refs[: len(systems)],
        "description": "the system to emulate (`kind`) and its parameters",
    }
    defs["ActorSpec"]["properties"]["params"] = {
        "anyOf": refs[len(systems) :] or [{"type": "object"}],
        "description": "the parameters of the actor's kind",
    }
    for struct in defs.values():
        for prop in struct.get("properties", {}).values():
            default = prop.get("default")
            doc = prop.get("description")
            if isinstance(doc, str) and doc.startswith(DURATION_DOC) and isinstance(default, int):
                prop["default"] = default // S if default % S == 0 else default / S
    return {**top, "$defs": defs}


def decode_params(params_type: type[Any], raw: dict[str, Any], source: str, path: str) -> Any:
    """Validate an actor kind's parameters, naming `actors[i].params.key` on error."""
    try:
        return msgspec.convert(raw, params_type, dec_hook=_dec_hook, strict=True)
    except msgspec.ValidationError as error:
        sub, message = _path_of(error)
        # A parameters Struct's `__post_init__` raises InputError about one of
        # its own keys; msgspec reports it at the Struct, so its path goes below.
        if isinstance(error.__cause__, InputError):
            field = error.__cause__
            sub, message = ".".join(p for p in (sub, field.path) if p), field.message
        raise InputError(source, f"{path}.{sub}" if sub else path, message) from None


# ---- references ----------------------------------------------------------
def _nodes(scenario: Scenario) -> tuple[set[str], set[str], set[str]]:
    """(regions, every topology node, hosts) without building the graph."""
    nodes: set[str] = set()
    hosts: set[str] = set()
    for node, _parent, _tier, place in iter_nodes(scenario.world.regions):
        nodes.add(node)
        if place is not None:
            hosts.add(node)
    return {r.name for r in scenario.world.regions}, nodes, hosts


def check_references(scenario: Scenario, source: str, system_addresses: Iterable[str] = ()) -> None:
    """Dangling references and cross-field rules that a type cannot express.

    `system_addresses` are the actors a system contributes (valid fault targets).
    """
    assert scenario.world is not None

    def fail(path: str, message: str) -> None:
        raise InputError(source, path, message)

    names = [r.name for r in scenario.world.regions]
    for i, name in enumerate(names):
        if "/" in name or " " in name:
            fail(f"world.regions[{i}].name", f"region name {name!r} must not contain '/' or spaces")
        if name in names[:i]:
            fail(f"world.regions[{i}].name", f"duplicate region {name!r}")
    machines = sum(
        r.datacenters * r.fault_domains * r.racks * r.machines for r in scenario.world.regions
    )
    if machines > WORLD_MACHINES_MAX:
        fail("world.regions", f"{machines:,} machines; at most {WORLD_MACHINES_MAX:,}")
    regions, nodes, hosts = _nodes(scenario)
    net = scenario.network
    if net.cross_region_ms_min > net.cross_region_ms_max:
        fail("network.cross_region_ms_min", "must not exceed network.cross_region_ms_max")
    for i, pair in enumerate(net.region_pairs):
        for key in ("a", "b"):
            if getattr(pair, key) not in regions:
                fail(f"network.region_pairs[{i}].{key}", f"unknown region {getattr(pair, key)!r}")
        if pair.a == pair.b:
            fail(f"network.region_pairs[{i}]", "a region pair needs two different regions")
    addresses: set[str] = set(system_addresses)
    roles: set[str] = set()
    for i, actor in enumerate(scenario.actors):
        if actor.address in addresses:
            fail(f"actors[{i}].address", f"duplicate actor address {actor.address!r}")
        addresses.add(actor.address)
        if actor.host not in hosts:
            fail(f"actors[{i}].host", f"unknown host {actor.host!r} (e.g. 'REGION/ctl0')")
        if isinstance(actor.params.get("role"), str):
            roles.add(actor.params["role"])
    replicated = {r for r in map(instance_role, addresses) if r is not None}
    roles |= replicated
    for i, fault in enumerate(scenario.faults):
        where = f"faults[{i}]"
        if fault.at > scenario.duration:
            fail(f"{where}.at", "fault scheduled after the end of the run")
        target = getattr(fault, "target", None)
        if target is not None:
            check_target(target, f"{where}.target", addresses, (roles, replicated), regions, fail)
        for key in ("regions", "between"):
            for j, region in enumerate(getattr(fault, key, None) or ()):
                if region not in regions:
                    fail(f"{where}.{key}[{j}]", f"unknown region {region!r}")
        pair = getattr(fault, "regions", None) or getattr(fault, "between", None)
        if pair is not None and pair[0] == pair[1]:
            fail(f"{where}", "needs two different regions")
        if isinstance(fault, PartitionFault):
            if (fault.regions is None) == (fault.hosts is None):
                fail(where, "a partition names exactly one of `regions` or `hosts`")
            for j, host in enumerate(fault.hosts or ()):
                if host not in hosts:
                    fail(f"{where}.hosts[{j}]", f"unknown host {host!r}")
            if fault.hosts is not None and fault.hosts[0] == fault.hosts[1]:
                fail(where, "needs two different hosts")
        if isinstance(fault, SlowStoreFault) and fault.latency <= 0:
            fail(f"{where}.latency", "a slow store needs a positive latency, e.g. '45s'")
        node = getattr(fault, "node", None)
        if node is not None:
            named = node_of(node)
            if node.startswith("region ") and named not in regions:
                fail(f"{where}.node", f"unknown region {named!r} (regions: {listed(regions)})")
            if named not in nodes:
                fail(f"{where}.node", f"unknown node {node!r}")
    nem = scenario.nemesis
    if nem.enabled and nem.heal_at is not None and nem.heal_at > scenario.duration:
        fail("nemesis.heal_at", "after the end of the run")
    if nem.enabled and nem.heal_at is not None and nem.heal_at < nem.start:
        fail("nemesis.heal_at", "before nemesis.start: the final heal must come after the faults")


def node_of(node: str) -> str:
    """The topology node a fault's `node` names (`region NAME` is the region `NAME`)."""
    return node.removeprefix("region ")
