"""Run a graded function on its recorded cases (tests/fixtures/graded_cases.pt) and fail in words.

The comparison itself is :func:`rlhf_practice.checks.check_case`, the same one the grader uses.
"""

from __future__ import annotations

import pytest

from rlhf_practice.checks import check_case, run_case
from rlhf_practice.errors import ConfigError


def student_module(impl: object, name: str) -> object:
    """``impl.<name>``; a submission folder without that file fails in one line."""
    try:
        return impl.module(name)
    except ConfigError as err:
        pytest.fail(str(err), pytrace=False)


def check(module: object, case: dict) -> None:
    """Call the case's function from ``module`` (``impl.ppo``, ``impl.grpo`` or ``impl.token_level``); fail with its diagnosis."""
    message = check_case(case, run_case(getattr(module, case["function"]), case))
    if message:
        pytest.fail(message, pytrace=False)
