"""Graded: compute_group_advantages (TASKS.md §3.2) and grpo_loss (TASKS.md §3.3).

Run: ``pytest -m graded -k "compute_group_advantages or grpo_loss"``. Each test is one recorded case
(see tests/test_graded_ppo.py).
"""

from __future__ import annotations

import pytest
from _checks import cases, check

pytestmark = pytest.mark.graded


@pytest.mark.parametrize("case", cases("compute_group_advantages"))
def test_compute_group_advantages(impl, case):
    check(impl.grpo, case)


@pytest.mark.parametrize("case", cases("grpo_loss"))
def test_grpo_loss(impl, case):
    check(impl.grpo, case)
