"""The grade and the student's own pytest agree (issue 44 §2): points come from the hidden cases alone
(instructor.grading), while a student's pytest runs the published cases and the property laws
(tests/properties/). So every check a law makes that a right answer must pass is also in the cases, and
every default a docstring states is exercised by a case that leaves the argument out.

The mistakes below are written from the contract (the docstrings and DESIGN.md), in instructor.book; for
each one the hidden cases of one seed fail it (it loses points) and at least one property law fails it (the
student's pytest says so too).
"""

from __future__ import annotations

import inspect
import warnings
from functools import cache

import pytest
from _checks import recorded_cases

from instructor.cases import build_cases
from instructor.mistakes import CATALOG, KEY
from instructor.properties import judge
from rlhf_practice.checks import check_case, run_case
from rlhf_practice.course import GRADED

HIDDEN_SEED = 3

# {variant in instructor.book: what it breaks of the contract}
AGREE = {
    "nan_gradient_on_an_all_masked_row": "masked_mean: a finite gradient on a row with no real token",
    "grpo_where_per_reply_mean": "grpo_clip_loss: a finite gradient with a reply that has no real token",
    "unknown_estimator_falls_back_to_k3": "per_token_kl: an unknown estimator raises ValueError",
    "unknown_loss_type_falls_back_to_grpo": "grpo_clip_loss: an unknown loss_type raises ValueError",
    "rewards_masked_in_place": "compute_gae: inputs unchanged, with values in the padding",
    "clip_range_default_0_2": "compute_loss: clip_range defaults to the lecture's 0.01",
    "token_ratio_of_probabilities": "token_ppo_loss: finite for very unlikely tokens (ratio = exp(new - old))",
    "grpo_clip_ratio_of_probabilities": "grpo_clip_loss: finite for very unlikely tokens (ratio = exp(new - old))",
}


@cache
def hidden(function: str) -> tuple[dict, ...]:
    return tuple(build_cases(seed=HIDDEN_SEED, function=function))


def _defaults(function: str, module: str) -> list[str]:
    key = getattr(KEY.module(module), function)
    return [p.name for p in inspect.signature(key).parameters.values() if p.default is not inspect.Parameter.empty]


@pytest.mark.parametrize("g", GRADED, ids=lambda g: g.function)
def test_every_stated_default_is_left_out_by_a_published_case(g) -> None:
    """For each parameter with a default, some published case calls without it (and so, through its fresh
    variant, some hidden case): a wrong default loses points."""
    cases = [c for c in recorded_cases() if c["function"] == g.function]
    missing = [
        name
        for name in _defaults(g.function, g.module)
        if not any(name not in dict(c["args"]) and name not in c["kwargs"] and not c["raises"] for c in cases)
    ]
    assert not missing, f"{g.function}: no case leaves out {missing}; add one in its builder in instructor/book/"


@pytest.mark.slow
@pytest.mark.parametrize("name", AGREE)
def test_grade_and_properties_agree(name: str) -> None:
    variant = next(v for v in CATALOG if v.name == name)
    assert variant.verdict == "wrong"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        messages = [check_case(c, run_case(variant.fn, c)) for c in hidden(variant.function)]
    failed = [m for m in messages if m]
    assert failed, f"{name} ({AGREE[name]}) passes every hidden case of seed {HIDDEN_SEED}: it would get full marks"
    assert any(variant.diagnosis in m for m in failed), f"{name}: no hidden failure names it: {failed[0]}"
    assert judge(variant).failures, f"{name} ({AGREE[name]}) passes every property law: the student's pytest is green"
