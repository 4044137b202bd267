"""Graded: the token-level track, tasks 7-9 (TASKS.md §7.2, §7.3, §8.2, §8.3, §9.2).

Run: ``pytest -m graded -k token_level`` (or ``-k compute_gae`` for one function). Each test is one
recorded case (see tests/test_graded_ppo.py).
"""

from __future__ import annotations

import pytest
from _checks import cases, check, module_of

pytestmark = pytest.mark.graded


@pytest.mark.parametrize("case", cases("masked_mean"))
def test_masked_mean(impl, case):
    check(module_of(impl, "token_level"), case)


@pytest.mark.parametrize("case", cases("per_token_kl"))
def test_per_token_kl(impl, case):
    check(module_of(impl, "token_level"), case)


@pytest.mark.parametrize("case", cases("compute_gae"))
def test_compute_gae(impl, case):
    check(module_of(impl, "token_level"), case)


@pytest.mark.parametrize("case", cases("token_ppo_loss"))
def test_token_ppo_loss(impl, case):
    check(module_of(impl, "token_level"), case)


@pytest.mark.parametrize("case", cases("grpo_clip_loss"))
def test_grpo_clip_loss(impl, case):
    check(module_of(impl, "token_level"), case)
