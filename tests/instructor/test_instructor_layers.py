"""The instructor wing's imports form layers: no module of instructor/ imports itself in a circle (imports
inside functions count: they make a dependency too), and the programs that run in a grading child import
nothing of the wing, which the child's tree does not hold."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from instructor.children import PROGRAMS
from rlhf_practice.course import ROOT

WING = ROOT / "instructor"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (both make a dependency)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path.relative_to(ROOT)}: a relative import; name the module")
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _graph() -> dict[str, set[str]]:
    files = {("instructor" if p.stem == "__init__" else f"instructor.{p.stem}"): p for p in WING.glob("*.py")}
    return {name: {m for m in _imports(path) if m in files and m != name} for name, path in files.items()}


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """An import circle of ``graph`` ({module: the modules it imports}), or None."""
    done, path = set(), []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        path.append(name)
        for dep in sorted(graph[name]):
            if circle := visit(dep):
                return circle
        path.pop()
        done.add(name)
        return None

    return next((c for name in sorted(graph) if (c := visit(name))), None)


def test_no_instructor_module_imports_in_a_circle() -> None:
    circle = _circle(_graph())
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_a_circle_through_a_function_level_import_is_found() -> None:
    """The check itself: a module that imports another inside a function, which imports it back at the top."""
    source = "def f():\n    from instructor.b import g\n"
    tree = {"instructor.a": {"instructor.b"}, "instructor.b": {"instructor.a"}}
    assert "instructor.b" in {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)}
    assert _circle(tree) == ["instructor.a", "instructor.b", "instructor.a"]


def test_the_child_programs_import_only_the_standard_library_torch_and_the_package() -> None:
    """They run from a grading tree (instructor.children), where no module of the wing is: the sandbox setup
    before the new root, with the standard library alone (-S)."""
    for name in PROGRAMS:
        outside = {
            m
            for m in _imports(WING / name)
            if m.split(".")[0] not in (*sys.stdlib_module_names, "torch", "rlhf_practice")
        }
        assert not outside, f"instructor/{name} imports {sorted(outside)}: a grading child cannot"
    outside = {m for m in _imports(WING / "sandbox_setup.py") if m.split(".")[0] not in sys.stdlib_module_names}
    assert not outside, f"instructor/sandbox_setup.py imports {sorted(outside)}: it runs with python -I -S"
