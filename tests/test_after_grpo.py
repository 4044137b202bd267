"""Graded: clip_higher_loss (TASKS.md §14.3) with equal clip ranges is your own grpo_clip_loss (§9.2).

With clip_range_low == clip_range_high == epsilon, clip-higher is GRPO-clip with clip_range epsilon, so the two
functions of your files must agree: the answer key's exactly (the same operations in the same order give the same
bits, in float32 and float64 and for all three loss types), and any implementation to within 2 ulp (two right
ways of writing the same formula may round differently). Fails while clip_higher_loss is a stub; skipped while
token_level.py's grpo_clip_loss (task 9) is missing or not implemented. Select with ``-k after_grpo`` or ``-k clip_higher_loss``.
"""

from __future__ import annotations

import pytest
import torch
from _checks import student_module

from rlhf_practice.errors import ConfigError

pytestmark = pytest.mark.graded

LOSS_TYPES = ("grpo", "dapo", "dr_grpo")


def _inputs(seed: int, rows: int, num_tokens: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Replies of random lengths (one full, one of a single token), ratios from 0.5 to 1.6 (inside and outside the
    clip ranges), junk under the padding."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, num_tokens + 1, (rows,), generator=g)
    lengths[0], lengths[1] = num_tokens, 1
    mask = (torch.arange(num_tokens)[None, :] < lengths[:, None]).to(dtype)
    old = -torch.rand(rows, num_tokens, generator=g, dtype=torch.float64) * 5
    logprobs = old + torch.log(0.5 + 1.1 * torch.rand(rows, num_tokens, generator=g, dtype=torch.float64))
    ref = torch.where(mask > 0, old + torch.randn(rows, num_tokens, generator=g, dtype=torch.float64) * 0.5, -30.0)
    advantages = torch.randn(rows, generator=g, dtype=torch.float64)
    return tuple(t.to(dtype) for t in (logprobs, old, ref, advantages)) + (mask,)


def _ulps(a: torch.Tensor, b: torch.Tensor) -> float:
    """|a - b| in units in the last place of b."""
    ulp = (torch.nextafter(b.abs(), torch.tensor(float("inf"), dtype=b.dtype)) - b.abs()).item()
    return abs((a - b).item()) / ulp


UNFINISHED = object()  # what _clip_higher returns for a stub
UNFINISHED_MESSAGE = "clip_higher_loss is not implemented yet (it raises NotImplementedError). See TASKS.md §14.3."


def _clip_higher(after_grpo, *args) -> object:
    """``after_grpo.clip_higher_loss(*args)``, or UNFINISHED while it is a stub: the test then fails outside the
    ``except``, so the student reads one message, not the stub's error chained to it."""
    try:
        return after_grpo.clip_higher_loss(*args)
    except NotImplementedError:
        return UNFINISHED


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_clip_higher_loss_with_equal_ranges_is_token_level_clip(impl, dtype: torch.dtype, loss_type: str) -> None:
    after_grpo = student_module(impl, "after_grpo")
    # an unfinished clip_higher_loss fails here, as every graded test of a stub does, whatever token_level.py holds
    if _clip_higher(after_grpo, *_inputs(0, 3, 4, dtype), 0.2, 0.2, 0.04, loss_type, 6) is UNFINISHED:
        pytest.fail(UNFINISHED_MESSAGE, pytrace=False)
    try:
        grpo_clip_loss = impl.module("token_level").grpo_clip_loss
        grpo_clip_loss(*_inputs(0, 3, 4, dtype), 0.2, 0.04, loss_type, 6)
    except (ConfigError, NotImplementedError):
        pytest.skip(
            "compares clip_higher_loss with grpo_clip_loss: finish token_level.py's grpo_clip_loss (§9.2) first"
        )
    exact = impl.name == "answer"  # the key: bit for bit
    for seed, (rows, num_tokens) in enumerate([(3, 4), (8, 12), (16, 7)]):
        for epsilon in (0.2, 0.1, 0.28):
            tensors = _inputs(seed, rows, num_tokens, dtype)
            expected = grpo_clip_loss(*tensors, epsilon, 0.04, loss_type, num_tokens + 3)
            got = _clip_higher(after_grpo, *tensors, epsilon, epsilon, 0.04, loss_type, num_tokens + 3)
            if got is UNFINISHED:
                pytest.fail(UNFINISHED_MESSAGE, pytrace=False)
            where = (
                f"clip_higher_loss with clip_range_low = clip_range_high = {epsilon} on ({rows}, {num_tokens}) "
                f"{dtype} inputs, loss_type={loss_type!r}"
            )
            if not isinstance(got, torch.Tensor) or got.shape != () or got.dtype != dtype:
                pytest.fail(f"{where}: returned {got!r}, expected a 0-dim {dtype} tensor. Reread TASKS.md §14.3.")
            if exact:
                assert got.item() == expected.item(), f"{where}: {got.item()!r}, grpo_clip_loss {expected.item()!r}"
            elif _ulps(got, expected) > 2:
                pytest.fail(
                    f"{where}: got {got.item():.9g}, but your grpo_clip_loss with clip_range {epsilon} gives "
                    f"{expected.item():.9g} ({_ulps(got, expected):.3g} ulp apart; at most 2). With equal ranges the two "
                    "are the same formula. Reread TASKS.md §14.3.",
                    pytrace=False,
                )
