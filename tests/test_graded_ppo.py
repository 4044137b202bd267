"""Graded: compute_advantages (TASKS.md §1.2) and ppo_clip_loss (TASKS.md §2.2).

Run: ``pytest -m graded -k "compute_advantages or ppo_clip_loss"`` (add ``--impl answer`` for the key).
"""

from __future__ import annotations

import pytest
import torch
from _checks import call, check_no_grad, check_result, check_unmodified

pytestmark = pytest.mark.graded

ADV = "§1.2"
CLIP = "§2.2"
DTYPES = [torch.float32, torch.float64]


# ----------------------------------------------------------------------------- references


def ref_advantages(rewards, values, normalize=True, eps=1e-8, *, unbiased=True):
    a = rewards.double() - values.detach().double()
    if normalize:
        a = (a - a.mean()) / (a.std(unbiased=unbiased) + eps)
    return a.to(rewards.dtype)


def ref_clip_terms(new, old, adv, clip_range):
    ratio = torch.exp(new.double() - old.double())
    unclipped = ratio * adv.double()
    clipped = ratio.clamp(1 - clip_range, 1 + clip_range) * adv.double()
    return ratio, unclipped, clipped


def ref_clip_loss(new, old, adv, clip_range):
    _, unclipped, clipped = ref_clip_terms(new, old, adv, clip_range)
    return (-torch.min(unclipped, clipped).mean()).to(new.dtype)


def clip_loss_mistakes(new, old, adv, clip_range):
    """What common wrong versions of ppo_clip_loss would return on these inputs."""
    ratio, unclipped, clipped = ref_clip_terms(new, old, adv, clip_range)
    d = new.dtype
    inv = torch.exp(old.double() - new.double())
    mistakes = {
        "wrong sign (the loss is MINUS the mean of the clipped objective)": torch.min(unclipped, clipped).mean(),
        "max instead of min (PPO keeps the smaller, pessimistic objective)": -torch.max(unclipped, clipped).mean(),
        "no clipping (the ratio must be clamped to [1 - clip_range, 1 + clip_range])": -unclipped.mean(),
        "only the clipped term (take the min of the clipped and unclipped terms)": -clipped.mean(),
        "sum instead of mean over the batch": -torch.min(unclipped, clipped).sum(),
        "ratio inverted (ratio = exp(new_logprobs - old_logprobs), not old - new)": -torch.min(
            inv * adv.double(), inv.clamp(1 - clip_range, 1 + clip_range) * adv.double()
        ).mean(),
        "ratio without exp (ratio = exp(new - old); the log-probs are logs)": -torch.min(
            (new.double() - old.double()) * adv.double(),
            (new.double() - old.double()).clamp(1 - clip_range, 1 + clip_range) * adv.double(),
        ).mean(),
        "clip_range ignored (a fixed 0.2 is used instead of the clip_range argument)": ref_clip_loss(
            new, old, adv, 0.2
        ),
        "clamp range is [-clip_range, clip_range] instead of [1 - clip_range, 1 + clip_range]": -torch.min(
            unclipped, ratio.clamp(-clip_range, clip_range) * adv.double()
        ).mean(),
    }
    if clip_range == 0.2:
        del mistakes["clip_range ignored (a fixed 0.2 is used instead of the clip_range argument)"]
    return {k: v.to(d) for k, v in mistakes.items()}


def adv_mistakes(rewards, values, normalize=True, eps=1e-8):
    a = rewards.double() - values.double()
    mistakes = {
        "normalize flag ignored (with normalize=False return rewards - values unchanged)": ref_advantages(
            rewards, values, not normalize, eps
        ),
        "wrong sign (A = rewards - values, not values - rewards)": ref_advantages(values, rewards, normalize, eps),
        "population std (use torch's default unbiased std, as a.std())": ref_advantages(
            rewards, values, normalize, eps, unbiased=False
        ),
        "divided by the std without subtracting the mean first": (a / (a.std() + eps)).to(rewards.dtype),
        "subtracted the mean but did not divide by the std": (a - a.mean()).to(rewards.dtype),
        "rewards alone (the value baseline V(s) was not subtracted)": (
            (rewards.double() - rewards.double().mean()) / (rewards.double().std() + eps)
        ).to(rewards.dtype),
    }
    if not normalize:
        for key in list(mistakes)[2:]:
            del mistakes[key]
    return mistakes


