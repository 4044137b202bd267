"""The grading book of gspo_loss (rlhf_practice/rl/after_grpo.py, TASKS.md §14.4): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.after_grpo._shared import (
    GRAD_NAMES,
    LOSS_NAMES,
    OLD_NOT_DETACHED,
    WIDE_BANDS,
    _book_replies,
    _fresh_replies,
    _k3,
    _own,
    _random_replies,
    _with_empty_reply,
    _zero_grads,
)
from instructor.book.token_level._inputs import _junk, _random_mask
from instructor.cases import DTYPES, F64, _adder, _name, cases_of
from instructor.mistakes import right, wrong

# ================ gspo_loss (TASKS.md §14.4) ========================================================================

# --- its cases

# Token log-ratios for GSPO's own ranges (3e-4 and 4e-4): a reply's mean log-ratio of a few 1e-4 lands below, inside
# or above them.
GSPO_STEPS = (-2e-3, 2e-3)


@cases_of("gspo_loss")
def gspo_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "gspo_loss", fresh)

    def inputs(tensors, low, high, beta):
        return [*zip(LOSS_NAMES, tensors), ("clip_range_low", low), ("clip_range_high", high), ("beta", beta)]

    book, example = _book_replies(), "the §14.4 example"
    if fresh:
        book, example = _fresh_replies(g), "a fresh variant of the §14.4 example"
    args = inputs(book, 0.2, 0.28, 0.1)
    add(
        "book_example",
        f"gspo_loss on {example} (clip_range_low=0.2, clip_range_high=0.28, beta=0.1)",
        args,
        book="§14.4",
    )
    add(
        "gradient",
        f"gspo_loss on {example}, every input requiring grad",
        args,
        grad_of=GRAD_NAMES,
        grads=_zero_grads(key.after_grpo.gspo_loss, args),
    )
    add("beta_0", f"gspo_loss on {example} with beta=0 (no KL term)", inputs(book, 0.2, 0.28, 0.0))
    add("inputs_unmodified", "gspo_loss", args, unmodified=True)
    rng = g if fresh else _own(1404)
    for dtype in DTYPES:
        for rows, num_tokens in ((4, 6), (16, 12)):
            mask = _random_mask(rng, rows, num_tokens, F64)
            old = -torch.rand(rows, num_tokens, generator=rng, dtype=F64) * 5
            step = GSPO_STEPS[0] + (GSPO_STEPS[1] - GSPO_STEPS[0]) * torch.rand(rows, 1, generator=rng, dtype=F64)
            lp = old + step * (0.5 + torch.rand(rows, num_tokens, generator=rng, dtype=F64))
            ref = _junk(old + torch.randn(rows, num_tokens, generator=rng, dtype=F64) * 0.5, mask, -30.0)
            adv = torch.randn(rows, generator=rng, dtype=F64)
            tensors = [t.to(dtype) for t in (lp, _junk(old, mask, -3.0), ref, adv, mask)]
            add(
                f"random_{_name(dtype)}_{rows}x{num_tokens}_paper_ranges",
                f"gspo_loss on random {dtype} inputs of shape ({rows}, {num_tokens}) with the paper's ranges "
                "(clip_range_low=3e-4, clip_range_high=4e-4), beta=0.04",
                inputs(tensors, 3e-4, 4e-4, 0.04),
            )
            tensors = _random_replies(rng, rows, num_tokens, WIDE_BANDS, dtype)
            add(
                f"random_{_name(dtype)}_{rows}x{num_tokens}_wide_ranges",
                f"gspo_loss on random {dtype} inputs of shape ({rows}, {num_tokens}), clip ranges 0.1 and 0.15",
                inputs(tensors, 0.1, 0.15, 0.04),
            )
    four, where = _with_empty_reply(book, g, fresh)
    args = inputs(four, 0.2, 0.28, 0.1)
    what = f"gspo_loss on {example} with a fourth reply, {where}, that has no real token (an all-zero mask row)"
    add("all_masked_reply", f"{what}: it adds -A_i, s_i = 1 there", args)
    add(
        "all_masked_reply_gradient",
        f"{what}: the gradient is finite",
        args,
        grad_of=GRAD_NAMES,
        grads=_zero_grads(key.after_grpo.gspo_loss, args),
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _gspo(
    lp, old, ref, adv, mask, floor, ceiling, beta, *, mean_log_ratio=None, kl=None, ratio_over=None, kl_over=None
):
    """GSPO with the clip's bounds given, for the variants whose mistake lies in a part of it: s_i's log from
    ``mean_log_ratio`` and the KL term from ``kl``, or the two means divided by ``ratio_over`` and ``kl_over``
    instead of each reply's real tokens max(sum_t m_it, 1)."""
    lengths = mask.sum(dim=1).clamp(min=1)
    if mean_log_ratio is None:
        mean_log_ratio = ((lp - old.detach()) * mask).sum(dim=1) / (lengths if ratio_over is None else ratio_over)
    if kl is None:
        kl = (_k3(lp, ref.detach()) * mask).sum(dim=1) / (lengths if kl_over is None else kl_over)
    s, a = torch.exp(mean_log_ratio), adv.detach()
    per_reply = -torch.min(s * a, torch.clamp(s, floor, ceiling) * a)
    return (per_reply + beta * kl).mean()


