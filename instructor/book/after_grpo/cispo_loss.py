"""The grading book of cispo_loss (rlhf_practice/rl/after_grpo.py, TASKS.md §14.5): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.after_grpo._shared import (
    ADVANTAGES_NOT_DETACHED,
    BETWEEN_BANDS,
    GRAD_NAMES,
    LOSS_NAMES,
    WIDE_BANDS,
    _book_replies,
    _fresh_replies,
    _k3,
    _own,
    _random_replies,
    _with_empty_reply,
    _zero_grads,
)
from instructor.cases import DTYPES, _adder, _name, cases_of
from instructor.mistakes import right, wrong

# ================ cispo_loss (TASKS.md §14.5) =======================================================================

# --- its cases


@cases_of("cispo_loss")
def cispo_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "cispo_loss", fresh)

    def inputs(tensors, high, beta):
        return [*zip(LOSS_NAMES, tensors), ("clip_range_high", high), ("beta", beta)]

    book, example = _book_replies(), "the §14.5 example"
    if fresh:
        book, example = _fresh_replies(g), "a fresh variant of the §14.5 example"
    args = inputs(book, 0.28, 0.1)
    add("book_example", f"cispo_loss on {example} (clip_range_high=0.28, beta=0.1)", args, book="§14.5")
    add(
        "gradient",
        f"cispo_loss on {example}, every input requiring grad: d loss / d logprobs = (-w * A + beta * d k3) / tokens",
        args,
        grad_of=GRAD_NAMES,
        grads=_zero_grads(key.after_grpo.cispo_loss, args),
    )
    zero_kl = inputs(book, 0.28, 0.0)
    add(
        "gradient_beta_0",
        f"cispo_loss on {example} with beta=0: d loss / d logprobs = -w * A / tokens, every token's",
        zero_kl,
        grad_of=GRAD_NAMES,
        grads=_zero_grads(key.after_grpo.cispo_loss, zero_kl),
    )
    add("inputs_unmodified", "cispo_loss", args, unmodified=True)
    rng = g if fresh else _own(1405)
    for dtype in DTYPES:
        for rows, num_tokens in ((4, 6), (16, 12)):
            tensors = _random_replies(rng, rows, num_tokens, WIDE_BANDS + BETWEEN_BANDS, dtype)
            add(
                f"random_{_name(dtype)}_{rows}x{num_tokens}",
                f"cispo_loss on random {dtype} inputs of shape ({rows}, {num_tokens}), clip_range_high=0.28",
                inputs(tensors, 0.28, 0.04),
            )
            add(
                f"random_{_name(dtype)}_{rows}x{num_tokens}_gradient",
                f"cispo_loss on random {dtype} inputs of shape ({rows}, {num_tokens}), clip_range_high=0.28, every "
                "input requiring grad",
                inputs(tensors, 0.28, 0.04),
                grad_of=GRAD_NAMES,
                grads=_zero_grads(key.after_grpo.cispo_loss, inputs(tensors, 0.28, 0.04)),
            )
    four, where = _with_empty_reply(book, g, fresh)
    args = inputs(four, 0.28, 0.1)
    what = f"cispo_loss on {example} with a fourth reply, {where}, that has no real token"
    add("all_masked_reply", f"{what}: it adds no token", args)
    add(
        "all_masked_reply_gradient",
        f"{what}: the gradient is finite (0 there)",
        args,
        grad_of=GRAD_NAMES,
        grads=_zero_grads(key.after_grpo.cispo_loss, args),
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _cispo(lp, ref, adv, mask, weight, beta):
    """CISPO's loss with the importance weight given, for the variants whose mistake lies in it."""
    per_token = -weight * adv.detach().unsqueeze(1) * lp + beta * _k3(lp, ref.detach())
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