# ----------------------------------------------------------------------------- compute_advantages


def test_compute_advantages_hand_computed(impl):
    """A = R - V = [0.5, -0.5, 0.5, -1]: mean -0.125, unbiased std 0.75."""
    rewards = torch.tensor([1.0, 0.0, 0.5, -1.0])
    values = torch.tensor([0.5, 0.5, 0.0, 0.0])
    out = call(ADV, impl.ppo.compute_advantages, rewards, values)
    expected = torch.tensor([0.625, -0.375, 0.625, -0.875]) / 0.75
    check_result(
        out, expected, what="compute_advantages(rewards, values)", section=ADV, mistakes=adv_mistakes(rewards, values)
    )


def test_compute_advantages_without_normalize(impl):
    rewards = torch.tensor([1.0, 0.0, 0.5, -1.0])
    values = torch.tensor([0.5, 0.5, 0.0, 0.0])
    out = call(ADV, impl.ppo.compute_advantages, rewards, values, normalize=False)
    check_result(
        out,
        torch.tensor([0.5, -0.5, 0.5, -1.0]),
        what="compute_advantages(rewards, values, normalize=False)",
        section=ADV,
        mistakes=adv_mistakes(rewards, values, normalize=False),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5,), (64,), (257,), (4, 8)])
@pytest.mark.parametrize("normalize", [True, False])
def test_compute_advantages_random_inputs(impl, answer, dtype, shape, normalize):
    g = torch.Generator().manual_seed(hash((shape, normalize)) % 2**31)
    rewards = torch.rand(shape, generator=g, dtype=torch.float64).mul(2).sub(1).to(dtype)
    values = torch.randn(shape, generator=g, dtype=torch.float64).mul(0.5).to(dtype)
    out = call(ADV, impl.ppo.compute_advantages, rewards, values, normalize=normalize)
    what = f"compute_advantages on random {dtype} inputs of shape {shape}, normalize={normalize}"
    check_result(
        out,
        ref_advantages(rewards, values, normalize),
        what=what,
        section=ADV,
        mistakes=adv_mistakes(rewards, values, normalize),
    )
    check_result(
        out,
        answer.ppo.compute_advantages(rewards, values, normalize=normalize),
        what=what + " (vs. answer key)",
        section=ADV,
    )


@pytest.mark.parametrize("normalize", [True, False])
def test_compute_advantages_no_gradient_to_values(impl, normalize):
    rewards = torch.tensor([1.0, -0.5, 0.25, 0.0, 0.75])
    values = torch.tensor([0.1, 0.2, -0.3, 0.4, 0.0], requires_grad=True)
    out = call(ADV, impl.ppo.compute_advantages, rewards, values, normalize=normalize)
    if out.requires_grad:
        (out * torch.arange(1.0, 6.0)).sum().backward()
    check_no_grad(
        values,
        what="compute_advantages: values",
        section=ADV,
        mistake="missing detach: use values.detach(), the advantages are constants for the policy update",
    )


def test_compute_advantages_inputs_unmodified(impl):
    rewards = torch.tensor([1.0, -0.5, 0.25, 0.0])
    values = torch.tensor([0.1, 0.2, -0.3, 0.4])
    before = {"rewards": rewards.clone(), "values": values.clone()}
    call(ADV, impl.ppo.compute_advantages, rewards, values)
    check_unmodified(before, {"rewards": rewards, "values": values}, what="compute_advantages", section=ADV)


def test_compute_advantages_constant_gives_zeros_not_nan(impl):
    """All advantages equal: std is 0, and (A - mean) / (0 + eps) must be 0, not NaN."""
    rewards = torch.tensor([0.7, 0.7, 0.7, 0.7])
    values = torch.zeros(4)
    out = call(ADV, impl.ppo.compute_advantages, rewards, values)
    check_result(
        out,
        torch.zeros(4),
        what="compute_advantages with all advantages equal",
        section=ADV,
        hint="NaN from a zero std: divide by (std + eps), with the eps argument.",
    )


