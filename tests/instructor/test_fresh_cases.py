"""The grader's hidden cases (instructor.cases.build_cases with a seed): a fresh variant of every published
case, no published expected value among theirs, the mistake catalog told apart on them alone, and a lookup table
of the published cases answering none of them.

The tests that build the hidden cases of several seeds are marked ``slow`` (~30 s on 2 cores: each build
records what every catalogued mistake returns); .ci/run runs them with the grader's slow line.
"""

from __future__ import annotations

import types
import warnings
from collections import Counter
from functools import cache

import pytest
import torch
from _cheats import lookup_files

from instructor.cases import build_cases
from instructor.grading import FUNCTIONS, Grade, _fitted_notes, _nonzero
from instructor.mistakes import CATALOG
from instructor.mutations import Verdict
from rlhf_practice.checks import check_case, load_cases, run_case
from rlhf_practice.course import GRADED

SEEDS = (1, 2, 3)
# Answers that a fresh input cannot change, so a hidden one may equal a published one: a count of the sort
# rewards (whole numbers from 0 to 2n - 1: these are checked on their inputs instead), and the advantages of
# groups of two replies, normalised (+-1/sqrt(2) whatever the rewards). All-zero answers and errors count only
# with a non-zero right answer (instructor.grading._nonzero), so they are left out too. filter_groups answers a few
# bools: checked on its inputs as the counts are; so are select_pairs (a few indices: [0, 1] whatever the scores) and
# proxy_agreement (a share of a few pairs: 1 wherever the proxy orders them all as the annotator).
COUNTS = ("sort_distance_reward", "sort_inclusion_ordering_reward", "filter_groups", "select_pairs", "proxy_agreement")


@cache
def hidden(seed: int) -> tuple[dict, ...]:
    return tuple(build_cases(seed=seed))


@cache
def published() -> tuple[dict, ...]:
    return tuple(load_cases())


def _parts(value) -> list:
    return value if isinstance(value, list) else [value]


def _same(a, b) -> bool:
    """Two expected results equal to within float32 rounding (a float, a tensor, a list of tensors, or None:
    an error)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and abs(a - b) <= 1e-6 * max(1.0, abs(b))
    a, b = _parts(a), _parts(b)
    return len(a) == len(b) and all(
        x.shape == y.shape and torch.allclose(x.double(), y.double(), rtol=1e-5, atol=1e-7) for x, y in zip(a, b)
    )


def _plain(args: list) -> list:
    return [(name, value.tolist() if isinstance(value, torch.Tensor) else value) for name, value in args]


def _fixed_by_structure(case: dict) -> bool:
    args = dict(case["args"])
    pairs = case["function"] == "compute_group_advantages" and args["group_size"] == 2
    # reward_loss on pairs of equal scores, without margin or centring term: loss log 2 and accuracy 0, whatever
    # the scores (a fresh variant has other scores and another number of pairs)
    ties = case["function"] == "reward_loss" and len(args) == 2 and torch.equal(*args.values())
    return not _nonzero(case["expected"]) or (pairs and case["kwargs"].get("normalize", True)) or ties


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_every_published_case_has_a_fresh_variant(seed: int) -> None:
    """As many hidden cases as published ones per function, none of them printed in the task book."""
    assert Counter(c["function"] for c in hidden(seed)) == Counter(c["function"] for c in published())
    assert all(c["id"].startswith("hidden_") and not c["book"] for c in hidden(seed))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_no_published_expected_value_is_a_hidden_one(seed: int) -> None:
    by_function: dict[str, list[dict]] = {f: [] for f in FUNCTIONS}
    for case in published():
        by_function[case["function"]].append(case)
    matches = []
    for case in hidden(seed):
        others = by_function[case["function"]]
        if case["function"] in COUNTS:
            same = [p["id"] for p in others if _plain(p["args"]) == _plain(case["args"])]
        elif _fixed_by_structure(case):
            continue
        else:
            same = [p["id"] for p in others if _same(case["expected"], p["expected"])]
        matches += [f"{case['function']}/{case['id']} == {p}" for p in same]
    assert not matches, matches[:10]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", SEEDS)
def test_the_catalog_on_hidden_cases_alone(seed: int) -> None:
    """As `python -m instructor mutations`, on the hidden cases only: every wrong variant fails one and names
    its mistake, never another alone; every right variant passes them all."""
    bad = []
    for variant in CATALOG:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cases = [c for c in hidden(seed) if c["function"] == variant.function]
            messages = [check_case(c, run_case(variant.fn, c)) for c in cases]
        verdict = Verdict(variant, [m for m in messages if m])
        if not verdict.ok:
            bad.append(f"{variant.verdict} {variant.function}: {variant.name}: {verdict.shown[:200]}")
    assert not bad, bad


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_a_lookup_table_of_the_published_cases_answers_no_hidden_one(seed: int) -> None:
    """The table of test_attacks.py, called here without a child: allclose matching of inputs finds no published
    case in a hidden one whose answer earns points (tiny differences, say, must be fresh beyond allclose's atol)."""
    module_of = {g.function: g.module for g in GRADED}
    tables = {}
    for module, source in lookup_files().items():
        tables[module] = types.ModuleType(module)
        exec(compile(source, f"{module}.py", "exec"), tables[module].__dict__)
    earned = []
    for case in hidden(seed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = run_case(getattr(tables[module_of[case["function"]]], case["function"]), case)
        if _nonzero(case["expected"]) and check_case(case, result) is None:
            earned.append(f"{case['function']}/{case['id']}")
    assert not earned, earned


def test_answers_fitted_to_the_published_cases_are_flagged() -> None:
    """The note names the function, both counts and the file to read; an honest mistake is not flagged."""
    grade = Grade(submission="s")
    grade.published_total.update(ppo_clip_loss=29, compute_advantages=22, masked_mean=12)
    grade.total.update(ppo_clip_loss=29, compute_advantages=22, masked_mean=12)
    grade.published_passed.update(ppo_clip_loss=26, compute_advantages=20, masked_mean=12)
    grade.passed.update(ppo_clip_loss=3, compute_advantages=18, masked_mean=5)
    assert _fitted_notes(grade) == [
        "ppo_clip_loss passes 26/29 published cases but only 3/29 fresh ones: answers fitted to the published "
        "cases (a lookup table?); read ppo.py",
        "masked_mean passes 12/12 published cases but only 5/12 fresh ones: answers fitted to the published "
        "cases (a lookup table?); read token_level.py",
    ]
