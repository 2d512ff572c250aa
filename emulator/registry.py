"""Registries that the emulated system plugs into (the emulator never imports `actors`).

Actor kinds and built-in scenario folders arrive through the `mastemu.plugins`
entry point group: `actors.plugin:register` fills these tables when the CLI
or a test calls `load_plugins()`.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from pathlib import Path

from emulator.actor import Actor

ACTOR_KINDS: dict[str, type[Actor]] = {}
SCENARIO_DIRS: list[Path] = []
_loaded = False


def register_actor(cls: type[Actor]) -> type[Actor]:
    existing = ACTOR_KINDS.get(cls.kind)
    if existing is not None and existing is not cls:
        raise ValueError(f"actor kind {cls.kind!r} registered twice")
    ACTOR_KINDS[cls.kind] = cls
    return cls


def register_scenario_dir(path: Path) -> None:
    if path not in SCENARIO_DIRS:
        SCENARIO_DIRS.append(path)


def load_plugins() -> None:
    """Load every `mastemu.plugins` entry point once (falls back to `actors.plugin`)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    found = list(entry_points(group="mastemu.plugins"))
    if found:
        for ep in sorted(found, key=lambda e: e.name):
            ep.load()()
    else:
        # Running from a source tree that was never installed.
        importlib.import_module("actors.plugin").register()


def builtin_scenarios() -> dict[str, Path]:
    """Name → file of every built-in scenario."""
    load_plugins()
    found: dict[str, Path] = {}
    for folder in SCENARIO_DIRS:
        for path in sorted(folder.glob("*.toml")):
            found.setdefault(path.stem, path)
    return found