@right("gspo_loss")
def gspo_log_space_clip(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    log_s = (logprobs - old_logprobs.detach()).mul(mask).sum(-1) / mask.sum(-1).clamp(min=1)
    s, a = log_s.exp(), advantages.detach()
    bounded = torch.where(a >= 0, s.clamp(max=1 + clip_range_high), s.clamp(min=1 - clip_range_low))
    d = ref_logprobs.detach() - logprobs
    kl = ((d.exp() - d - 1) * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    return (-bounded * a + beta * kl).mean()


@wrong(
    "gspo_loss",
    "s_i from the SUM of the reply's token log-ratios: it grows with the reply's length; GSPO's s_i is exp of their "
    "mean over the reply's real tokens",
)
def gspo_sum_over_tokens(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    return _gspo(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, 1 - clip_range_low, 1 + clip_range_high, beta,
        ratio_over=1,
    )  # fmt: skip


@wrong(
    "gspo_loss",
    "mean over padding: s_i and the KL term divide by the reply's real tokens (sum of its mask), not by the T columns",
)
def gspo_divides_by_columns(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta
):
    columns = mask.shape[1]
    return _gspo(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, 1 - clip_range_low, 1 + clip_range_high, beta,
        ratio_over=columns, kl_over=columns,
    )  # fmt: skip


@wrong(
    "gspo_loss",
    "token-level ratios clipped one by one and then averaged (GRPO-clip's per-token surrogate); GSPO clips one ratio "
    "per reply, s_i",
)
def gspo_token_level_ratio(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta
):
    ratio = torch.exp(logprobs - old_logprobs.detach())
    a = advantages.detach().unsqueeze(1)
    per_token = -torch.min(ratio * a, torch.clamp(ratio, 1 - clip_range_low, 1 + clip_range_high) * a)
    per_token = per_token + beta * _k3(logprobs, ref_logprobs.detach())
    return ((per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()


@wrong(
    "gspo_loss",
    "s_i detached: it is the importance ratio itself and must carry the gradient to logprobs (no .detach() on it)",
    stops_training=True,
)
def gspo_ratio_detached(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    log_s = ((logprobs - old_logprobs) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    return _gspo(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, 1 - clip_range_low, 1 + clip_range_high, beta,
        mean_log_ratio=log_s.detach(),
    )  # fmt: skip


@wrong(
    "gspo_loss",
    "clip ranges ignored: s_i is clamped to [1 - clip_range_low, 1 + clip_range_high], not to GRPO's [0.8, 1.2]",
)
def gspo_grpo_ranges(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    return _gspo(logprobs, old_logprobs, ref_logprobs, advantages, mask, 0.8, 1.2, beta)


@wrong(
    "gspo_loss",
    "clip ranges swapped: the floor is 1 - clip_range_low and the ceiling 1 + clip_range_high",
)
def gspo_ranges_swapped(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    floor, ceiling = 1 - clip_range_high, 1 + clip_range_low
    return _gspo(logprobs, old_logprobs, ref_logprobs, advantages, mask, floor, ceiling, beta)


@wrong("gspo_loss", "the KL term is missing: the loss adds beta times each reply's mean k3 over its real tokens")
def gspo_kl_missing(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    floor, ceiling = 1 - clip_range_low, 1 + clip_range_high
    return _gspo(logprobs, old_logprobs, ref_logprobs, advantages, mask, floor, ceiling, 0.0)


@wrong(
    "gspo_loss",
    "the KL term summed over the reply's tokens; it is their mean over the reply's real tokens",
)
def gspo_kl_summed(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    return _gspo(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, 1 - clip_range_low, 1 + clip_range_high, beta, kl_over=1
    )


@wrong(
    "gspo_loss",
    "max instead of min: the clipped objective is the pessimistic min(s_i * A_i, clamp(s_i) * A_i)",
)
def gspo_max(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    lengths = mask.sum(dim=1).clamp(min=1)
    s = torch.exp(((logprobs - old_logprobs.detach()) * mask).sum(dim=1) / lengths)
    a = advantages.detach()
    per_reply = -torch.max(s * a, torch.clamp(s, 1 - clip_range_low, 1 + clip_range_high) * a)
    return (per_reply + beta * (_k3(logprobs, ref_logprobs.detach()) * mask).sum(dim=1) / lengths).mean()


@wrong("gspo_loss", OLD_NOT_DETACHED)
def gspo_old_not_detached(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta
):
    lengths = mask.sum(dim=1).clamp(min=1)
    log_s = ((logprobs - old_logprobs) * mask).sum(dim=1) / lengths
    s, a = torch.exp(log_s), advantages.detach()
    per_reply = -torch.min(s * a, torch.clamp(s, 1 - clip_range_low, 1 + clip_range_high) * a)
    return (per_reply + beta * (_k3(logprobs, ref_logprobs.detach()) * mask).sum(dim=1) / lengths).mean()


@wrong(
    "gspo_loss",
    "a reply with no real token (an all-zero mask row) divides 0 by 0, so s_i and the loss are NaN; divide by "
    "mask.sum(dim=1).clamp(min=1), as the docstring's max(sum_t m_it, 1) says",
)
def gspo_divides_by_zero_length(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta
):
    lengths = mask.sum(dim=1)  # no clamp: 0 for a reply with no real token
    return _gspo(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, 1 - clip_range_low, 1 + clip_range_high, beta,
        ratio_over=lengths, kl_over=lengths,
    )  # fmt: skip


@wrong(
    "gspo_loss",
    "torch.where after dividing by a zero length: the value is right, but the branch torch.where drops still "
    "divides 0 by 0 and its gradient is NaN; divide by mask.sum(dim=1).clamp(min=1) instead",
)
def gspo_where_after_dividing(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta
):
    lengths = mask.sum(dim=1)
    empty = lengths == 0
    log_s = torch.where(empty, 0.0, ((logprobs - old_logprobs.detach()) * mask).sum(dim=1) / lengths)
    kl = torch.where(empty, 0.0, (_k3(logprobs, ref_logprobs.detach()) * mask).sum(dim=1) / lengths)
    return _gspo(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, 1 - clip_range_low, 1 + clip_range_high, beta,
        mean_log_ratio=log_s, kl=kl,
    )  # fmt: skip


@wrong(
    "gspo_loss",
    "s_i as the arithmetic mean of the token ratios; GSPO's s_i is their geometric mean, exp of the mean token "
    "log-ratio over the reply's real tokens",
)
def gspo_arithmetic_mean_of_ratios(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta
):
    lengths = mask.sum(dim=1).clamp(min=1)
    s = (torch.exp(logprobs - old_logprobs.detach()) * mask).sum(dim=1) / lengths
    return _gspo(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, 1 - clip_range_low, 1 + clip_range_high, beta,
        mean_log_ratio=torch.log(s),
    )  # fmt: skip


@wrong(
    "gspo_loss",
    "the replies weighted by their length (one mean over all real tokens, as 'dapo'); GSPO's loss is the mean over "
    "replies of l_i + beta * (the reply's mean k3)",
)
def gspo_token_mean(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    lengths = mask.sum(dim=1).clamp(min=1)
    s = torch.exp(((logprobs - old_logprobs.detach()) * mask).sum(dim=1) / lengths)
    a = advantages.detach()
    per_reply = -torch.min(s * a, torch.clamp(s, 1 - clip_range_low, 1 + clip_range_high) * a)
    per_token = (per_reply.unsqueeze(1) + beta * _k3(logprobs, ref_logprobs.detach())) * mask
    return per_token.sum() / mask.sum().clamp(min=1)


@wrong(
    "gspo_loss",
    "mean over padding in s_i: its mean log-ratio divides by the reply's real tokens (sum of its mask), not by the T "
    "columns",
)
def gspo_ratio_over_columns(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta
):
    return _gspo(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, 1 - clip_range_low, 1 + clip_range_high, beta,
        ratio_over=mask.shape[1],
    )  # fmt: skip


@wrong(
    "gspo_loss",
    "mean over padding in the KL term: each reply's mean k3 divides by its real tokens (sum of its mask), not by "
    "the T columns",
)
def gspo_kl_over_columns(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range_low, clip_range_high, beta):
    return _gspo(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, 1 - clip_range_low, 1 + clip_range_high, beta,
        kl_over=mask.shape[1],
    )  # fmt: skip
