"""Graded: every function of the course table (rlhf_practice/course), one test per recorded case.

Each test is one case from tests/fixtures/graded/<file>.pt: its inputs, the expected result (and
gradients), and what common mistakes would return, so that a failure names the mistake. Select with
``-k``: a function (``-k compute_advantages``), a student file (``-k token_level`` for tasks 7-9,
``-k lecture`` for task 10, ``-k dpo`` for task 12, ``-k reward_model`` for task 13, ``-k after_grpo`` for task 14,
``-k best_of_n`` for task 15), or the task book's worked examples
(``-k book_example``). Test ids read ``file-function-case``. Only the cases of the functions that
``-m``/``-k`` can select are read (tests/_selection.py): checking one function costs about an import of torch.
"""

from __future__ import annotations

import pytest
from _checks import check, recorded_cases, student_module
from _selection import reachable

from rlhf_practice.course import module_of

pytestmark = pytest.mark.graded


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cases = [
        c
        for f in reachable("test_graded", metafunc.config.option.markexpr, metafunc.config.option.keyword)
        for c in recorded_cases(f)
    ]
    metafunc.parametrize(
        "case", [pytest.param(c, id=f"{module_of(c['function'])}-{c['function']}-{c['id']}") for c in cases]
    )


def test_graded(impl, case):
    check(student_module(impl, module_of(case["function"])), case)
