"""The grading book of clip_higher_loss (rlhf_practice/rl/after_grpo.py, TASKS.md §14.3): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.after_grpo._shared import (
    ADVANTAGES_NOT_DETACHED,
    BETWEEN_BANDS,
    GRAD_NAMES,
    LOSS_NAMES,
    OLD_NOT_DETACHED,
    WIDE_BANDS,
    _book_replies,
    _fresh_replies,
    _k3,
    _own,
    _random_replies,
    _reduce,
    _with_empty_reply,
    _zero_grads,
)
from instructor.cases import DTYPES, _adder, _name, cases_of
from instructor.mistakes import KEY, right, wrong

after_grpo = KEY.after_grpo


# ================ clip_higher_loss (TASKS.md §14.3) =================================================================

# --- its cases


@cases_of("clip_higher_loss")
def clip_higher_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "clip_higher_loss", fresh)

    def inputs(tensors, low, high, beta, loss_type, max_tokens):
        return [
            *zip(LOSS_NAMES, tensors),
            ("clip_range_low", low),
            ("clip_range_high", high),
            ("beta", beta),
            ("loss_type", loss_type),
            ("max_tokens", max_tokens),
        ]

    book, example = _book_replies(), "the §14.3 example"
    if fresh:
        book, example = _fresh_replies(g), "a fresh variant of the §14.3 example"
    for loss_type in ("grpo", "dapo", "dr_grpo"):
        args = inputs(book, 0.2, 0.28, 0.1, loss_type, 4)
        add(
            f"book_example_{loss_type}",
            f"clip_higher_loss on {example} (clip_range_low=0.2, clip_range_high=0.28, beta=0.1, "
            f"loss_type={loss_type!r}, max_tokens=4)",
            args,
            book="§14.3",
        )
        add(
            f"gradient_{loss_type}",
            f"clip_higher_loss on {example} (loss_type={loss_type!r}), every input requiring grad",
            args,
            grad_of=GRAD_NAMES,
            grads=_zero_grads(key.after_grpo.clip_higher_loss, args),
        )
    add(
        "ranges_apart",
        f"clip_higher_loss on {example} with clip_range_low=0.3, clip_range_high=0.1 (a floor of 0.7, a ceiling of "
        "1.1), beta=0, loss_type='dapo'",
        inputs(book, 0.3, 0.1, 0.0, "dapo", 4),
    )
    add("inputs_unmodified", "clip_higher_loss", inputs(book, 0.2, 0.28, 0.1, "grpo", 4), unmodified=True)
    for loss_type in ("dr-grpo", "cispo"):
        add(
            f"unknown_loss_type_{loss_type}",
            f"clip_higher_loss with loss_type={loss_type!r} (only 'grpo', 'dapo' and 'dr_grpo' are known: any other "
            "raises ValueError)",
            inputs(book, 0.2, 0.28, 0.1, loss_type, 4),
            raises="ValueError",
        )
    rng = g if fresh else _own(1403)
    for dtype in DTYPES:
        for rows, num_tokens in ((4, 6), (16, 12)):
            for loss_type in ("grpo", "dapo", "dr_grpo"):
                tensors = _random_replies(rng, rows, num_tokens, WIDE_BANDS + BETWEEN_BANDS, dtype)
                add(
                    f"random_{_name(dtype)}_{rows}x{num_tokens}_{loss_type}",
                    f"clip_higher_loss on random {dtype} inputs of shape ({rows}, {num_tokens}), clip ranges 0.2 and "
                    f"0.28, loss_type={loss_type!r}",
                    inputs(tensors, 0.2, 0.28, 0.04, loss_type, num_tokens + 4),
                )
    four, where = _with_empty_reply(book, g, fresh)
    args = inputs(four, 0.2, 0.28, 0.1, "grpo", 4)
    what = f"clip_higher_loss (loss_type='grpo') on {example} with a fourth reply, {where}, that has no real token"
    add("all_masked_reply", f"{what}: its mean is 0", args)
    add(
        "all_masked_reply_gradient",
        f"{what}: the gradient is finite (0 there)",
        args,
        grad_of=GRAD_NAMES,
        grads=_zero_grads(key.after_grpo.clip_higher_loss, args),
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _clip_higher(lp, old, ref, adv, mask, floor, ceiling, beta, loss_type, max_tokens, *, against=None, pick=None):
    """The per-token clip-higher loss reduced by loss_type, with the ratio's bounds given: for the variants whose
    mistake is in the clip (``against``: the ratio's denominator, default old; ``pick``: min, default)."""
    ratio = torch.exp(lp - (old if against is None else against).detach())
    a = adv.detach().unsqueeze(1)
    surrogate = (pick or torch.min)(ratio * a, torch.clamp(ratio, floor, ceiling) * a)
    return _reduce(-surrogate + beta * _k3(lp, ref.detach()) * mask, mask, loss_type, max_tokens)


@right("clip_higher_loss")
def clip_higher_where_by_sign(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    ratio = (logprobs - old_logprobs.detach()).exp()
    a = advantages.detach()[:, None]
    # min(r * A, clip(r) * A): for A >= 0 the ratio is capped above only, for A < 0 floored below only
    bounded = torch.where(a >= 0, ratio.clamp(max=1 + clip_range_high), ratio.clamp(min=1 - clip_range_low))
    d = ref_logprobs.detach() - logprobs
    loss = (-bounded * a + beta * (d.exp() - d - 1)) * mask
    if loss_type == "grpo":
        return (loss.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    if loss_type == "dapo":
        return loss.sum() / mask.sum().clamp(min=1)
    if loss_type == "dr_grpo":
        return loss.sum() / (loss.shape[0] * max_tokens)
    raise ValueError(loss_type)


@right("clip_higher_loss")
def clip_higher_other_order(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    a = advantages.detach().unsqueeze(1)
    ratio = torch.exp(logprobs - old_logprobs.detach())
    clipped = ratio.clamp(min=1 - clip_range_low).clamp(max=1 + clip_range_high)
    per_token = beta * _k3(logprobs, ref_logprobs.detach()) - torch.minimum(a * ratio, a * clipped)
    return _reduce(per_token, mask, loss_type, max_tokens)


@wrong(
    "clip_higher_loss",
    "clip ranges swapped: the floor is 1 - clip_range_low and the ceiling 1 + clip_range_high",
)
def clip_higher_ranges_swapped(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    floor, ceiling = 1 - clip_range_high, 1 + clip_range_low
    return _clip_higher(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, floor, ceiling, beta, loss_type, max_tokens
    )


@wrong(
    "clip_higher_loss",
    "clip_range_high ignored: the ceiling is 1 + clip_range_high (not clip_range_low on both sides)",
)
def clip_higher_ignores_high(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    floor, ceiling = 1 - clip_range_low, 1 + clip_range_low
    return _clip_higher(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, floor, ceiling, beta, loss_type, max_tokens
    )


@wrong(
    "clip_higher_loss",
    "clip_range_low ignored: the floor is 1 - clip_range_low (not clip_range_high on both sides)",
)
def clip_higher_ignores_low(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    floor, ceiling = 1 - clip_range_high, 1 + clip_range_high
    return _clip_higher(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, floor, ceiling, beta, loss_type, max_tokens
    )


@wrong(
    "clip_higher_loss",
    "clamped ratio * A instead of the ratio: clamp(ratio, 1 - clip_range_low, 1 + clip_range_high), then times A",
)
def clip_higher_clamps_ratio_times_a(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs.detach())
    a = advantages.detach().unsqueeze(1)
    surrogate = torch.min(ratio * a, torch.clamp(ratio * a, 1 - clip_range_low, 1 + clip_range_high))
    per_token = -surrogate + beta * _k3(logprobs, ref_logprobs.detach()) * mask
    return _reduce(per_token, mask, loss_type, max_tokens)


@wrong(
    "clip_higher_loss",
    "max instead of min: the clipped objective is the pessimistic min(ratio * A, clamp(ratio) * A)",
)
def clip_higher_max(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    floor, ceiling = 1 - clip_range_low, 1 + clip_range_high
    return _clip_higher(
        logprobs,
        old_logprobs,
        ref_logprobs,
        advantages,
        mask,
        floor,
        ceiling,
        beta,
        loss_type,
        max_tokens,
        pick=torch.max,
    )


@wrong(
    "clip_higher_loss",
    "ratio taken against the reference policy; the ratio is exp(logprobs - old_logprobs), the reference only enters "
    "the KL term",
)
def clip_higher_ratio_against_reference(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    floor, ceiling = 1 - clip_range_low, 1 + clip_range_high
    return _clip_higher(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, floor, ceiling, beta, loss_type, max_tokens,
        against=ref_logprobs,
    )  # fmt: skip


@wrong("clip_higher_loss", "KL term missing or with its sign flipped: the loss ADDS beta * k3 at every real token")
def clip_higher_kl_sign(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    floor, ceiling = 1 - clip_range_low, 1 + clip_range_high
    return _clip_higher(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, floor, ceiling, -beta, loss_type, max_tokens
    )


@wrong(
    "clip_higher_loss",
    "loss_type normalizations mixed up: 'grpo' is the mean of each reply's token mean, 'dapo' one mean over every real "
    "token, 'dr_grpo' the sum over N * max_tokens",
)
def clip_higher_grpo_dapo_swapped(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    swapped = {"grpo": "dapo", "dapo": "grpo"}.get(loss_type, loss_type)
    return after_grpo.clip_higher_loss(
        logprobs,
        old_logprobs,
        ref_logprobs,
        advantages,
        mask,
        clip_range_low,
        clip_range_high,
        beta,
        swapped,
        max_tokens,
    )


@wrong(
    "clip_higher_loss",
    "dr_grpo divided by N * T, the mask's rows times its columns; divide by N * max_tokens (the run's constant, not "
    "the batch's width)",
)
def clip_higher_dr_grpo_by_columns(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    return after_grpo.clip_higher_loss(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type,
        mask.shape[1],
    )  # fmt: skip


@wrong("clip_higher_loss", OLD_NOT_DETACHED)
def clip_higher_old_not_detached(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    surrogate = torch.min(ratio * a, torch.clamp(ratio, 1 - clip_range_low, 1 + clip_range_high) * a)
    return _reduce(-surrogate + beta * _k3(logprobs, ref_logprobs.detach()) * mask, mask, loss_type, max_tokens)


@wrong("clip_higher_loss", ADVANTAGES_NOT_DETACHED)
def clip_higher_advantages_not_detached(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs.detach())
    a = advantages.unsqueeze(1)
    surrogate = torch.min(ratio * a, torch.clamp(ratio, 1 - clip_range_low, 1 + clip_range_high) * a)
    return _reduce(-surrogate + beta * _k3(logprobs, ref_logprobs.detach()) * mask, mask, loss_type, max_tokens)


@wrong("clip_higher_loss", "instead of raising ValueError")
def clip_higher_unknown_loss_type_as_grpo(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    known = loss_type if loss_type in ("grpo", "dapo", "dr_grpo") else "grpo"
    return after_grpo.clip_higher_loss(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, known, max_tokens
    )


@wrong(
    "clip_higher_loss",
    "a reply with no real token (an all-zero mask row) divides 0 by 0 in loss_type 'grpo', so the loss is NaN; "
    "divide each reply's sum by mask.sum(dim=1).clamp(min=1), as the docstring's max(sum_t m_it, 1) says",
)
def clip_higher_divides_by_zero_length(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type, max_tokens
):
    if loss_type != "grpo":
        return KEY.after_grpo.clip_higher_loss(
            logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta, loss_type,
            max_tokens,
        )  # fmt: skip
    ratio = torch.exp(logprobs - old_logprobs.detach())
    a = advantages.detach().unsqueeze(1)
    surrogate = torch.min(ratio * a, torch.clamp(ratio, 1 - clip_range_low, 1 + clip_range_high) * a)
    loss = (-surrogate + beta * _k3(logprobs, ref_logprobs.detach())) * mask
    return (loss.sum(dim=1) / mask.sum(dim=1)).mean()
