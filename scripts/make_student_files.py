"""Regenerate the student files from the answer key (the single source of truth).

    python scripts/make_student_files.py

Writes ``rlhf_practice/rl/ppo.py`` from ``answer/ppo_answer.py`` (and grpo likewise), replacing the
body of each graded function after its docstring by a ``NotImplementedError`` stub that names the
function and its TASKS.md section. Everything else is copied unchanged. Instructor only: this
overwrites the student files.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.course.release import student_files  # noqa: E402


def main() -> None:
    for path, source in student_files().items():
        (ROOT / path).write_text(source, encoding="utf-8")
        print(f"wrote {path} from the answer key")


if __name__ == "__main__":
    main()
