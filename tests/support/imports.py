"""The import graph of the project's own modules, read from the source with `ast`.

Every import counts, including those under `if TYPE_CHECKING:` and inside
functions, and `importlib.import_module("literal")`: a layer rule broken
only for type checkers or only at call time is still broken. The layout
tests (`tests/unit/test_layout.py`) state the rules over this graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("emulator", "store", "actors")


@dataclass(frozen=True)
class Import:
    """`importer` imports `target` (a project module) at `line`; `names` are what it takes."""

    importer: str
    target: str
    line: int
    names: tuple[str, ...]


def modules(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `packages` under `root`."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of dotted `name` that is a project module."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path, packages: Iterable[str] = PACKAGES) -> Iterator[Import]:
    """Every import of a project module by a project module."""
    known = modules(root, packages)
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            yield from _imports_of(node, name, is_package, known)


def _imports_of(
    node: ast.AST, importer: str, is_package: bool, known: dict[str, Path]
) -> Iterator[Import]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _resolve(alias.name, known)
            if target is not None:
                yield Import(importer, target, node.lineno, ())
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = importer if is_package else importer.rpartition(".")[0]
            parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        for alias in node.names:
            # `from pkg import module` imports the module itself.
            target = _resolve(f"{base}.{alias.name}", known) or _resolve(base, known)
            if target is not None:
                yield Import(importer, target, node.lineno, (alias.name,))
    elif (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        target = _resolve(node.args[0].value, known)
        if target is not None:
            yield Import(importer, target, node.lineno, ())


def graph(edges: Iterable[Import]) -> dict[str, set[str]]:
    """Importer -> the modules it imports (a package importing its own modules is left out)."""
    out: dict[str, set[str]] = {}
    for edge in edges:
        if edge.target == edge.importer or edge.target.startswith(edge.importer + "."):
            continue
        out.setdefault(edge.importer, set()).add(edge.target)
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    nodes = sorted(set(g) | {t for ts in g.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(g.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(g.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
