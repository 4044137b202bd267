"""Run a graded function on its recorded cases (tests/fixtures/graded_cases.pt) and fail in words.

The comparison itself is :func:`rlhf_practice.checks.check_case`, the same one the grader uses.
"""

from __future__ import annotations

from functools import cache

import pytest

from rlhf_practice.checks import check_case, load_cases, run_case
from rlhf_practice.errors import ConfigError


@cache
def recorded_cases() -> tuple[dict, ...]:
    """tests/fixtures/graded_cases.pt, read once: two test modules parametrize over it when pytest collects
    (reading it takes a fifth of a second). Shared between tests: read it, never change it."""
    return tuple(load_cases())


def student_module(impl: object, name: str) -> object:
    """``impl.<name>``; a submission folder without that file fails in one line."""
    try:
        return impl.module(name)
    except ConfigError as err:
        pytest.fail(str(err), pytrace=False)


def check(module: object, case: dict) -> None:
    """Call the case's function from ``module`` (``impl.ppo``, ``impl.grpo``, ``impl.token_level``, ``impl.lecture``
    or ``impl.dpo``); fail with its diagnosis."""
    message = check_case(case, run_case(getattr(module, case["function"]), case))
    if message:
        pytest.fail(message, pytrace=False)
