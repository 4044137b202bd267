"""The instructor wing's imports form layers: no module of instructor/ imports itself in a circle (imports
inside functions count: they make a dependency too), and the programs that run in a grading child import
nothing of the wing, which the child's tree does not hold."""

from __future__ import annotations

import ast
import sys

from _imports import circle, graph, imports, relative_imports

from instructor.children import PROGRAMS
from rlhf_practice.course import ROOT

WING = ROOT / "instructor"


def test_no_instructor_module_imports_in_a_circle() -> None:
    found = circle(graph(WING))
    assert found is None, "import circle: " + " -> ".join(found or [])
    relative = [p.relative_to(ROOT) for p in WING.rglob("*.py") if relative_imports(p)]
    assert not relative, f"{relative}: a relative import; name the module"


def test_a_circle_through_a_function_level_import_is_found() -> None:
    """The check itself: a module that imports another inside a function, which imports it back at the top."""
    source = "def f():\n    from instructor.b import g\n"
    tree = {"instructor.a": {"instructor.b"}, "instructor.b": {"instructor.a"}}
    assert "instructor.b" in {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)}
    assert circle(tree) == ["instructor.a", "instructor.b", "instructor.a"]


def test_the_child_programs_import_only_the_standard_library_torch_and_the_package() -> None:
    """They run from a grading tree (instructor.children), where no module of the wing is but the programs
    themselves, each a plain module beside the package (the judge draws gate/best_of_n's pool with gate_child's
    function): the sandbox setup before the new root, with the standard library alone (-S)."""
    programs = [name.removesuffix(".py") for name in PROGRAMS]
    for name in PROGRAMS:
        outside = {
            m
            for m in imports(WING / name)
            if m.split(".")[0] not in (*sys.stdlib_module_names, "torch", "rlhf_practice", *programs)
        }
        assert not outside, f"instructor/{name} imports {sorted(outside)}: a grading child cannot"
    outside = {m for m in imports(WING / "sandbox_setup.py") if m.split(".")[0] not in sys.stdlib_module_names}
    assert not outside, f"instructor/sandbox_setup.py imports {sorted(outside)}: it runs with python -I -S"
