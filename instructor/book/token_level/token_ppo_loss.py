"""The grading book of token_ppo_loss (rlhf_practice/rl/token_level.py, TASKS.md §8.3): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.token_level._inputs import RATIO_BANDS, _junk, _mask, _random_mask, _very_unlikely
from instructor.cases import DTYPES, F64, _adder, _bands, _grad, _grads_of, _name, _uniform, cases_of
from instructor.mistakes import KEY, right, wrong

# the key's helpers, which a variant may call (never the student's files' own)
masked_mean = KEY.token_level.masked_mean


# ================ token_ppo_loss (TASKS.md §8.3) ====================================================================

# --- its cases


TOKEN_PPO_NAMES = ("new_logprobs", "old_logprobs", "advantages", "new_values", "old_values", "returns", "mask")


def _token_ppo_book():
    """TASKS.md §8.3: two replies of 3 and 2 tokens (the third column of reply 2 is padding)."""
    mask = _mask([3, 2], 3)
    old = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.5, -2.0]], dtype=F64)
    new = old + torch.log(torch.tensor([[1.5, 0.5, 1.0], [0.5, 1.5, 9.0]], dtype=F64))
    adv = torch.tensor([[1.0, 1.0, 0.5], [-1.0, -1.0, 5.0]], dtype=F64)
    new_v = torch.tensor([[0.5, 0.0, 1.0], [0.3, 0.2, 7.0]], dtype=F64)
    old_v = torch.tensor([[0.2, 0.1, 0.9], [0.3, 0.5, 7.0]], dtype=F64)
    ret = torch.tensor([[1.0, -1.0, 1.0], [0.0, 0.5, 3.0]], dtype=F64)
    return new, old, adv, new_v, old_v, ret, mask


def _token_ppo_fresh(g: torch.Generator):
    """A fresh variant of the §8.3 example: two replies of 3 and 2 tokens, in a drawn order, ratios below,
    inside and above the clip range, value changes inside and outside both value clip ranges (0.2, 0.5),
    junk in the padding."""
    mask = _mask([[3, 2], [2, 3]][int(torch.randint(0, 2, (), generator=g))], 3)
    old = _uniform(g, -4, -0.2, 2, 3)
    new = old + torch.log(_junk(_bands(g, RATIO_BANDS, 2, 3), mask, _uniform(g, 5, 10, 1).item()))
    adv = _junk(_uniform(g, -1.5, 1.5, 2, 3), mask, 5.0)
    old_v = _uniform(g, -1, 1, 2, 3)
    new_v = old_v + _bands(g, [(-0.9, -0.6), (-0.45, -0.25), (-0.15, 0.15), (0.25, 0.45), (0.6, 0.9)], 2, 3)
    ret = _junk(_uniform(g, -1, 1, 2, 3), mask, _uniform(g, 2, 5, 1).item())
    return new, old, adv, new_v, old_v, ret, mask


@cases_of("token_ppo_loss")
def token_ppo_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "token_ppo_loss", fresh, outputs=["policy_loss", "value_loss"])

    def inputs(tensors, clip, clip_v):
        return [*zip(TOKEN_PPO_NAMES, tensors), ("clip_range", clip), ("clip_range_value", clip_v)]

    book, example = _token_ppo_book(), "the §8.3 example"
    if fresh:
        book, example = _token_ppo_fresh(g), "a fresh variant of the §8.3 example"
    add(
        "book_example",
        f"token_ppo_loss on {example} (clip_range=0.2, clip_range_value=0.2)",
        inputs(book, 0.2, 0.2),
        book="§8.3",
    )
    add(
        "book_example_clip_0.1_0.5",
        f"token_ppo_loss on {example} (clip_range=0.1, clip_range_value=0.5)",
        inputs(book, 0.1, 0.5),
    )
    names = ["new_logprobs", "new_values", "old_logprobs", "old_values", "advantages", "returns"]
    right = _grads_of(key.token_level.token_ppo_loss, inputs(book, 0.2, 0.2), names)
    add(
        "gradients",
        f"token_ppo_loss on {example}, every input requiring grad",
        inputs(book, 0.2, 0.2),
        grad_of=names,
        grads={"new_logprobs": _grad(right["new_logprobs"]), "new_values": _grad(right["new_values"])},
    )
    add("inputs_unmodified", "token_ppo_loss", inputs(book, 0.2, 0.2), unmodified=True)
    for dtype in DTYPES:
        for rows, num_tokens in ((3, 4), (16, 12)):
            mask = _random_mask(g, rows, num_tokens, F64)
            old = -torch.rand(rows, num_tokens, generator=g, dtype=F64) * 5
            new = old + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.3
            adv = torch.randn(rows, num_tokens, generator=g, dtype=F64)
            old_v = torch.randn(rows, num_tokens, generator=g, dtype=F64)
            new_v = old_v + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.3
            ret = _junk(torch.randn(rows, num_tokens, generator=g, dtype=F64), mask, 9.0)
            add(
                f"random_{_name(dtype)}_{rows}x{num_tokens}",
                f"token_ppo_loss on random {dtype} inputs of shape ({rows}, {num_tokens})",
                inputs([t.to(dtype) for t in (new, old, adv, new_v, old_v, ret, mask)], 0.2, 0.2),
            )
    new, old, adv, new_v, old_v, ret, mask = (t.float() for t in book)
    old = _very_unlikely(g, fresh)
    add(
        "very_unlikely_tokens_stay_finite",
        f"token_ppo_loss in float32 on {example} with old log-probs from -200 to -120 (very unlikely tokens)",
        inputs((old + (new - book[1].float()), old, adv, new_v, old_v, ret, mask), 0.2, 0.2),
    )
    add(
        "no_real_token",
        f"token_ppo_loss on {example} with every position masked (no real token): both losses 0, not NaN",
        inputs((*book[:6], torch.zeros_like(book[6])), 0.2, 0.2),
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("token_ppo_loss")
def no_detach_own_mean(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    n = mask.sum().clamp(min=1)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.maximum((new_values - returns) ** 2, (vc - returns) ** 2)
    return (pg * mask).sum() / n, (vf * mask).sum() / n


@wrong("token_ppo_loss", "no ratio clipping (clamp the ratio to [1 - clip_range, 1 + clip_range])")
def no_ratio_clipping(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -ratio * advantages
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "wrong sign (the policy loss is MINUS the clipped objective)")
def policy_loss_without_the_minus(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "max instead of min in the clipped surrogate")
def token_max_instead_of_min(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.max(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "value loss keeps the smaller error (min); PPO keeps the larger one: max(unclipped, clipped)")
def value_min(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.min((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "value loss without clipping (clip new_values to old_values +- clip_range_value)")
def no_value_clip(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    return masked_mean(pg, mask), masked_mean((new_values - returns) ** 2, mask)


@wrong("token_ppo_loss", "value loss with a factor 1/2 (the book's value loss has none)")
def half_value_loss(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = 0.5 * torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "mean over padding: average over real tokens only (masked_mean)")
def token_mean_over_padding(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return (pg * mask).mean(), (vf * mask).mean()


@wrong("token_ppo_loss", "mean of per-reply means; token_ppo_loss averages over every real token of the batch")
def per_reply_mean(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask, 1).mean(), masked_mean(vf, mask, 1).mean()


@wrong("token_ppo_loss", "sum instead of mean over tokens")
def token_sum(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return (pg * mask).sum(), (vf * mask).sum()


@wrong("token_ppo_loss", "the two losses in the wrong order: return (policy_loss, value_loss)")
def returned_in_the_other_order(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(vf, mask), masked_mean(pg, mask)


@wrong(
    "token_ppo_loss",
    "ratio = exp(new_logprobs) / exp(old_logprobs) is 0 / 0 for very unlikely tokens; compute exp(new_logprobs - old_logprobs)",
)
def token_ratio_of_probabilities(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs) / torch.exp(old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)
