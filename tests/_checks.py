"""Run a graded function on its recorded cases (tests/fixtures/graded/<file>.pt) and fail in words.

The comparison itself is :func:`rlhf_practice.checks.check_case`, the same one the grader uses.
"""

from __future__ import annotations

import inspect
import warnings
from functools import cache

import pytest

from rlhf_practice.checks import CASES_DIR, blame_helpers, check_case, graded_callees, load_cases, run_case
from rlhf_practice.course import MODULES, graded, module_of
from rlhf_practice.errors import ConfigError


def recorded_cases(function: str | None = None) -> tuple[dict, ...]:
    """The recorded cases of ``function`` (default: of every graded function): only its student file's fixture
    is read, once. Shared between tests: read them, never change them."""
    if function is None:
        return tuple(c for m in MODULES for c in _file_cases(m))
    return tuple(c for c in _file_cases(module_of(function)) if c["function"] == function)


@cache
def _file_cases(module: str) -> tuple[dict, ...]:
    """tests/fixtures/graded/<module>.pt, read once."""
    return tuple(load_cases(CASES_DIR / f"{module}.pt"))


def student_module(impl: object, name: str) -> object:
    """``impl.<name>``; a submission folder without that file fails in one line."""
    try:
        return impl.module(name)
    except ConfigError as err:
        pytest.fail(str(err), pytrace=False)


def check(module: object, case: dict) -> None:
    """Call the case's function from ``module`` (``impl.ppo``, ``impl.grpo``, ``impl.token_level``, ``impl.lecture``,
    ``impl.dpo``, ``impl.reward_model``, ``impl.after_grpo`` or ``impl.best_of_n``); fail with its diagnosis."""
    message = check_case(case, run_case(getattr(module, case["function"]), case))
    if message:
        pytest.fail(blame_helpers(message, case["function"], failing_helpers(module, case["function"])), pytrace=False)


def failing_helpers(module: object, function: str) -> dict[str, str]:
    """{graded function of ``module`` that ``function`` calls and that fails one of its own recorded cases:
    its TASKS.md section} (see rlhf_practice.checks.blame_helpers)."""
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return {}
    sections = graded(module_of(function))
    return {name: sections[name] for name in graded_callees(source, function, list(sections)) if _fails(module, name)}


@cache
def _fails(module: object, function: str) -> bool:
    """Whether ``module``'s ``function`` fails one of its recorded cases (run once per module and function)."""
    fn = getattr(module, function, None)
    if fn is None:
        return True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return any(check_case(c, run_case(fn, c)) for c in recorded_cases(function))
