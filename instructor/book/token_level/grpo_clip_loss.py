"""The grading book of grpo_clip_loss (rlhf_practice/rl/token_level.py, TASKS.md §9.2): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.token_level._inputs import RATIO_BANDS, _junk, _mask, _random_mask, _very_unlikely
from instructor.cases import DTYPES, F64, _adder, _bands, _grad, _grads_of, _name, _perm, _uniform, cases_of
from instructor.mistakes import KEY, right, wrong

# the key's helpers, which a variant may call (never the student's files' own)
masked_mean = KEY.token_level.masked_mean
per_token_kl = KEY.token_level.per_token_kl


# ================ grpo_clip_loss (TASKS.md §9.2) ====================================================================

# --- its cases


GRPO_CLIP_NAMES = ("logprobs", "old_logprobs", "ref_logprobs", "advantages", "mask")


def _grpo_clip_book():
    """TASKS.md §9.2: two replies (3 tokens and 1 token) of one group, max_new_tokens = 4."""
    mask = _mask([3, 1], 3)
    old = torch.tensor([[-1.0, -2.0, -0.5], [-1.2, -4.0, -4.0]], dtype=F64)
    lp = old + torch.log(torch.tensor([[1.5, 0.9, 1.0], [0.7, 1.0, 1.0]], dtype=F64))
    ref = torch.tensor([[-1.0, -1.5, -0.5], [-1.0, -9.0, -9.0]], dtype=F64)
    adv = torch.tensor([1.0, -1.0], dtype=F64)
    return lp, old, ref, adv, mask


def _grpo_clip_fresh(g: torch.Generator):
    """A fresh variant of the §9.2 example: replies of 3 tokens and 1 token in a drawn order, ratios below,
    inside and above the clip range, advantages +a and -a, junk in the padding."""
    mask = _mask([[3, 1], [1, 3]][int(torch.randint(0, 2, (), generator=g))], 3)
    old = _uniform(g, -4, -0.2, 2, 3)
    lp = old + torch.log(_bands(g, RATIO_BANDS, 2, 3))
    ref = _junk(old + _uniform(g, -1, 1, 2, 3), mask, _uniform(g, -12, -6, 1).item())
    adv = _uniform(g, 0.3, 1.5, 1) * torch.tensor([1.0, -1.0], dtype=F64)[_perm(g, 2)]
    return lp, old, ref, adv, mask


@cases_of("grpo_clip_loss")
def grpo_clip_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "grpo_clip_loss", fresh)

    def inputs(tensors, clip, beta, loss_type, max_tokens):
        return [
            *zip(GRPO_CLIP_NAMES, tensors),
            ("clip_range", clip),
            ("beta", beta),
            ("loss_type", loss_type),
            ("max_tokens", max_tokens),
        ]

    book, example = _grpo_clip_book(), "the §9.2 example"
    if fresh:
        book, example = _grpo_clip_fresh(g), "a fresh variant of the §9.2 example"
    for loss_type in ("grpo", "dapo", "dr_grpo"):
        args = inputs(book, 0.2, 0.1, loss_type, 4)
        add(
            f"book_example_{loss_type}",
            f"grpo_clip_loss on {example} (clip_range=0.2, beta=0.1, loss_type={loss_type!r}, max_tokens=4)",
            args,
            book="§9.2",
        )
        names = ["logprobs", "old_logprobs", "ref_logprobs", "advantages"]
        add(
            f"gradient_{loss_type}",
            f"grpo_clip_loss on {example} (loss_type={loss_type!r}), every input requiring grad",
            args,
            grad_of=names,
            grads={"logprobs": _grad(_grads_of(key.token_level.grpo_clip_loss, args, names)["logprobs"])},
        )
    square = [
        torch.cat([t, t[:1] - 0.25 * (i != 3)]) if t.dim() == 1 else torch.cat([t, t[1:] + 0.3 * (i < 3)])
        for i, t in enumerate(book)
    ]
    square[4] = _mask([3, 1, 2], 3)
    square[3] = torch.tensor([1.0, -1.0, 0.5], dtype=F64)
    if fresh:
        square[4] = _mask(torch.randint(1, 4, (3,), generator=g).tolist(), 3)
        square[3] = _uniform(g, -1.5, 1.5, 3)
    add(
        "square_batch",
        "grpo_clip_loss with 3 replies of 3 columns (N == T), loss_type='grpo'",
        inputs(square, 0.2, 0.1, "grpo", 3),
    )
    add(
        "beta_0",
        f"grpo_clip_loss on {example} with beta=0 (no KL term)",
        inputs(book, 0.2, 0.0, "dapo", 4),
    )
    add("inputs_unmodified", "grpo_clip_loss", inputs(book, 0.2, 0.1, "grpo", 4), unmodified=True)
    for dtype in DTYPES:
        for rows, num_tokens in ((4, 6), (16, 12)):
            for loss_type in ("grpo", "dapo", "dr_grpo"):
                mask = _random_mask(g, rows, num_tokens, F64)
                old = -torch.rand(rows, num_tokens, generator=g, dtype=F64) * 5
                lp = old + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.3
                ref = old + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.5
                adv = torch.randn(rows, generator=g, dtype=F64)
                add(
                    f"random_{_name(dtype)}_{rows}x{num_tokens}_{loss_type}",
                    f"grpo_clip_loss on random {dtype} inputs of shape ({rows}, {num_tokens}), loss_type={loss_type!r}",
                    inputs(
                        [t.to(dtype) for t in (lp, old, _junk(ref, mask, -30.0), adv, mask)],
                        0.2,
                        0.04,
                        loss_type,
                        num_tokens + 4,
                    ),
                )
    lp, old, ref, adv, mask = (t.float() for t in book)
    low = _very_unlikely(g, fresh)
    add(
        "very_unlikely_tokens_stay_finite",
        f"grpo_clip_loss in float32 on {example} with old log-probs from -200 to -120 (very unlikely tokens)",
        inputs((low + (lp - old), low, low + (ref - old), adv, mask), 0.2, 0.1, "grpo", 4),
    )
    for loss_type in ("dr-grpo", "GRPO"):
        add(
            f"unknown_loss_type_{loss_type}",
            f"grpo_clip_loss with loss_type={loss_type!r} (only 'grpo', 'dapo' and 'dr_grpo' are known: any other "
            "raises ValueError)",
            inputs(book, 0.2, 0.1, loss_type, 4),
            raises="ValueError",
        )
    # A reply with no real token (a third row, all padding): its mean is 0 and the gradient stays finite.
    lp, old, ref, adv, mask = book
    three = [torch.cat([lp, lp[:1] - 0.3]), torch.cat([old, old[:1]]), torch.cat([ref, ref[:1] - 0.2])]
    three += [torch.cat([adv, torch.tensor([0.8], dtype=F64)]), torch.cat([mask, torch.zeros(1, 3, dtype=F64)])]
    where = "the last"
    if fresh:  # the empty reply in a drawn position
        order = _perm(g, 3)
        three = [t[order] for t in three]
        where = f"reply {int((order == 2).nonzero())}"
    args = inputs(three, 0.2, 0.1, "grpo", 4)
    names = ["logprobs", "old_logprobs", "ref_logprobs", "advantages"]
    add(
        "all_masked_reply_gradient",
        f"grpo_clip_loss (loss_type='grpo') on {example} with a third reply, {where}, that has no real token: "
        "its gradient is finite (0 there)",
        args,
        grad_of=names,
        grads={"logprobs": _grad(_grads_of(key.token_level.grpo_clip_loss, args, names)["logprobs"])},
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _reduce(loss, mask, loss_type, max_tokens):
    """The per-token loss reduced as loss_type says: for the variants whose mistake lies before it."""
    return (
        masked_mean(loss, mask, dim=1).mean()
        if loss_type == "grpo"
        else masked_mean(loss, mask)
        if loss_type == "dapo"
        else (loss * mask).sum() / (mask.shape[0] * max_tokens)
    )


@right("grpo_clip_loss")
def no_detach_explicit_branches(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = (logprobs - old_logprobs).exp()
    a = advantages[:, None]
    d = ref_logprobs - logprobs
    loss = -torch.minimum(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * (d.exp() - d - 1)
    loss = loss * mask
    if loss_type == "grpo":
        return (loss.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    if loss_type == "dapo":
        return loss.sum() / mask.sum().clamp(min=1)
    if loss_type == "dr_grpo":
        return loss.sum() / (loss.shape[0] * max_tokens)
    raise ValueError(loss_type)


@wrong(
    "grpo_clip_loss",
    "ratio taken against the reference policy; the ratio is exp(logprobs - old_logprobs), the reference only enters the KL term",
)
def ratio_against_the_reference(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - ref_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "no ratio clipping")
def no_clipping(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -ratio * a + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "wrong sign (the loss is MINUS the clipped objective, plus beta * KL)")
def surrogate_without_the_minus(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "KL sign: the loss ADDS beta * KL")
def kl_sign(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) - beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "beta ignored (the KL term is beta * k3)")
def beta_ignored(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "k1 (logprobs - ref_logprobs) instead of k3 in the KL term")
def k1_instead_of_k3(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k1"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "mean over padding: only real tokens count")
def mean_over_padding_kl_not_masked(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    d = ref_logprobs - logprobs
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * (d.exp() - d - 1)
    return (
        loss.mean(dim=1).mean()
        if loss_type == "grpo"
        else loss.mean()
        if loss_type == "dapo"
        else loss.sum() / (mask.shape[0] * max_tokens)
    )


@wrong("grpo_clip_loss", "advantages broadcast along the token axis: A_i belongs to row i (use advantages[:, None])")
def advantages_on_the_token_axis(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach()
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong(
    "grpo_clip_loss",
    "dapo's normalization (one mean over all tokens) used for loss_type='grpo' (mean per reply, then over replies)",
)
def dapo_normalization_for_grpo(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return (
        masked_mean(loss, mask) if loss_type in ("grpo", "dapo") else (loss * mask).sum() / (mask.shape[0] * max_tokens)
    )


@wrong(
    "grpo_clip_loss",
    "grpo's normalization (mean per reply, then over replies) used for loss_type='dapo' (one mean over all tokens)",
)
def grpo_normalization_for_dapo(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return (
        masked_mean(loss, mask, dim=1).mean()
        if loss_type in ("grpo", "dapo")
        else (loss * mask).sum() / (mask.shape[0] * max_tokens)
    )


@wrong("grpo_clip_loss", "dr_grpo divided by the T columns of the batch; divide by N * max_tokens")
def dr_grpo_by_columns(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return (
        masked_mean(loss, mask, dim=1).mean()
        if loss_type == "grpo"
        else masked_mean(loss, mask)
        if loss_type == "dapo"
        else (loss * mask).sum() / mask.numel()
    )


@wrong(
    "grpo_clip_loss",
    "mean over padding: divide by the number of real tokens (masked_mean), not by the number of columns",
)
def grpo_clip_mean_over_padding(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return (
        loss.mean(dim=1).mean()
        if loss_type == "grpo"
        else loss.mean()
        if loss_type == "dapo"
        else loss.sum() / (mask.shape[0] * max_tokens)
    )


@wrong(
    "grpo_clip_loss",
    "ratio = exp(logprobs) / exp(old_logprobs) is 0 / 0 for very unlikely tokens; compute exp(logprobs - old_logprobs)",
)
def grpo_clip_ratio_of_probabilities(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs) / torch.exp(old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)
    return _reduce(loss + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3"), mask, loss_type, max_tokens)


@wrong(
    "grpo_clip_loss",
    "NaN gradient from a reply with no real token: torch.where(count > 0, sum / count, 0) still backpropagates "
    "through 0 / 0; divide each reply's sum by its token count clamped to at least 1 (masked_mean)",
)
def grpo_where_per_reply_mean(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)
    loss = loss + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
    if loss_type != "grpo":
        return _reduce(loss, mask, loss_type, max_tokens)
    total, count = (loss * mask).sum(dim=1), mask.sum(dim=1)
    return torch.where(count > 0, total / count, torch.zeros_like(total)).mean()


@wrong("grpo_clip_loss", "instead of raising ValueError")
def unknown_loss_type_falls_back_to_grpo(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    known = loss_type if loss_type in ("grpo", "dapo", "dr_grpo") else "grpo"
    return KEY.token_level.grpo_clip_loss(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, known, max_tokens
    )
