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
from instructor.grading import STOPPED, stops_training
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
    # issue 59: tasks 13-14
    "gspo_where_after_dividing": "gspo_loss: a finite gradient with a reply that has no real token",
    "gspo_divides_by_zero_length": "gspo_loss: finite with a reply that has no real token",
    "clip_higher_divides_by_zero_length": "clip_higher_loss: finite with a reply that has no real token",
    "reward_logits_padding_zeroed": "get_reward: reward_logits is the score head's output at every position",
    "two_before_the_count": "get_reward: the score at the last real token, a finished reply's EOS",
    "accuracy_with_the_margin": "reward_loss: the accuracy counts rewards_chosen > rewards_rejected, margin or not",
    "centring_not_squared": "reward_loss: the centring term is the mean of the squared sums",
    "hinge_loss": "reward_loss: the Bradley-Terry loss",
    "rloo_group_size_1_divides_by_zero": "compute_rloo_advantages: K = 1 raises ValueError",
}
# {variant: what it does} the mistakes whose result a training run cannot learn from (issue 59 §2): each loses
# more than half its function's points (instructor.grading.stops_training caps them) and its first published
# failure, the first message a student's pytest prints for that function, names it
STOPS = {
    "scores_under_no_grad": "get_reward: final_scores computed under no_grad",
    "scores_detached": "reward_loss: the scores detached",
    "log_of_sigmoid": "reward_loss: inf for a very negative difference",
    "gspo_ratio_detached": "gspo_loss: s_i detached (the KL term's gradient is left)",
    "gspo_where_after_dividing": "gspo_loss: NaN gradient on a reply with no real token",
    "gspo_divides_by_zero_length": "gspo_loss: NaN on a reply with no real token",
    "clip_higher_divides_by_zero_length": "clip_higher_loss: NaN on a reply with no real token",
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


@pytest.mark.slow
@pytest.mark.parametrize("name", STOPS)
def test_what_stops_training_loses_most_points_and_is_named_first(name: str) -> None:
    variant = next(v for v in CATALOG if v.name == name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [(c, run_case(variant.fn, c)) for c in hidden(variant.function)]
        published = [c for c in recorded_cases() if c["function"] == variant.function]
        first = next(m for m in (check_case(c, run_case(variant.fn, c)) for c in published) if m)
    failed = [(c, r) for c, r in results if check_case(c, r)]
    why = [stops_training(c, r) for c, r in failed]
    assert any(why), f"{name} ({STOPS[name]}): no hidden failure is told as one that stops training"
    share = min((len(results) - len(failed)) / len(results), STOPPED)
    assert share < 0.5, f"{name} keeps {share:.0%} of its points"
    assert variant.diagnosis in first, f"{name}: the first message of pytest does not name it: {first}"


def test_a_capped_function_keeps_a_quarter_and_is_told_why() -> None:
    from instructor.feedback import fix
    from instructor.grading import Grade

    grade = Grade("s")
    grade.total["gspo_loss"], grade.passed["gspo_loss"] = 14, 13
    assert grade.points("gspo_loss") == 9.3
    grade.stopped["gspo_loss"] = "its gradient w.r.t. logprobs holds NaN or inf"
    grade.diagnoses["gspo_loss"] = "gspo_loss fails a hidden case."
    assert grade.points("gspo_loss") == 2.5
    assert fix(grade, "gspo_loss").startswith("Points capped at 25% of the function's: its gradient w.r.t. logprobs")
    grade.passed["gspo_loss"] = 2
    assert grade.points("gspo_loss") == 1.4  # under the cap: the share of passed cases


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ensemble_uwo_of_one_model", "rloo_group_size_1_divides_by_zero"])
def test_a_case_that_must_raise_costs_itself_alone(name: str) -> None:
    """One rule for every graded function (INSTRUCTOR.md §4.3): NaN where an error is promised, on settings the
    scripts refuse before the function sees them ('uwo' with one model, RLOO's K = 1), fails those cases and caps
    nothing."""
    variant = next(v for v in CATALOG if v.name == name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [(c, run_case(variant.fn, c)) for c in hidden(variant.function)]
    failed = [(c, r) for c, r in results if check_case(c, r)]
    assert failed and all(c["raises"] for c, _ in failed), f"{name} fails a case that must not raise"
    assert not any(stops_training(c, r) for c, r in failed), f"{name}: a must-raise case capped its points"
