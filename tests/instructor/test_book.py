"""The grading book (instructor/book/): each graded function's cases and mistakes are registered from the
book module of its student file, and building one function's cases imports that module alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from instructor.cases import builder_of, cases_of
from instructor.mistakes import CATALOG, wrong
from rlhf_practice.course import GRADED, ROOT

BOOK_MODULES = """
import sys
from instructor.cases import build_cases
from instructor.mistakes import wrong_variants
build_cases(seed=7, function="compute_advantages")
wrong_variants("ppo_clip_loss")
print(sorted(m for m in sys.modules if m.startswith("instructor.book")))
"""


def test_one_function_imports_only_the_book_of_its_student_file() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", BOOK_MODULES], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "['instructor.book', 'instructor.book.ppo']", out.stdout


def test_every_graded_function_has_a_builder_and_the_catalog_follows_the_course_table() -> None:
    assert all(callable(builder_of(g.function)) for g in GRADED)
    rank = {g.function: i for i, g in enumerate(GRADED)}
    ranks = [rank[v.function] for v in CATALOG]
    assert ranks == sorted(ranks)


def test_a_builder_or_a_variant_outside_its_book_module_is_refused() -> None:
    def advantage_cases(key, g, fresh):
        return []

    def never_normalizes_again(rewards, values, normalize=True, eps=1e-8):
        return rewards - values.detach()

    with pytest.raises(ValueError, match="instructor.book.ppo"):
        cases_of("compute_advantages")(advantage_cases)
    with pytest.raises(ValueError, match="instructor.book.ppo"):
        wrong("compute_advantages", "normalize flag ignored")(never_normalizes_again)
    assert "never_normalizes_again" not in {v.name for v in CATALOG}
