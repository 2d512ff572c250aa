"""Hypothesis strategies that break inputs the way a careless or adversarial user does.

`mutated_scenario` takes a scenario as a dict and changes one thing in it:
a key removed, renamed or added, a value replaced by one of another type,
scaled to zero, negative or huge, wrapped in a list or table, or nested 500
deep; or it breaks the file's text (a byte-order mark, a top-level array,
the text cut short). `damage` breaks a run database: cut short, a page
overwritten, its WAL deleted. The fuzz tests (`tests/system/test_fuzz_inputs.py`)
assert that every command answers either with a clean run or with exit 2
naming the file, never a traceback or a hang.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

Path_ = tuple[str | int, ...]

# Values a user might type anywhere: the wrong type, a boundary, a unit slip.
ODD_VALUES = st.one_of(
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**6, 10**12, -(10**9), 0.0, -0.5, 1.5, 5.0, 1e300]),
    st.integers(min_value=-(10**7), max_value=10**7),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["0s", "1us", "-5m", "30", "1e400s", "999999999999h", "1h", "", "mars"]),
    st.sampled_from(["TPU", "A100", "../../escaped", "a/b", "\x00", "é" * 3, "x" * 300]),
    st.text(max_size=6),
    st.booleans(),
    st.none(),
    st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
    st.dictionaries(st.sampled_from(["x", "kind", "name", ""]), st.integers(), max_size=2),
)

NESTING_DEPTH = 500


def nodes(obj: Any, path: Path_ = ()) -> Iterator[Path_]:
    """Every key path below `obj` (dict keys and list indices), depth first."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield (*path, key)
            yield from nodes(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield (*path, i)
            yield from nodes(value, (*path, i))


def _parent(obj: Any, path: Path_) -> Any:
    for step in path[:-1]:
        obj = obj[step]
    return obj


def _nested(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = {"x": value}
    return value


@st.composite
def mutated_scenario(draw: st.DrawFn, raw: dict[str, Any]) -> tuple[str, str]:
    """(what was done, the file's text as JSON): one change to `raw`."""
    kind = draw(
        st.sampled_from(
            [
                "replace",
                "replace",
                "replace",
                "scale",
                "scale",
                "delete",
                "rename",
                "add",
                "wrap",
                "nest",
                "bom",
                "array",
                "truncate",
            ]
        )
    )
    obj = copy.deepcopy(raw)
    paths = list(nodes(obj))
    if kind in ("bom", "array", "truncate"):
        text = json.dumps(obj)
        if kind == "bom":
            return kind, "\ufeff" + text
        if kind == "array":
            return kind, json.dumps([obj])
        cut = draw(st.integers(min_value=0, max_value=len(text) - 1))
        return f"truncate at {cut}", text[:cut]
    path = draw(st.sampled_from(paths))
    parent = _parent(obj, path)
    key = path[-1]
    where = ".".join(map(str, path))
    if kind == "replace":
        value = draw(ODD_VALUES)
        parent[key] = value
        what = f"{where} = {value!r}"
    elif kind == "scale":
        old = parent[key]
        if isinstance(old, bool) or not isinstance(old, int | float | str):
            value = draw(ODD_VALUES)
        elif isinstance(old, str):
            value = draw(st.sampled_from(["0s", "1us", "-1s", "100000d", "1ms", old * 2]))
        else:
            value = old * draw(st.sampled_from([0, -1, 1000, 10**6, 0.001, 1.5]))
        parent[key] = value
        what = f"{where}: {old!r} -> {value!r}"
    elif kind == "delete":
        del parent[key]
        what = f"{where} deleted"
    elif kind == "rename" and isinstance(parent, dict):
        new = draw(st.sampled_from([f"{key}_", str(key).upper(), str(key)[:-1] or "k", ""]))
        parent[new] = parent.pop(key)
        what = f"{where} renamed {new!r}"
    elif kind == "add" and isinstance(parent[key], dict):
        parent[key]["unknown_key"] = draw(ODD_VALUES)
        what = f"{where}.unknown_key added"
    elif kind == "wrap":
        parent[key] = draw(st.sampled_from([[parent[key]], {"x": parent[key]}]))
        what = f"{where} wrapped"
    elif kind == "nest":
        parent[key] = _nested(parent[key], NESTING_DEPTH)
        what = f"{where} nested {NESTING_DEPTH} deep"
    else:  # rename of a list item, add below a non-table: replace instead
        parent[key] = draw(ODD_VALUES)
        what = f"{where} = {parent[key]!r}"
    # NaN and infinities as JSON's non-standard tokens: the parser must refuse them cleanly.
    return what, json.dumps(obj, allow_nan=True)


# ---- run databases -----------------------------------------------------------------------------
DAMAGE_KINDS = ("truncate", "overwrite-page", "zero-page", "delete-wal")
PAGE_BYTES = 4096


@st.composite
def damage_plan(draw: st.DrawFn, size: int) -> tuple[str, int, int]:
    """(kind, offset or page, random seed for the bytes) of one damage to a `size`-byte file."""
    kind = draw(st.sampled_from(DAMAGE_KINDS))
    pages = max(1, size // PAGE_BYTES)
    if kind == "truncate":
        return kind, draw(st.integers(min_value=0, max_value=size - 1)), 0
    return kind, draw(st.integers(min_value=0, max_value=pages - 1)), draw(st.integers(0, 2**32))


def damage(db: Path, plan: tuple[str, int, int]) -> str:
    """Apply `damage_plan`'s damage to `db` (and its WAL); say what was done."""
    kind, where, seed = plan
    if kind == "truncate":
        with open(db, "r+b") as file:
            file.truncate(where)
        return f"truncated to {where} bytes"
    if kind == "delete-wal":
        wal = Path(f"{db}-wal")
        wal.unlink(missing_ok=True)
        return "WAL deleted"
    # Seeded bytes, so a failing case reproduces from what hypothesis prints.
    data = bytes(PAGE_BYTES) if kind == "zero-page" else random.Random(seed).randbytes(PAGE_BYTES)
    with open(db, "r+b") as file:
        file.seek(where * PAGE_BYTES)
        file.write(data)
    return f"page {where} {'zeroed' if kind == 'zero-page' else 'overwritten'}"
