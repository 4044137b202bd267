"""Graded: compute_group_advantages (TASKS.md §3.2) and grpo_loss (TASKS.md §3.3).

Run: ``pytest -m graded -k "compute_group_advantages or grpo_loss"`` (add ``--impl answer`` for the key).
"""

from __future__ import annotations

import pytest
import torch
from _checks import call, check_no_grad, check_result, check_unmodified

pytestmark = pytest.mark.graded

GROUP = "§3.2"
LOSS = "§3.3"
DTYPES = [torch.float32, torch.float64]


def ref_group_advantages(rewards, group_size, normalize=True, eps=1e-8, *, unbiased=True):
    grouped = rewards.double().reshape(-1, group_size)  # (B, K): row i = the K replies to prompt i
    a = grouped - grouped.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (grouped.std(dim=1, keepdim=True, unbiased=unbiased) + eps)
    return a.reshape(-1).to(rewards.dtype)


def group_mistakes(rewards, group_size, normalize=True, eps=1e-8):
    r = rewards.double()
    n = r.numel()
    strided = r.reshape(group_size, -1)  # wrong: groups taken as every B-th element
    wrong_order = strided - strided.mean(dim=0, keepdim=True)
    if normalize:
        wrong_order = wrong_order / (strided.std(dim=0, keepdim=True) + eps)
    mistakes = {
        "wrong grouping order: the K replies of one prompt are consecutive (reshape to (B, K) = (-1, group_size), "
        "not (group_size, -1))": wrong_order.reshape(-1),
        "normalize flag ignored": ref_group_advantages(rewards, group_size, not normalize, eps),
        "wrong sign (A = r - baseline)": -ref_group_advantages(rewards, group_size, normalize, eps),
        "baseline is the whole batch's mean instead of each group's mean": (
            (r - r.mean()) / (r.std() + eps) if normalize else r - r.mean()
        ),
    }
    if normalize:
        centred = (r.reshape(-1, group_size) - r.reshape(-1, group_size).mean(dim=1, keepdim=True)).reshape(-1)
        mistakes.update(
            {
                "normalized by the batch std instead of each group's own std (GRPO divides by the group's std)": centred
                / (r.std() + eps),
                "normalized the centred advantages over the whole batch instead of per group": (
                    centred - centred.mean()
                )
                / (centred.std() + eps),
                "population std (use torch's default unbiased std)": ref_group_advantages(
                    rewards, group_size, normalize, eps, unbiased=False
                ),
            }
        )
    if n == group_size:  # one group: batch and group statistics coincide
        mistakes = {k: v for k, v in mistakes.items() if "batch" not in k and "grouping" not in k}
    return {k: v.to(rewards.dtype) for k, v in mistakes.items()}


# ----------------------------------------------------------------------------- compute_group_advantages


TWO_BY_THREE = torch.tensor([1.0, 0.0, 0.5, -1.0, -1.0, 1.0])  # prompt 0: [1, 0, 0.5]; prompt 1: [-1, -1, 1]


def test_compute_group_advantages_two_prompts_three_replies(impl):
    """The task book's example: B = 2 prompts x K = 3 replies, reshaped to (2, 3)."""
    out = call(GROUP, impl.grpo.compute_group_advantages, TWO_BY_THREE, 3)
    s = (4 / 3) ** 0.5  # unbiased std of [-1, -1, 1]
    expected = torch.tensor([1.0, -1.0, 0.0, (-2 / 3) / s, (-2 / 3) / s, (4 / 3) / s])
    check_result(
        out,
        expected,
        what="compute_group_advantages(rewards=[1, 0, 0.5, -1, -1, 1], group_size=3)",
        section=GROUP,
        mistakes=group_mistakes(TWO_BY_THREE, 3),
    )


def test_compute_group_advantages_without_normalize(impl):
    out = call(GROUP, impl.grpo.compute_group_advantages, TWO_BY_THREE, 3, normalize=False)
    expected = torch.tensor([0.5, -0.5, 0.0, -2 / 3, -2 / 3, 4 / 3])
    check_result(
        out,
        expected,
        what="compute_group_advantages(..., group_size=3, normalize=False)",
        section=GROUP,
        mistakes=group_mistakes(TWO_BY_THREE, 3, normalize=False),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("num_prompts", "group_size"), [(1, 4), (2, 3), (3, 2), (8, 4), (5, 8)])
