"""Setting a scenario's keys by dotted path: `run --set system.load=3`, `mastemu.run(..., **o)`.

A path names tables by key and array items by index (`faults[2].at`);
missing tables on the way are made, missing array items are an error. On
the command line the value is a TOML value (`3`, `"fifo"`, `[1, 2]`,
`{ a = 1 }`); text that is not one is taken as a string, so `--set
system.policy=fifo` works too. `render` writes a value back in that form,
for the reproduce command of a run made with overrides.
"""

from __future__ import annotations

import itertools
import json
import re
import tomllib
from collections.abc import Mapping
from typing import Any

from emulator.errors import InputError

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
KEY_MAX = 400  # characters in a key path: a sane bound for user input


def set_path(raw: dict[str, Any], path: str, value: Any, source: str = "overrides") -> None:
    """Set `raw` at dotted `path` (`a.b[2].c`), creating tables on the way."""
    if len(path) > KEY_MAX:
        raise InputError(source, path[:40] + "…", f"a key path has at most {KEY_MAX} characters")
    steps: list[str | int] = [name if name else int(index) for name, index in _STEP.findall(path)]
    if not steps or "".join(str(s) for s in steps) != re.sub(r"[.\[\]]", "", path):
        raise InputError(source, path, "not a key path (a.b[2].c)")
    node: Any = raw
    for step, nxt in itertools.pairwise(steps):
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                raise InputError(source, path, f"no item {step} there")
            node = node[step]
        else:
            if not isinstance(node, dict):
                raise InputError(source, path, f"{step!r} is not under a table")
            node = node.setdefault(step, [] if isinstance(nxt, int) else {})
    last = steps[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise InputError(source, path, f"no item {last} there")
        node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise InputError(source, path, f"{last!r} is not under a table")


def parse_assignment(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` from the command line: the value as TOML, else as a plain string."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError("--set", text, "expected KEY=VALUE (system.load=3)")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value


def render(value: Any) -> str:
    """`value` as a TOML value that `parse_assignment` reads back equal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(render(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (
            f"{k if _BARE_KEY.match(str(k)) else json.dumps(str(k))} = {render(v)}"
            for k, v in value.items()
        )
        return "{ " + ", ".join(items) + " }"
    return json.dumps(str(value))
