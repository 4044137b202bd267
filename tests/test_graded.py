"""Graded: every function of the course table (rlhf_practice/course), one test per recorded case.

Each test is one case from tests/fixtures/graded_cases.pt: its inputs, the expected result (and
gradients), and what common mistakes would return, so that a failure names the mistake. Select with
``-k``: a function (``-k compute_advantages``), a student file (``-k token_level`` for tasks 7-9), or
the task book's worked examples (``-k book_example``). Test ids read ``file-function-case``.
"""

from __future__ import annotations

import pytest
from _checks import check, module_of

from rlhf_practice.checks import load_cases
from rlhf_practice.course import TASKS

pytestmark = pytest.mark.graded
MODULE_OF = {task.function: task.module for task in TASKS}


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=f"{MODULE_OF[c['function']]}-{c['function']}-{c['id']}") for c in load_cases()],
)
def test_graded(impl, case):
    check(module_of(impl, MODULE_OF[case["function"]]), case)