# ----------------------------------------------------------------------------- ppo_clip_loss


def hand_case():
    """ratio = [1.5, 0.5, 1.1, 0.7], A = [2, 1, -1, -0.5], clip_range 0.2.

    min terms: min(3, 2.4) = 2.4; min(0.5, 0.8) = 0.5; min(-1.1, -1.1) = -1.1; min(-0.35, -0.4) = -0.4
    loss = -(2.4 + 0.5 - 1.1 - 0.4) / 4 = -0.35
    """
    old = torch.tensor([-3.0, -2.0, -4.0, -1.0], dtype=torch.float64)
    new = old + torch.log(torch.tensor([1.5, 0.5, 1.1, 0.7], dtype=torch.float64))
    adv = torch.tensor([2.0, 1.0, -1.0, -0.5], dtype=torch.float64)
    return new, old, adv


def test_ppo_clip_loss_hand_computed(impl):
    new, old, adv = hand_case()
    out = call(CLIP, impl.ppo.ppo_clip_loss, new, old, adv, 0.2)
    check_result(
        out,
        torch.tensor(-0.35, dtype=torch.float64),
        what="ppo_clip_loss on the hand-computed example (ratios 1.5, 0.5, 1.1, 0.7)",
        section=CLIP,
        mistakes=clip_loss_mistakes(new, old, adv, 0.2),
    )


def test_ppo_clip_loss_gradient_hand_computed(impl):
    """d loss / d new_logprobs = -(1/N) * ratio * A where the unclipped term is the min, else 0."""
    new, old, adv = hand_case()
    new = new.clone().requires_grad_(True)
    out = call(CLIP, impl.ppo.ppo_clip_loss, new, old, adv, 0.2)
    if not (isinstance(out, torch.Tensor) and out.requires_grad):
        pytest.fail(
            f"ppo_clip_loss: the result carries no gradient to new_logprobs; do not detach new_logprobs. Reread TASKS.md {CLIP}.",
            pytrace=False,
        )
    out.sum().backward()
    expected = torch.tensor([0.0, -0.125, 0.275, 0.0], dtype=torch.float64)
    check_result(
        new.grad,
        expected,
        what="gradient of ppo_clip_loss w.r.t. new_logprobs (clipped samples must get 0)",
        section=CLIP,
        mistakes={
            "no clipping: clipped samples still pass gradient": torch.tensor(
                [-0.75, -0.125, 0.275, -0.0875], dtype=torch.float64
            ),
            "wrong sign": -expected,
        },
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [3, 64, 500])
@pytest.mark.parametrize("clip_range", [0.1, 0.2, 0.3])
def test_ppo_clip_loss_random_inputs(impl, answer, dtype, n, clip_range):
    g = torch.Generator().manual_seed(n * 1000 + int(clip_range * 10))
    old = (torch.rand(n, generator=g, dtype=torch.float64) * -30).to(dtype)
    new = (old.double() + torch.randn(n, generator=g, dtype=torch.float64) * 0.3).to(dtype)
    adv = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
    out = call(CLIP, impl.ppo.ppo_clip_loss, new, old, adv, clip_range)
    what = f"ppo_clip_loss on random {dtype} inputs, N={n}, clip_range={clip_range}"
    check_result(
        out,
        ref_clip_loss(new, old, adv, clip_range),
        what=what,
        section=CLIP,
        mistakes=clip_loss_mistakes(new, old, adv, clip_range),
    )
    check_result(
        out, answer.ppo.ppo_clip_loss(new, old, adv, clip_range), what=what + " (vs. answer key)", section=CLIP
    )


