"""Instructor checks that assume untouched stubs skip themselves, in one line, once a student has
written code into rlhf_practice/rl/ (this repository used as a student uses it)."""

from __future__ import annotations

import ast
from functools import cache

import pytest

from instructor.release import student_files
from rlhf_practice.course import GRADED, ROOT


def _graded_bodies(source: str) -> dict[str, str]:
    graded = {g.function for g in GRADED}
    return {
        node.name: ast.dump(ast.Module(body=node.body[1:], type_ignores=[]))
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name in graded
    }


@cache
def student_has_worked() -> bool:
    """True when a graded function's body in rlhf_practice/rl/ is no longer the generated stub."""
    for path, stub in student_files().items():
        try:
            mine = _graded_bodies((ROOT / path).read_text(encoding="utf-8"))
        except SyntaxError:
            return True
        if any(mine.get(name) != body for name, body in _graded_bodies(stub).items()):
            return True
    return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not student_has_worked():
        return
    skip = pytest.mark.skip(reason="rlhf_practice/rl/ holds your work; this instructor check needs the untouched stubs")
    for item in items:
        if item.get_closest_marker("untouched_stubs"):
            item.add_marker(skip)
