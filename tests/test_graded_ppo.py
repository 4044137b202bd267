"""Graded: compute_advantages (TASKS.md §1.2) and ppo_clip_loss (TASKS.md §2.2).

Run: ``pytest -m graded -k "compute_advantages or ppo_clip_loss"``. Each test is one recorded case:
its inputs, the expected result (and gradients), and what common mistakes would return, so that a
failure names the mistake. ``-k book_example`` runs the task book's worked examples only.
"""

from __future__ import annotations

import pytest
from _checks import cases, check

pytestmark = pytest.mark.graded


@pytest.mark.parametrize("case", cases("compute_advantages"))
def test_compute_advantages(impl, case):
    check(impl.ppo, case)


@pytest.mark.parametrize("case", cases("ppo_clip_loss"))
def test_ppo_clip_loss(impl, case):
    check(impl.ppo, case)
