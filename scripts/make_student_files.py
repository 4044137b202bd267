"""Regenerate the student files from the answer key (the single source of truth).

    python scripts/make_student_files.py

Copies ``answer/ppo_answer.py`` to ``rlhf_practice/rl/ppo.py`` (and grpo likewise), replacing the
body of each graded function after its docstring by a ``NotImplementedError`` stub that names the
function and its TASKS.md section. Everything else is copied unchanged.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.course import TASKS, graded  # noqa: E402

# {module: (answer file, student file)}, from the course table.
PAIRS = {task.module: (task.answer_file, task.student_file) for task in TASKS}


def stub_source(answer_source: str, graded: dict[str, str]) -> str:
    lines = answer_source.splitlines(keepends=True)
    tree = ast.parse(answer_source)
    # Replace from the bottom up so earlier line numbers stay valid.
    functions = sorted(
        (node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in graded),
        key=lambda node: node.lineno,
        reverse=True,
    )
    for node in functions:
        docstring_end = node.body[0].end_lineno  # the docstring is the first statement
        section = graded[node.name]
        stub = [
            f"    # TODO(student): implement this function. Read TASKS.md {section} first.\n",
            f'    raise NotImplementedError("{node.name} is not implemented yet: see TASKS.md {section}.")\n',
        ]
        lines[docstring_end : node.end_lineno] = stub
    return "".join(lines)


def main() -> None:
    for module, (answer, student) in PAIRS.items():
        functions = graded(module)
        source = stub_source((ROOT / answer).read_text(encoding="utf-8"), functions)
        (ROOT / student).write_text(source, encoding="utf-8")
        print(f"wrote {student} from {answer}: stubs for {', '.join(functions)}")


if __name__ == "__main__":
    main()
