"""Graded: property tests of every function of the course table (tests/_properties.py).

Each test checks one law that every correct implementation obeys (advantages of a group sum to 0, the
clipped loss equals the unclipped one inside the clip range, k3 >= 0, ...) on many small random inputs
drawn by Hypothesis, the same ones on every run, plus a float64 gradient check against central
differences. A failure is one line: the function, the law, the smallest input that breaks it and what
your function returned, and the TASKS.md section. Select with ``-k`` as the recorded cases: a function
(``-k compute_advantages``), a student file (``-k token_level``), or one law (``-k gradcheck``). Test
ids read ``file-function-law``.
"""

from __future__ import annotations

import pytest
from _checks import student_module
from _properties import PROPERTIES, Property, failure

from rlhf_practice.course import module_of

pytestmark = pytest.mark.graded


@pytest.mark.parametrize("prop", [pytest.param(p, id=p.test_id) for p in PROPERTIES])
def test_property(impl, prop: Property) -> None:
    message = failure(prop, getattr(student_module(impl, module_of(prop.function)), prop.function))
    if message:
        pytest.fail(message, pytrace=False)
