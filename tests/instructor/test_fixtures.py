"""Instructor checks: the recorded cases agree with the answer key, and fresh random inputs are graded
against the live key. Not part of the student release (which has no key)."""

from __future__ import annotations

import pytest
import torch

from rlhf_practice.checks import check_case, load_cases, run_case
from rlhf_practice.course import TASKS
from rlhf_practice.course.cases import build_cases


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_fixtures_agree_with_the_answer_key() -> None:
    recorded, fresh = load_cases(), build_cases()
    assert [(c["function"], c["id"]) for c in recorded] == [(c["function"], c["id"]) for c in fresh], (
        "the recorded cases are not the ones the case book builds; run python -m rlhf_practice.course fixtures"
    )
    stale = [f"{c['function']}/{c['id']}" for c, f in zip(recorded, fresh) if not _same(c, f)]
    assert not stale, (
        f"tests/fixtures disagree with the answer key for {stale[:5]}; run python -m rlhf_practice.course fixtures"
    )


def test_book_examples_are_recorded() -> None:
    books = {c["book"] for c in load_cases() if c["book"]}
    assert books == {"§1.2", "§2.2", "§3.1", "§7.2", "§7.3", "§8.2", "§8.3", "§9.2"}


@pytest.mark.graded
@pytest.mark.parametrize("function", [task.function for task in TASKS])
def test_fresh_random_inputs_against_the_live_key(impl, function: str) -> None:
    """Inputs no fixture holds (another seed), expected values from the answer key."""
    module = impl.module(next(task.module for task in TASKS if task.function == function))
    for case in (c for c in build_cases(seed=7) if c["function"] == function):
        message = check_case(case, run_case(getattr(module, function), case))
        if message:
            pytest.fail(message, pytrace=False)
