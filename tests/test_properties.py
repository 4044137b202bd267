"""Graded: property tests of every function of the course table (tests/properties/<file>.py).

Each test checks one law that every correct implementation obeys (advantages of a group sum to 0, the
clipped loss equals the unclipped one inside the clip range, k3 >= 0, ...) on many small random inputs
drawn by Hypothesis, the same ones on every run, plus a float64 gradient check against central
differences. A failure is one line: the function, the law, the smallest input that breaks it and what
your function returned, and the TASKS.md section. Select with ``-k`` as the recorded cases: a function
(``-k compute_advantages``), a student file (``-k token_level``), or one law (``-k gradcheck``). Test
ids read ``file-function-law``. Only the laws of the functions that ``-m``/``-k`` can select are loaded.
"""

from __future__ import annotations

import pytest
from _checks import student_module
from _selection import reachable
from properties import Property, failure, laws

from rlhf_practice.course import module_of

pytestmark = pytest.mark.graded


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    props = [
        p
        for f in reachable("test_property", metafunc.config.option.markexpr, metafunc.config.option.keyword)
        for p in laws(f)
    ]
    metafunc.parametrize("prop", [pytest.param(p, id=p.test_id) for p in props])


def test_property(impl, prop: Property) -> None:
    message = failure(prop, getattr(student_module(impl, module_of(prop.function)), prop.function))
    if message:
        pytest.fail(message, pytrace=False)
