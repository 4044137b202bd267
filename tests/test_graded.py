"""Graded: every function of the course table (rlhf_practice/course), one test per recorded case.

Each test is one case from tests/fixtures/graded_cases.pt: its inputs, the expected result (and
gradients), and what common mistakes would return, so that a failure names the mistake. Select with
``-k``: a function (``-k compute_advantages``), a student file (``-k token_level`` for tasks 7-9,
``-k lecture`` for task 10, ``-k dpo`` for task 12), or the task book's worked examples
(``-k book_example``). Test ids read ``file-function-case``.
"""

from __future__ import annotations

import pytest
from _checks import check, recorded_cases, student_module

from rlhf_practice.course import module_of

pytestmark = pytest.mark.graded


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=f"{module_of(c['function'])}-{c['function']}-{c['id']}") for c in recorded_cases()],
)
def test_graded(impl, case):
    check(student_module(impl, module_of(case["function"])), case)