@pytest.mark.parametrize("clip_range", [0.1, 0.3])
def test_ppo_clip_loss_other_clip_ranges(impl, clip_range):
    new, old, adv = hand_case()
    out = call(CLIP, impl.ppo.ppo_clip_loss, new, old, adv, clip_range)
    check_result(
        out,
        ref_clip_loss(new, old, adv, clip_range),
        what=f"ppo_clip_loss with clip_range={clip_range}",
        section=CLIP,
        mistakes=clip_loss_mistakes(new, old, adv, clip_range),
    )


def test_ppo_clip_loss_gradient_only_to_new_logprobs(impl):
    new, old, adv = hand_case()
    new = new.clone().requires_grad_(True)
    old = old.clone().requires_grad_(True)
    adv = adv.clone().requires_grad_(True)
    out = call(CLIP, impl.ppo.ppo_clip_loss, new, old, adv, 0.2)
    if isinstance(out, torch.Tensor) and out.requires_grad:
        out.sum().backward()
    check_no_grad(
        adv,
        what="ppo_clip_loss: advantages",
        section=CLIP,
        mistake="missing detach: the advantages are constants, use advantages.detach()",
    )
    check_no_grad(
        old,
        what="ppo_clip_loss: old_logprobs",
        section=CLIP,
        mistake="missing detach: the old policy's log-probs are constants, use old_logprobs.detach()",
    )
    if new.grad is None or new.grad.abs().sum() == 0:
        pytest.fail(
            f"ppo_clip_loss: no gradient reached new_logprobs; the loss must depend on them. Reread TASKS.md {CLIP}.",
            pytrace=False,
        )


def test_ppo_clip_loss_sequence_level_logprobs_stay_finite(impl):
    """Summed log-probs of a reply are around -300: exp(-300) underflows, exp(new - old) does not."""
    old = torch.tensor([-300.0, -310.0, -295.5, -305.0])
    new = old + torch.tensor([0.05, -0.3, 0.4, 0.0])
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    out = call(CLIP, impl.ppo.ppo_clip_loss, new, old, adv, 0.2)
    check_result(
        out,
        ref_clip_loss(new, old, adv, 0.2),
        what="ppo_clip_loss with log-probs around -300",
        section=CLIP,
        mistakes=clip_loss_mistakes(new, old, adv, 0.2),
        hint="Compute ratio = exp(new_logprobs - old_logprobs); exp(new) / exp(old) is 0 / 0 here.",
    )


@pytest.mark.parametrize("value", [1.0, -2.0])
def test_ppo_clip_loss_constant_advantages(impl, value):
    old = torch.tensor([-5.0, -6.0, -7.0, -8.0, -9.0])
    new = old + torch.log(torch.tensor([0.6, 0.9, 1.0, 1.1, 1.4]))
    adv = torch.full((5,), value)
    out = call(CLIP, impl.ppo.ppo_clip_loss, new, old, adv, 0.2)
    check_result(
        out,
        ref_clip_loss(new, old, adv, 0.2),
        what=f"ppo_clip_loss with every advantage = {value}",
        section=CLIP,
        mistakes=clip_loss_mistakes(new, old, adv, 0.2),
    )


def test_ppo_clip_loss_ratio_one_gives_minus_mean_advantage(impl):
    """new == old: ratio = 1 everywhere, so loss = -mean(A)."""
    old = torch.tensor([-12.0, -40.0, -7.5])
    adv = torch.tensor([0.5, -1.5, 2.5])
    out = call(CLIP, impl.ppo.ppo_clip_loss, old.clone(), old, adv, 0.2)
    check_result(
        out,
        torch.tensor(-0.5),
        what="ppo_clip_loss with new_logprobs == old_logprobs",
        section=CLIP,
        mistakes={"wrong sign": torch.tensor(0.5), "sum instead of mean": torch.tensor(-1.5)},
    )


def test_ppo_clip_loss_inputs_unmodified(impl):
    new, old, adv = hand_case()
    before = {"new_logprobs": new.clone(), "old_logprobs": old.clone(), "advantages": adv.clone()}
    call(CLIP, impl.ppo.ppo_clip_loss, new, old, adv, 0.2)
    check_unmodified(
        before, {"new_logprobs": new, "old_logprobs": old, "advantages": adv}, what="ppo_clip_loss", section=CLIP
    )
