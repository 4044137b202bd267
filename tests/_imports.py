"""The import graph of a folder of modules, for the layering tests (tests/test_layers.py for the package; the
instructor's copy checks its own wing with it too)."""

from __future__ import annotations

import ast
from pathlib import Path

from rlhf_practice import PACKAGE_DIR

ROOT = PACKAGE_DIR.parent


def module_name(path: Path) -> str:
    """The dotted name of the module at ``path`` (a file of this repository)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports by its full name, at the top or inside a function (both make a dependency)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def relative_imports(path: Path) -> bool:
    """Whether ``path`` imports anything relative to its own package (``from . import x``)."""
    return any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def graph(folder: Path) -> dict[str, set[str]]:
    """{module of ``folder``: the modules of ``folder`` it imports}."""
    files = {module_name(p): p for p in folder.rglob("*.py")}
    return {name: {m for m in imports(path) if m in files and m != name} for name, path in files.items()}


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """An import circle of ``graph`` ({module: the modules it imports}), or None."""
    done, path = set(), []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        path.append(name)
        for dep in sorted(graph[name]):
            if found := visit(dep):
                return found
        path.pop()
        done.add(name)
        return None

    return next((c for name in sorted(graph) if (c := visit(name))), None)
