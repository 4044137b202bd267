"""Instructor only: the student release, and the stubs it carries.

    python -m instructor release OUT

writes the student repository to OUT: every tracked file except the answer key and the instructor
tools (:data:`INSTRUCTOR_ONLY`), the student files as freshly generated stubs, the recorded cases
under ``tests/fixtures/``, and README.md / TASKS.md with their instructor-only parts removed
(``<!-- instructor -->`` ... ``<!-- /instructor -->``), their release-only parts shown
(``<!-- release`` ... ``-->``) and the markers of generated parts (``<!-- flags: ... -->``) dropped.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

from rlhf_practice.course import GRADED, ROOT, graded

# Paths (files or folders, relative to the repository) that stay with the instructor.
INSTRUCTOR_ONLY = (
    "answer",
    "instructor",
    ".ci",
    "tests/instructor",
    "INSTRUCTOR.md",
    "scripts/check_speed.py",  # times the key, in this copy and in a release built from it
    "scripts/autograder_cost.py",  # what one Gradescope run of the key costs (INSTRUCTOR.md §4.10)
)
DOCS = ("README.md", "TASKS.md")


def stub_source(answer_source: str, functions: dict[str, str]) -> str:
    """``answer_source`` with the body of each graded function (after its docstring) replaced by a stub
    that raises NotImplementedError naming the function and its TASKS.md section."""
    lines = answer_source.splitlines(keepends=True)
    tree = ast.parse(answer_source)
    nodes = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in functions]
    for node in sorted(nodes, key=lambda node: node.lineno, reverse=True):  # bottom up: line numbers stay valid
        section = functions[node.name]
        lines[node.body[0].end_lineno : node.end_lineno] = [
            f"    # TODO(student): implement this function. Read TASKS.md {section} first.\n",
            f'    raise NotImplementedError("{node.name} is not implemented yet: see TASKS.md {section}.")\n',
        ]
    return "".join(lines)


def student_files() -> dict[str, str]:
    """{student file: its generated source}, from the answer key."""
    return {
        g.student_file: stub_source((ROOT / g.answer_file).read_text(encoding="utf-8"), graded(g.module))
        for g in {g.module: g for g in GRADED}.values()
    }


def release_doc(text: str) -> str:
    """A document as the release shows it: instructor blocks removed, release blocks shown, generated parts
    without their markers."""
    text = re.sub(r"(?m)^<!-- /?flags\b[^\n]*-->\n", "", text)
    inside = r"(?:(?!<!--).)*?"  # a block's text never spans another marker
    text = re.sub(rf"(?m)^<!-- instructor -->\n{inside}\n<!-- /instructor -->\n", "", text, flags=re.S)  # lines
    text = re.sub(rf"<!-- instructor -->{inside}<!-- /instructor -->", "", text, flags=re.S)  # within a line
    return re.sub(rf"(?m)^<!-- release\n({inside})-->\n", r"\1", text, flags=re.S)


def _tracked_files() -> list[str]:
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit("error: the release is built from a git checkout of the instructor's repository.")
    return [path for path in proc.stdout.split("\0") if path]


def build_release(out: Path) -> list[str]:
    """Write the student release to ``out`` (which must not exist or be empty); returns the files written."""
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"error: {out} is not empty; give a new folder.")
    stubs = student_files()
    written = []
    for path in _tracked_files():
        if any(path == p or path.startswith(p + "/") for p in INSTRUCTOR_ONLY) or not (ROOT / path).is_file():
            continue
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path in stubs:
            target.write_text(stubs[path], encoding="utf-8")
        elif path in DOCS:
            target.write_text(release_doc((ROOT / path).read_text(encoding="utf-8")), encoding="utf-8")
        else:
            shutil.copy2(ROOT / path, target)
        written.append(path)
    return written
