"""Bad scenario files: exit code 2, one line naming the file and the key path,
never a traceback, and no run database left behind.

The table mutates `leader-lease.toml` one way per row; the property tests feed
random documents and random mutations of the same scenario to the validator,
which must answer with a Scenario or a `InputError`, nothing else.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.demo.lease import CandidateParams, ClientParams
from emulator.cli import main as cli
from emulator.errors import InputError
from emulator.net import specs
from emulator.registry import builtin_scenarios
from emulator.run import scenario
from emulator.run.runner import RunPlan, plan_run
from emulator.run.scenario import Scenario, convert_scenario
from tests.support.examples import examples

LEASE_PATH = builtin_scenarios()["leader-lease"]
LEASE_TEXT = LEASE_PATH.read_text(encoding="utf-8")
LEASE_RAW = tomllib.loads(LEASE_TEXT)


def mastemu() -> list[str]:
    """The installed `mastemu` script of this interpreter, else `python -m`."""
    script = Path(sys.executable).with_name("mastemu")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "emulator.cli.main"]


def edit(old: str, new: str, count: int = 1) -> str:
    """leader-lease.toml with `old` replaced by `new` (which must be there)."""
    assert old in LEASE_TEXT, f"leader-lease.toml no longer contains {old!r}"
    return LEASE_TEXT.replace(old, new, count)


def run_file(capsys: pytest.CaptureFixture[str], path: Path, tmp_path: Path) -> tuple[int, str]:
    out = tmp_path / "run.db"
    code = cli.main(["run", str(path), "--until", "1s", "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert not out.exists(), "bad input must not leave a run database behind"
    assert "Traceback" not in captured.err
    return code, captured.err


REGION_EU = '{ name = "eu-west", machines = 0, racks = 1, fault_domains = 1 }'
PAIR_US_EU = '{ a = "us-east", b = "eu-west", latency_ms = 80 }'

# (id, scenario text, key path, a fragment of the message)
BAD_FILES = [
    ("unknown-key-top", edit("seed = 1\n", "seed = 1\nbogus = 3\n"), "bogus", "unknown key"),
    (
        "unknown-key-nested",
        edit("jitter_fraction = 0.5", "jitter_fraction = 0.5\nbogus = 1"),
        "network.bogus",
        "unknown key",
    ),
    (
        "unknown-key-in-fault",
        edit('at = "3h"', 'at = "3h"\ncolour = "red"'),
        "faults[1].colour",
        "unknown key",
    ),
    (
        "unknown-key-in-params",
        edit('lease_ttl = "10s"', 'lease_tll = "10s"'),
        "actors[0].params.lease_tll",
        "unknown key",
    ),
    ("missing-key", edit('host = "eu-west/ctl0"\n', ""), "actors[1].host", "missing required key"),
    ("wrong-type", edit("seed = 1\n", 'seed = "one"\n'), "seed", "Expected `int`, got `str`"),
    (
        "wrong-type-nested",
        edit(REGION_EU, '{ name = "eu-west", racks = "many" }'),
        "world.regions[1].racks",
        "Expected `int`, got `str`",
    ),
    (
        "section-of-wrong-type",
        edit("[invariants]\n", "[invariants]\nstop_on_violation = 1\n"),
        "invariants.stop_on_violation",
        "Expected `bool`",
    ),
    (
        "negative-latency",
        edit("latency_ms = 80", "latency_ms = -80"),
        "network.region_pairs[0].latency_ms",
        "> 0.0",
    ),
    (
        "negative-run-duration",
        edit('duration = "6h"', 'duration = "-6h"'),
        "duration",
        "must not be negative",
    ),
    (
        "negative-fault-duration",
        edit('duration = "30m"', 'duration = "-30m"'),
        "faults[1].duration",
        "must not be negative",
    ),
    (
        "unparseable-duration",
        edit('duration = "6h"', 'duration = "6 hours"'),
        "duration",
        "cannot read duration '6 hours'",
    ),
    (
        "unparseable-fault-time",
        edit('at = "3h"', 'at = "3 o\'clock"'),
        "faults[1].at",
        "cannot read duration",
    ),
    ("boolean-duration", edit('duration = "6h"', "duration = true"), "duration", "expected a"),
    ("infinite-duration", edit('duration = "6h"', "duration = inf"), "duration", "finite"),
    ("huge-duration", edit('duration = "6h"', "duration = 1.7e308"), "duration", "too large"),
    (
        "huge-duration-string",
        edit('duration = "6h"', f'duration = "{"9" * 400}h"'),
        "duration",
        "too large",
    ),
    (
        "fault-after-the-end",
        edit('at = "5h"', 'at = "7h"'),
        "faults[2].at",
        "after the end of the run",
    ),
    (
        "actor-host-not-in-world",
        edit('host = "us-east/ctl0"', 'host = "mars/ctl0"'),
        "actors[0].host",
        "unknown host 'mars/ctl0'",
    ),
    (
        "fault-target-unknown",
        edit('target = "leader of demo/leader"\nrestart_after', 'target = "nobody"\nrestart_after'),
        "faults[0].target",
        "unknown actor 'nobody'",
    ),
    (
        "partition-region-unknown",
        edit('regions = ["us-east", "eu-west"]', 'regions = ["us-east", "moon"]'),
        "faults[1].regions[1]",
        "unknown region 'moon'",
    ),
    (
        "partition-of-one-region",
        edit('regions = ["us-east", "eu-west"]', 'regions = ["us-east", "us-east"]'),
        "faults[1]",
        "two different regions",
    ),
    (
        "partition-of-regions-and-hosts",
        edit(
            'duration = "30m"',
            'duration = "30m"\nhosts = ["us-east/ctl0", "eu-west/ctl0"]',
        ),
        "faults[1]",
        "exactly one of `regions` or `hosts`",
    ),
    (
        "partition-host-unknown",
        edit('regions = ["us-east", "eu-west"]', 'hosts = ["us-east/ctl0", "venus/ctl0"]'),
        "faults[1].hosts[1]",
        "unknown host 'venus/ctl0'",
    ),
    (
        "region-pair-region-unknown",
        edit(PAIR_US_EU, '{ a = "pluto", b = "eu-west", latency_ms = 80 }'),
        "network.region_pairs[0].a",
        "unknown region 'pluto'",
    ),
    (
        "duplicate-actor-address",
        edit('address = "demo/eu-west"', 'address = "demo/us-east"'),
        "actors[1].address",
        "duplicate actor address 'demo/us-east'",
    ),
    (
        "duplicate-region",
        edit(REGION_EU, '{ name = "us-east" }'),
        "world.regions[1].name",
        "duplicate region 'us-east'",
    ),
    (
        "world-too-large",
        edit(REGION_EU, '{ name = "eu-west", racks = 10000, machines = 10000 }'),
        "world.regions",
        "at most 1,000,000",
    ),
    (
        "cross-region-latency-range-inverted",
        edit("jitter_fraction = 0.5", "jitter_fraction = 0.5\ncross_region_ms_min = 500"),
        "network.cross_region_ms_min",
        "must not exceed",
    ),
    (
        "unknown-actor-kind",
        edit('kind = "lease-client"', 'kind = "lease-cleint"'),
        "actors[2].kind",
        "unknown kind 'lease-cleint' (",  # then the known kinds
    ),
    (
        "unknown-invariant",
        edit('enabled = ["lease-safety"]', 'enabled = ["lease-safety", "lease-safty"]'),
        "invariants.enabled[1]",
        "unknown invariant 'lease-safty'",
    ),
    (
        "bad-actor-param-value",
        edit('lease_ttl = "10s"', 'lease_ttl = "ten"'),
        "actors[0].params.lease_ttl",
        "cannot read duration 'ten'",
    ),
    (
        "bad-actor-param-type",
        edit('peers = ["demo/eu-west"]', 'peers = "demo/eu-west"'),
        "actors[0].params.peers",
        "Expected `array`, got `str`",
    ),
    (
        "missing-actor-param",
        edit('role = "demo/leader", every', "every"),
        "actors[2].params.role",
        "missing required key",
    ),
    (
        "unknown-fault-action",
        edit('action = "pause"', 'action = "freeze"'),
        "faults[2].action",
        "Invalid value 'freeze'",
    ),
]


@pytest.mark.parametrize(
    ("text", "key_path", "fragment"),
    [pytest.param(text, key, frag, id=case) for case, text, key, frag in BAD_FILES],
)
def test_scenario_bad_file_exits_2_naming_file_and_key_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, key_path: str, fragment: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    code, err = run_file(capsys, path, tmp_path)
    assert code == 2
    assert err.startswith(f"error: {path}: {key_path}: "), err
    assert fragment in err
    assert err.count("\n") == 1


def test_scenario_invalid_toml_names_the_file_and_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "broken.toml"
    path.write_text(LEASE_TEXT + "\n[[[oops\n", encoding="utf-8")
    code, err = run_file(capsys, path, tmp_path)
    assert code == 2
    assert err.startswith(f"error: {path}: not valid TOML: ")
    lines = len(LEASE_TEXT.splitlines())
    assert f"line {lines + 2}" in err


def test_scenario_file_that_is_not_utf8_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\xff\xfe\x00name = 1")
    code, err = run_file(capsys, path, tmp_path)
    assert code == 2
    assert err.startswith(f"error: {path}: cannot read: ")


@pytest.mark.parametrize("ref", ["no-such-scenario", "missing/dir/file.toml"])
def test_scenario_missing_file_or_unknown_builtin_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, ref: str
) -> None:
    code = cli.main(["run", ref, "--out", str(tmp_path / "run.db")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"error: {ref}: no such file or built-in scenario (see `mastemu list`)\n"
    assert not (tmp_path / "run.db").exists()


def test_scenario_bad_files_exit_2_without_traceback_in_a_real_process(tmp_path: Path) -> None:
    """The same guarantee end to end: the installed command, its own process."""
    cases = {
        "nested-unknown-key": (BAD_FILES[1][1], "network.bogus: unknown key"),
        "bad-params": (BAD_FILES[-4][1], "actors[0].params.lease_ttl: cannot read"),
        "invalid-toml": ("name = \n", "not valid TOML"),
        "huge-duration": (BAD_FILES[15][1], "duration: duration 1.7e+308 is too large"),
    }
    procs = {}
    for name, (text, _) in cases.items():
        path = tmp_path / f"{name}.toml"
        path.write_text(text, encoding="utf-8")
        procs[name] = subprocess.Popen(
            [*mastemu(), "run", str(path), "--out", str(tmp_path / f"{name}.db")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, (name, err)
        assert "Traceback" not in err
        assert err.startswith(f"error: {tmp_path / name}.toml: "), err
        assert cases[name][1] in err
        assert not (tmp_path / f"{name}.db").exists()


def test_scenario_leader_lease_itself_is_valid() -> None:
    loaded = convert_scenario(copy.deepcopy(LEASE_RAW), "x.toml")
    assert loaded.name == "leader-lease"
    plan = plan_run(loaded, LEASE_TEXT, "x.toml")
    assert [a for a, *_ in plan.actors] == ["demo/us-east", "demo/eu-west", "client/ap-south"]
    assert plan.roles == ["demo/leader"]


# ---- property tests --------------------------------------------------------------
def _struct_fields() -> set[str]:
    names = {"action"}
    for module in (scenario, specs):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, msgspec.Struct):
                names.update(f.name for f in msgspec.structs.fields(value))
    for params in (CandidateParams, ClientParams):
        names.update(f.name for f in msgspec.structs.fields(params))
    return names


KNOWN_KEYS = sorted(_struct_fields())
INTERESTING_STRINGS = [
    "",
    "0",
    "1h",
    "-1h",
    "90s",
    "1h30m",
    "250ms",
    "-0s",
    "1e3s",
    "9" * 400 + "h",
    "leader of demo/leader",
    "leader of nobody",
    "demo/us-east",
    "us-east",
    "us-east/ctl0",
    "us-east/dc0/fd0",
    "crash",
    "pause",
    "partition",
    "loss",
    "heal",
    "down",
    "lease-candidate",
    "lease-client",
    "lease-safety",
    "a b",
    "x/y",
]
SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-3, max_value=70),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(INTERESTING_STRINGS),
    st.datetimes(),
    st.dates(),
    st.times(),
)
KEYS = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(min_size=1, max_size=10))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=5)),
    max_leaves=25,
)


def validate(raw: Any) -> Scenario | InputError:
    """The whole validation a run performs: decode, then resolve kinds and params."""
    try:
        loaded = convert_scenario(raw, "x.toml")
        assert isinstance(loaded, Scenario)
        assert isinstance(plan_run(loaded, "", "x.toml"), RunPlan)
        return loaded
    except InputError as error:
        assert error.source == "x.toml"
        assert str(error).startswith("x.toml: ")
        assert "\n" not in str(error)  # one line at the command line
        return error


@settings(max_examples=examples(150), deadline=None)
@given(raw=st.one_of(st.dictionaries(KEYS, VALUES, max_size=10), VALUES))
def test_scenario_random_documents_give_a_scenario_or_a_scenario_error(raw: Any) -> None:
    validate(raw)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _paths(value, (*prefix, i))


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


MUTATIONS = ["delete", "replace", "insert", "rename"]


@st.composite
def mutated_lease(
    draw: st.DrawFn,
    values: st.SearchStrategy[Any] = VALUES,
    keys: st.SearchStrategy[str] = KEYS,
) -> dict[str, Any]:
    """leader-lease with 1-4 random edits: keys deleted, values replaced by
    others of any type, unknown keys inserted, keys renamed."""
    doc = copy.deepcopy(LEASE_RAW)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(MUTATIONS))
        if op == "insert":
            dicts = [p for p in _paths(doc) if isinstance(_at(doc, p), dict)]
            target = _at(doc, draw(st.sampled_from(dicts)))
            target[draw(keys)] = draw(values)
            continue
        paths = list(_paths(doc))[1:]
        if not paths:
            continue
        path = draw(st.sampled_from(paths))
        parent, key = _at(doc, path[:-1]), path[-1]
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(values)
        elif isinstance(parent, dict):  # rename
            parent[draw(keys)] = parent.pop(key)
    return doc


@settings(max_examples=examples(200), deadline=None)
@given(raw=mutated_lease())
def test_scenario_mutated_leader_lease_gives_a_scenario_or_a_scenario_error(
    raw: dict[str, Any],
) -> None:
    validate(raw)


SAFE_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=12)


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


@settings(max_examples=examples(100), deadline=None)
@given(data=st.data())
def test_scenario_an_inserted_unknown_key_is_named_by_its_full_path(data: st.DataObject) -> None:
    doc = copy.deepcopy(LEASE_RAW)
    dicts = [p for p in _paths(doc) if isinstance(_at(doc, p), dict)]
    where = data.draw(st.sampled_from(dicts))
    key = data.draw(SAFE_KEYS.filter(lambda k: k not in KNOWN_KEYS))
    _at(doc, where)[key] = data.draw(VALUES)
    outcome = validate(doc)
    assert isinstance(outcome, InputError)
    assert outcome.path == _dotted((*where, key))
    assert outcome.message == "unknown key"


# ---- the same at the command line --------------------------------------------------
def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    items = (f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items())
    return "{ " + ", ".join(items) + " }"


def to_toml(doc: dict[str, Any]) -> str:
    """A TOML document (inline tables only) for the values used here."""
    return "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in doc.items())


PLAIN_SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(alphabet="abc xyz/-019:.", max_size=12),
    st.sampled_from(INTERESTING_STRINGS),
)
PLAIN_VALUES = st.recursive(
    PLAIN_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(SAFE_KEYS, inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=examples(20), deadline=None)
@given(
    raw=mutated_lease(PLAIN_VALUES, st.one_of(st.sampled_from(KNOWN_KEYS), SAFE_KEYS)),
    key=SAFE_KEYS.filter(lambda k: k not in KNOWN_KEYS),
)
def test_scenario_mutated_file_at_the_command_line_exits_2(raw: dict[str, Any], key: str) -> None:
    raw[key] = 1  # an unknown top-level key: the file is certainly bad
    text = to_toml(raw)
    assert tomllib.loads(text) == raw
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mutated.toml"
        path.write_text(text, encoding="utf-8")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(["run", str(path), "--until", "1s", "--out", f"{tmp}/run.db"])
        assert code == 2
        assert err.getvalue().startswith(f"error: {path}: ")
        assert "Traceback" not in err.getvalue()
        assert not Path(f"{tmp}/run.db").exists()