@right("cispo_loss")
def cispo_no_grad_weight(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_high, beta):
    with torch.no_grad():
        weight = torch.exp(logprobs - old_logprobs).clamp(max=1 + clip_range_high)
    d = ref_logprobs.detach() - logprobs
    per_token = beta * (d.exp() - d - 1) - weight * advantages.detach()[:, None] * logprobs
    return per_token.mul(mask).sum() / mask.sum().clamp(min=1)


@wrong(
    "cispo_loss",
    "the importance weight w is not detached, so gradient flows through it; CISPO stops its gradient "
    "(w = min(ratio, 1 + clip_range_high).detach()) and keeps only the REINFORCE term's",
)
def cispo_weight_not_detached(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_high, beta):
    weight = torch.clamp(torch.exp(logprobs - old_logprobs.detach()), max=1 + clip_range_high)
    return _cispo(logprobs, ref_logprobs, advantages, mask, weight, beta)


@wrong(
    "cispo_loss",
    "the loss clipped PPO-style (-min(ratio * A, clamp(ratio) * A)): tokens out of the range lose their gradient; "
    "CISPO clips the weight instead, -w * A * logprobs with w = min(ratio, 1 + clip_range_high).detach()",
)
def cispo_ppo_style_clip(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_high, beta):
    ratio = torch.exp(logprobs - old_logprobs.detach())
    a = advantages.detach().unsqueeze(1)
    surrogate = torch.min(ratio * a, torch.clamp(ratio, max=1 + clip_range_high) * a)
    per_token = -surrogate + beta * _k3(logprobs, ref_logprobs.detach())
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


@wrong(
    "cispo_loss",
    "ratio * A in place of w * A * logprobs: the loss is -w * A * logprobs (w a constant), whose gradient is "
    "-w * A * grad log pi",
)
def cispo_ratio_times_a(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_high, beta):
    weight = torch.clamp(torch.exp(logprobs - old_logprobs.detach()), max=1 + clip_range_high)
    per_token = -weight * advantages.detach().unsqueeze(1) + beta * _k3(logprobs, ref_logprobs.detach())
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


@wrong("cispo_loss", "the weight is not capped: w = min(ratio, 1 + clip_range_high)")
def cispo_weight_not_capped(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_high, beta):
    weight = torch.exp(logprobs - old_logprobs).detach()
    return _cispo(logprobs, ref_logprobs, advantages, mask, weight, beta)


@wrong(
    "cispo_loss",
    "a floor added to the weight: CISPO caps it at 1 + clip_range_high and sets no floor (w = min(ratio, 1 + eps_high))",
)
def cispo_weight_floored(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_high, beta):
    weight = torch.clamp(torch.exp(logprobs - old_logprobs), 1 - clip_range_high, 1 + clip_range_high).detach()
    return _cispo(logprobs, ref_logprobs, advantages, mask, weight, beta)


@wrong(
    "cispo_loss",
    "averaged per reply, then over replies; CISPO's loss is one mean over every real token of the batch, as 'dapo'",
)
def cispo_mean_per_reply(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_high, beta):
    weight = torch.clamp(torch.exp(logprobs - old_logprobs), max=1 + clip_range_high).detach()
    per_token = -weight * advantages.detach().unsqueeze(1) * logprobs + beta * _k3(logprobs, ref_logprobs.detach())
    return ((per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()


@wrong("cispo_loss", "KL term missing or with its sign flipped: the loss ADDS beta * k3 at every real token")
def cispo_kl_sign(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_high, beta):
    weight = torch.clamp(torch.exp(logprobs - old_logprobs), max=1 + clip_range_high).detach()
    return _cispo(logprobs, ref_logprobs, advantages, mask, weight, -beta)


@wrong("cispo_loss", ADVANTAGES_NOT_DETACHED)
def cispo_advantages_not_detached(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_high, beta):
    weight = torch.clamp(torch.exp(logprobs - old_logprobs), max=1 + clip_range_high).detach()
    per_token = -weight * advantages.unsqueeze(1) * logprobs + beta * _k3(logprobs, ref_logprobs.detach())
    return (per_token * mask).sum() / mask.sum().clamp(min=1)
