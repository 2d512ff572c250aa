"""The layout is the architecture: import contracts over the project's own modules.

Layers point one way (actors -> emulator -> store); the emulator knows no
emulated system and no system's tables; the run database's own modules know
nothing of MAST's tables; policies take value types only; nothing imports the
CLI; shared machinery depends on no single system; no module takes another
module's private names; no import cycle, `TYPE_CHECKING` imports included.
Each rule is shown to catch a deliberately broken tree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.support.imports import Import, cycles, graph, imports
from tests.support.paths import ROOT

# What a policy may import besides other policies: value types and constants.
POLICY_MAY_IMPORT = ("actors.policies", "store.mast.records", "emulator.units", "emulator.errors")
# The one module allowed past the size rule, and why.
LONG_MODULES = {"emulator/kernel.py": "the kernel's run loop and trampoline stay in one place"}
MODULE_LINES_MAX = 600


def broken_rules(edges: Iterable[Import]) -> list[str]:
    """Every import that breaks a layer rule, as `importer -> target: rule`."""
    found: list[str] = []

    def under(module: str, *packages: str) -> bool:
        return any(module == p or module.startswith(p + ".") for p in packages)

    for e in edges:
        where = f"{e.importer} -> {e.target}"
        if under(e.importer, "emulator") and under(e.target, "actors", "store.mast"):
            found.append(f"{where}: the emulator imports no system and no system's tables")
        run_database = under(e.importer, "store") and not under(e.importer, "store.mast")
        if run_database and under(e.target, "store.mast", "emulator", "actors"):
            found.append(f"{where}: the run database knows only itself")
        if under(e.importer, "store.mast") and under(e.target, "emulator", "actors"):
            found.append(f"{where}: MAST's tables are below the emulator")
        if under(e.importer, "actors.policies") and not under(e.target, *POLICY_MAY_IMPORT):
            found.append(f"{where}: a policy imports value types only")
        if under(e.target, "emulator.cli") and not under(e.importer, "emulator.cli"):
            found.append(f"{where}: nothing imports the CLI")
        if under(e.importer, "actors.common") and under(
            e.target, "actors.mast", "actors.cluster", "actors.demo"
        ):
            found.append(f"{where}: shared machinery depends on no single system")
        private = [n for n in e.names if n.startswith("_") and not n.startswith("__")]
        if private and e.importer != e.target:
            found.append(f"{where}: takes private names {private}")
    return found


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


EDGES = list(imports(ROOT))


def test_the_project_has_no_import_cycle() -> None:
    assert cycles(graph(EDGES)) == []


def test_every_import_keeps_the_layer_rules() -> None:
    assert broken_rules(EDGES) == []


def test_actors_holds_at_most_three_modules_the_rest_in_sub_packages() -> None:
    direct = sorted(p.name for p in (ROOT / "actors").glob("*.py"))
    assert len(direct) <= 3, direct


def test_modules_stay_small() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for package in ("emulator", "store", "actors")
        for path in (ROOT / package).rglob("*.py")
    }
    too_long = {
        name: n for name, n in sizes.items() if n > MODULE_LINES_MAX and name not in LONG_MODULES
    }
    assert too_long == {}


def test_every_document_a_file_cites_is_in_the_repository() -> None:
    # A name ending in .md, or a document named the old way without it ("DESIGN §5").
    cited = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.md|DESIGN(?= §)|KERNEL-NOTES)\b")
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    for package in ("emulator", "store", "actors", "tests", "scenarios"):
        files += (ROOT / package).rglob("*.py")
    files.remove(Path(__file__).resolve())  # its pattern names what it looks for
    missing = {
        (str(path.relative_to(ROOT)), name)
        for path in files
        for name in cited.findall(path.read_text(encoding="utf-8"))
        if not (ROOT / name).is_file()
    }
    assert missing == set()


# ---- the rules catch what they are for ---------------------------------------------------
def test_a_cycle_is_caught_even_through_a_type_checking_import(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "emulator/__init__.py": "",
            "emulator/kernel.py": "from emulator.actor import Actor\n",
            "emulator/actor.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from emulator.kernel import Kernel\n"
            ),
            "emulator/units.py": "",
        },
    )
    assert cycles(graph(imports(root, ("emulator",)))) == [["emulator.actor", "emulator.kernel"]]


@pytest.mark.parametrize(
    ("files", "rule"),
    [
        (
            {"emulator/runner.py": "import importlib\nimportlib.import_module('actors.plugin')\n"},
            "the emulator imports no system",
        ),
        ({"store/db.py": "from store.mast import queue\n"}, "the run database knows only itself"),
        (
            {"actors/policies/p.py": "def f():\n    from emulator.kernel import Kernel\n"},
            "a policy imports value types only",
        ),
        (
            {"actors/policies/p.py": "from store.mast.queue import QueueEntry\n"},
            "a policy imports value types only",
        ),
        ({"emulator/run/sweep.py": "from emulator.cli import main\n"}, "nothing imports the CLI"),
        (
            {"actors/common/cm.py": "from actors.mast.world import preset\n"},
            "shared machinery depends on no single system",
        ),
        ({"actors/mast/gms.py": "from actors.mast.rms import _State\n"}, "takes private names"),
    ],
)
def test_a_deliberately_broken_import_is_named(
    tmp_path: Path, files: dict[str, str], rule: str
) -> None:
    skeleton = {
        f"{p}/__init__.py": ""
        for p in (
            "emulator",
            "emulator/run",
            "emulator/cli",
            "store",
            "store/mast",
            "actors",
            "actors/policies",
            "actors/common",
            "actors/mast",
        )
    }
    modules = {
        "emulator/kernel.py": "",
        "emulator/cli/main.py": "",
        "store/mast/queue.py": "",
        "actors/plugin.py": "",
        "actors/mast/world.py": "",
        "actors/mast/rms.py": "",
    }
    root = _tree(tmp_path, {**skeleton, **modules, **files})
    found = broken_rules(imports(root))
    assert len(found) == 1 and rule in found[0], found