@pytest.mark.parametrize("normalize", [True, False])
def test_compute_group_advantages_random_inputs(impl, answer, dtype, num_prompts, group_size, normalize):
    g = torch.Generator().manual_seed(num_prompts * 100 + group_size * 10 + normalize)
    rewards = (torch.rand(num_prompts * group_size, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)
    # Give groups different offsets so that group and batch statistics differ clearly.
    rewards = rewards + torch.arange(num_prompts, dtype=dtype).repeat_interleave(group_size) * 0.5
    out = call(GROUP, impl.grpo.compute_group_advantages, rewards, group_size, normalize=normalize)
    what = f"compute_group_advantages on random {dtype} rewards, B={num_prompts}, group_size={group_size}, normalize={normalize}"
    check_result(
        out,
        ref_group_advantages(rewards, group_size, normalize),
        what=what,
        section=GROUP,
        mistakes=group_mistakes(rewards, group_size, normalize),
    )
    expected = answer.grpo.compute_group_advantages(rewards, group_size, normalize=normalize)
    check_result(out, expected, what=what + " (vs. answer key)", section=GROUP)


@pytest.mark.parametrize("normalize", [True, False])
def test_compute_group_advantages_equal_rewards_give_zero(impl, normalize):
    """A group whose rewards are all equal has std 0: its advantages must be 0, never NaN."""
    rewards = torch.tensor([0.5, 0.5, 0.5, 0.5, 1.0, -1.0, 0.0, 0.0, -0.25, -0.25, -0.25, -0.25])
    out = call(GROUP, impl.grpo.compute_group_advantages, rewards, 4, normalize=normalize)
    check_result(
        out,
        ref_group_advantages(rewards, 4, normalize),
        what=f"compute_group_advantages with groups of equal rewards (normalize={normalize})",
        section=GROUP,
        mistakes=group_mistakes(rewards, 4, normalize),
        hint="NaN from a zero std: divide by (group std + eps).",
    )


def test_compute_group_advantages_mean_is_zero_per_group(impl):
    rewards = torch.tensor([0.9, 0.1, -0.4, 0.3, 1.0, 0.2, 0.2, -1.0])
    out = call(GROUP, impl.grpo.compute_group_advantages, rewards, 4, normalize=False)
    check_result(
        out.reshape(-1, 4).sum(dim=1) if isinstance(out, torch.Tensor) and out.numel() == 8 else out,
        torch.zeros(2),
        what="per-group sums of compute_group_advantages(normalize=False) (each group should sum to 0)",
        section=GROUP,
    )


def test_compute_group_advantages_inputs_unmodified(impl):
    rewards = TWO_BY_THREE.clone()
    before = {"rewards": rewards.clone()}
    call(GROUP, impl.grpo.compute_group_advantages, rewards, 3)
    check_unmodified(before, {"rewards": rewards}, what="compute_group_advantages", section=GROUP)


# ----------------------------------------------------------------------------- grpo_loss


def grpo_loss_mistakes(logprobs, advantages):
    lp, a = logprobs.double(), advantages.double()
    mistakes = {
        "wrong sign (loss = -mean(A * logprobs))": (a * lp).mean(),
        "sum instead of mean over the batch": -(a * lp).sum(),
        "used exp(logprobs) (probabilities) instead of log-probs": -(a * lp.exp()).mean(),
        "advantages left out (plain mean of log-probs)": -lp.mean(),
    }
    return {k: v.to(logprobs.dtype) for k, v in mistakes.items()}


def test_grpo_loss_hand_computed(impl):
    """-(1/4) * (1*(-2) + (-1)*(-3) + 0.5*(-1) + (-0.5)*(-4)) = -(2.5)/4 = -0.625."""
    logprobs = torch.tensor([-2.0, -3.0, -1.0, -4.0])
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])
    out = call(LOSS, impl.grpo.grpo_loss, logprobs, advantages)
    check_result(
        out,
        torch.tensor(-0.625),
        what="grpo_loss on the hand-computed example",
        section=LOSS,
        mistakes=grpo_loss_mistakes(logprobs, advantages),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [2, 12, 256])
def test_grpo_loss_random_inputs(impl, answer, dtype, n):
    g = torch.Generator().manual_seed(n)
    logprobs = (torch.rand(n, generator=g, dtype=torch.float64) * -300).to(dtype)
    advantages = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
    out = call(LOSS, impl.grpo.grpo_loss, logprobs, advantages)
    expected = (-(advantages.double() * logprobs.double()).mean()).to(dtype)
    what = f"grpo_loss on random {dtype} inputs, N={n}"
    check_result(out, expected, what=what, section=LOSS, mistakes=grpo_loss_mistakes(logprobs, advantages))
    check_result(out, answer.grpo.grpo_loss(logprobs, advantages), what=what + " (vs. answer key)", section=LOSS)


def test_grpo_loss_gradients(impl):
    """d loss / d logprobs = -A / N; no gradient may reach the advantages."""
    logprobs = torch.tensor([-2.0, -3.0, -1.0, -4.0], requires_grad=True)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5], requires_grad=True)
    out = call(LOSS, impl.grpo.grpo_loss, logprobs, advantages)
    if not (isinstance(out, torch.Tensor) and out.requires_grad):
        pytest.fail(
            f"grpo_loss: the result carries no gradient to logprobs; do not detach the log-probs. Reread TASKS.md {LOSS}.",
            pytrace=False,
        )
    out.sum().backward()
    check_no_grad(
        advantages, what="grpo_loss: advantages", section=LOSS, mistake="missing detach: use advantages.detach()"
    )
    check_result(
        logprobs.grad,
        torch.tensor([-0.25, 0.25, -0.125, 0.125]),
        what="gradient of grpo_loss w.r.t. logprobs",
        section=LOSS,
        mistakes={
            "wrong sign": torch.tensor([0.25, -0.25, 0.125, -0.125]),
            "sum instead of mean": torch.tensor([-1.0, 1.0, -0.5, 0.5]),
        },
    )


def test_grpo_loss_zero_advantages_give_zero(impl):
    logprobs = torch.tensor([-250.0, -310.0, -120.0])
    out = call(LOSS, impl.grpo.grpo_loss, logprobs, torch.zeros(3))
    check_result(out, torch.tensor(0.0), what="grpo_loss with all advantages 0", section=LOSS)


def test_grpo_loss_inputs_unmodified(impl):
    logprobs = torch.tensor([-2.0, -3.0, -1.0, -4.0])
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])
    before = {"logprobs": logprobs.clone(), "advantages": advantages.clone()}
    call(LOSS, impl.grpo.grpo_loss, logprobs, advantages)
    check_unmodified(before, {"logprobs": logprobs, "advantages": advantages}, what="grpo_loss", section=LOSS)
