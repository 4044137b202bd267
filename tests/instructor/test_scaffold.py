"""Instructor checks (not graded): the student files are stubs of the answer key and nothing else.

These run in every mode, whatever --impl says: they check the files on disk, not an implementation.
They are not part of the student release.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from instructor.release import student_files
from rlhf_practice import PACKAGE_DIR
from rlhf_practice.course import GRADED, graded, load_impl, probe_args

ROOT = PACKAGE_DIR.parent
PAIRS = {g.module: (g.student_file, g.answer_file) for g in GRADED}


def _parse(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"))


def _without_graded_bodies(tree: ast.Module, graded: set[str]) -> str:
    """The module as AST text, with each graded function's body reduced to its docstring."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in graded:
            node.body = node.body[:1]
    return ast.dump(tree, include_attributes=False)


@pytest.mark.parametrize("module", sorted(PAIRS))
@pytest.mark.untouched_stubs
def test_student_file_matches_answer_outside_graded_bodies(module: str) -> None:
    student, answer = PAIRS[module]
    functions = set(graded(module))
    assert _without_graded_bodies(_parse(student), functions) == _without_graded_bodies(_parse(answer), functions), (
        f"{student} and {answer} differ outside the bodies of {sorted(functions)}. Edit the answer key and run "
        "python -m instructor stubs (instructor only: it rewrites the student files)."
    )


@pytest.mark.parametrize("module", sorted(PAIRS))
def test_student_files_hold_only_graded_functions(module: str) -> None:
    """Everything a student file defines is theirs to write: the code that uses it lives with the loops."""
    for path in PAIRS[module]:
        defined = {n.name for n in _parse(path).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        extra = defined - set(graded(module))
        assert not extra, (
            f"{path} defines {sorted(extra)}, which are not graded; move them next to the loop that uses them"
        )


@pytest.mark.parametrize("module", sorted(PAIRS))
def test_graded_functions_have_docstrings_and_exist_in_both(module: str) -> None:
    for path in PAIRS[module]:
        functions = {n.name: n for n in _parse(path).body if isinstance(n, ast.FunctionDef)}
        for name in graded(module):
            assert name in functions, f"{path} lacks {name}"
            assert ast.get_docstring(functions[name]), f"{path}: {name} has no docstring"


@pytest.mark.untouched_stubs
def test_student_stubs_raise_not_implemented_citing_tasks() -> None:
    student = load_impl("student")
    for g in GRADED:
        with pytest.raises(NotImplementedError, match=rf"{g.function}.*TASKS\.md {g.section}"):
            getattr(student.module(g.module), g.function)(*probe_args(g))


@pytest.mark.untouched_stubs
def test_student_files_are_what_the_generator_writes() -> None:
    for student, expected in student_files().items():
        assert (ROOT / student).read_text(encoding="utf-8") == expected, (
            f"{student} is out of date; the instructor runs python -m instructor stubs (it rewrites the student files)"
        )


def test_package_never_imports_answer() -> None:
    offenders = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(n == "answer" or n.startswith("answer.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"rlhf_practice/ must reach the answer key only through load_impl: {offenders}"


def test_importing_the_package_loads_no_answer_module() -> None:
    code = (
        "import sys, rlhf_practice.rl.ppo, rlhf_practice.rl.grpo, rlhf_practice.training;"
        "bad = [m for m in sys.modules if 'answer' in m]; print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_load_impl_answer_and_folder(tmp_path: Path) -> None:
    answer = load_impl("answer")
    assert answer.ppo.compute_advantages is not load_impl("student").ppo.compute_advantages
    (tmp_path / "ppo.py").write_text((ROOT / "answer/ppo_answer.py").read_text())
    (tmp_path / "grpo.py").write_text((ROOT / "answer/grpo_answer.py").read_text())
    folder = load_impl(str(tmp_path))
    out = folder.grpo.compute_group_advantages(torch.tensor([1.0, 3.0]), 2)
    assert torch.allclose(out, torch.tensor([-1.0, 1.0]) / (2**0.5 + 1e-8))
