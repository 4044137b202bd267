"""The grading book of compute_loss (rlhf_practice/rl/lecture.py, TASKS.md §10.3): see :mod:`instructor.book`.

Shapes follow the lecture: [batch, trial, pos] = prompts, replies sampled per prompt, positions of a reply.
"""

from __future__ import annotations

import torch

from instructor.cases import DTYPES, F64, _adder, _bands, _grad, _grads_of, _name, _show, _signs, _uniform, cases_of
from instructor.mistakes import KEY, right, wrong

# ================ compute_loss (TASKS.md §10.3) =====================================================================

# --- its cases


LOSS_BOOK_LOG_PROBS = [[[-1.0, -2.0], [-0.5, -1.5]]]  # TASKS.md §10.3: one prompt, two replies of two positions
LOSS_BOOK_OLD = [[[-1.02, -1.995], [-0.48, -1.505]]]
LOSS_BOOK_DELTAS = [[1.0, -1.0]]
LOSS_MODES = ("naive", "unclipped", "clipped")


def _loss_args(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01) -> list:
    return [
        ("log_probs", log_probs),
        ("deltas", deltas),
        ("mode", mode),
        ("old_log_probs", old_log_probs),
        ("clip_range", clip_range),
    ]


@cases_of("compute_loss")
def loss_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_loss", fresh)
    fn = key.lecture.compute_loss

    def add_with_grad(id: str, what: str, args: list, **extra) -> None:
        expected = _grads_of(fn, args, ["log_probs"])["log_probs"]
        add(id, what, args, grads={"log_probs": _grad(expected)}, **extra)

    lp, old = torch.tensor(LOSS_BOOK_LOG_PROBS, dtype=F64), torch.tensor(LOSS_BOOK_OLD, dtype=F64)
    deltas = torch.tensor(LOSS_BOOK_DELTAS, dtype=F64)
    book, example = f"log_probs = {LOSS_BOOK_LOG_PROBS}, deltas = {LOSS_BOOK_DELTAS}", "the §10.3 example"
    old_shown = LOSS_BOOK_OLD
    if fresh:  # old log-probs 0.013-0.03 away (clipped at 0.01) or less than 0.007 away (not clipped)
        lp = _uniform(g, -3, -0.2, 1, 2, 2)
        old = lp + _bands(g, [(-0.03, -0.013), (-0.007, 0.007), (0.013, 0.03)], 1, 2, 2)
        deltas = _signs(g, 1, 2) * _uniform(g, 0.3, 2, 1, 2)
        book, example = f"log_probs = {_show(lp)}, deltas = {_show(deltas)}", "a fresh variant of the §10.3 example"
        old_shown = _show(old)
    on_policy = [("log_probs", lp), ("deltas", deltas)]
    for mode in LOSS_MODES:
        given = None if mode == "naive" else old
        args = _loss_args(lp, deltas, mode, given)
        old_text = "" if mode == "naive" else f", old_log_probs = {old_shown}"
        what = f"compute_loss on {example} ({book}{old_text}, mode={mode!r})"
        add(f"book_example_{mode}", what, args, book="§10.3")
        add_with_grad(
            f"book_example_{mode}_gradient",
            f"compute_loss on {example} (mode={mode!r}{', old_log_probs given' if given is not None else ''})",
            args,
        )
    for mode in ("unclipped", "clipped"):
        add_with_grad(
            f"first_step_gradient_{mode}",
            f"compute_loss on {example} with old_log_probs=None (mode={mode!r}: the first step, "
            "ratio 1, and its gradient is the naive loss's)",
            _loss_args(lp, deltas, mode),
        )
        add_with_grad(
            f"first_step_old_given_gradient_{mode}",
            f"compute_loss on {example} with old_log_probs equal to log_probs (mode={mode!r})",
            _loss_args(lp, deltas, mode, lp.clone()),
        )
        args = _loss_args(lp, deltas, mode, old)
        add(
            f"gradient_when_every_input_requires_grad_{mode}",
            f"compute_loss on {example} when every input requires grad (mode={mode!r})",
            args,
            grad_of=["log_probs", "deltas", "old_log_probs"],
            grads={"log_probs": _grad(_grads_of(fn, args, ["log_probs"])["log_probs"])},
        )
    add(
        "naive_ignores_old_log_probs",
        f"compute_loss on {example}, mode='naive' with old_log_probs given (naive does not use them)",
        _loss_args(lp, deltas, "naive", old),
    )
    # Ratios 1.1, 0.85, 1.3 and 0.95: clip_range=0.2 keeps the first two, the lecture's 0.01 would clip all.
    lp2 = torch.tensor([[[-1.0, -2.0], [-0.5, -1.5]], [[-0.7, -0.2], [-3.0, -1.1]]], dtype=F64)
    ratios = torch.tensor([[[1.1, 0.85], [1.3, 0.95]], [[1.05, 0.9], [1.25, 0.7]]], dtype=F64)
    deltas2 = torch.tensor([[1.0, -0.5], [2.0, -1.0]], dtype=F64)
    if fresh:  # ratios from 0.7 to 1.3, away from the edges of both clip ranges
        lp2, deltas2 = _uniform(g, -3, -0.1, 2, 2, 2), _uniform(g, -2, 2, 2, 2)
        bands = [(0.7, 0.78), (0.82, 0.88), (0.92, 0.98), (1.02, 1.08), (1.12, 1.18), (1.22, 1.3)]
        ratios = _bands(g, bands, 2, 2, 2)
    for clip_range in (0.2, 0.1):
        add_with_grad(
            f"clip_range_{clip_range}",
            f"compute_loss(mode='clipped', clip_range={clip_range}) with ratios from 0.7 to 1.3",
            _loss_args(lp2, deltas2, "clipped", lp2 - ratios.log(), clip_range),
        )
    # trial == pos: a delta broadcast along the wrong axis gives a number instead of an error.
    square = -torch.rand(2, 3, 3, generator=g, dtype=F64) * 3
    square_deltas = torch.tensor([[1.0, -1.0, 0.5], [2.0, 0.0, -0.5]], dtype=F64)
    if fresh:
        square_deltas = _uniform(g, -2, 2, 2, 3)
    for mode in LOSS_MODES:
        add_with_grad(
            f"trial_equals_pos_{mode}",
            f"compute_loss with 3 replies of 3 positions per prompt (mode={mode!r})",
            _loss_args(square, square_deltas, mode, square + 0.004),
        )
    unlikely = torch.tensor([[[-120.0, -95.5, -130.0], [-110.0, -101.0, -99.0]]])  # float32: exp() underflows
    unlikely_deltas, step = torch.tensor([[1.0, -1.0]]), torch.tensor([0.005, -0.003, 0.0])
    if fresh:
        unlikely = _uniform(g, -130, -95, 1, 2, 3, dtype=torch.float32)
        unlikely_deltas = (_signs(g, 1, 2) * _uniform(g, 0.3, 2, 1, 2)).float()
        step = _uniform(g, -0.006, 0.006, 3, dtype=torch.float32)
    add(
        "very_unlikely_tokens_stay_finite",
        "compute_loss(mode='unclipped') in float32 on log-probs around -110 (very unlikely tokens)",
        _loss_args(unlikely, unlikely_deltas, "unclipped", unlikely + step),
    )
    for mode in ("ppo", "clip"):
        add(
            f"unknown_mode_{mode}",
            f"compute_loss with mode={mode!r} (not one of the three modes)",
            _loss_args(lp, deltas, mode, old),
            raises="ValueError",
        )
    add(
        "inputs_unmodified",
        "compute_loss(mode='clipped')",
        _loss_args(lp, deltas, "clipped", old),
        unmodified=True,
    )
    for dtype in DTYPES:
        for shape in ((2, 3, 4), (4, 8, 6)):
            lp = (-torch.rand(shape, generator=g, dtype=F64) * 4).to(dtype)
            old = (lp.double() + torch.randn(shape, generator=g, dtype=F64) * 0.02).to(dtype)
            deltas = torch.randn(shape[:2], generator=g, dtype=F64).to(dtype)
            for mode in LOSS_MODES:
                for given in (None, old) if mode != "naive" else (None,):
                    for clip_range in (0.01, 0.05) if mode == "clipped" and given is not None else (0.01,):
                        name = "_".join(map(str, shape))
                        add_with_grad(
                            f"random_{_name(dtype)}_{name}_{mode}_old_{'given' if given is not None else 'None'}"
                            + (f"_clip_range_{clip_range}" if clip_range != 0.01 else ""),
                            f"compute_loss on random {dtype} log-probs of shape {shape}, mode={mode!r}, "
                            f"old_log_probs {'given' if given is not None else 'None'}, clip_range={clip_range}",
                            _loss_args(lp, deltas, mode, given, clip_range),
                        )
    # The stated defaults, each left out: old_log_probs=None (on-policy) and the lecture's clip_range=0.01.
    add_with_grad(
        "default_old_log_probs",
        f"compute_loss on {example} with only log_probs, deltas and mode='unclipped' (old_log_probs defaults to None)",
        [*on_policy, ("mode", "unclipped")],
    )
    add_with_grad(
        "default_clip_range",
        "compute_loss(mode='clipped') with ratios from 0.7 to 1.3 and no clip_range (its default is the "
        "lecture's 0.01)",
        _loss_args(lp2, deltas2, "clipped", lp2 - ratios.log())[:4],
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _loss(log_probs, deltas, mode, ratio, clip_range):
    """The three losses from a ratio: for the variants whose mistake is in the ratio."""
    d = deltas.detach().unsqueeze(-1)
    if mode == "naive":
        return -(log_probs * d).mean()
    if mode == "unclipped":
        return -(ratio * d).mean()
    if mode == "clipped":
        return -torch.minimum(ratio * d, ratio.clamp(1 - clip_range, 1 + clip_range) * d).mean()
    raise ValueError(mode)


def _old(log_probs, old_log_probs):
    return (log_probs if old_log_probs is None else old_log_probs).detach()


@right("compute_loss")
def clipped_with_where(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    if mode not in ("naive", "unclipped", "clipped"):
        raise ValueError(mode)
    d = deltas[..., None]
    if mode == "naive":
        return -(log_probs.mean(dim=-1) * deltas).mean()  # the mean over positions first: the same number
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    if mode == "unclipped":
        return -(ratio * d).mean()
    clipped = torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    return -torch.where(ratio * d < clipped * d, ratio * d, clipped * d).mean()


@right("compute_loss")
def lecture_einsum_nothing_detached(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    if mode == "naive":
        return -torch.einsum("btp,bt->btp", log_probs, deltas).mean()
    if old_log_probs is None:
        old_log_probs = log_probs.detach()
    ratios = torch.exp(log_probs - old_log_probs)  # a given old_log_probs is not detached: allowed
    if mode == "unclipped":
        return -torch.einsum("btp,bt->btp", ratios, deltas).mean()
    if mode == "clipped":
        unclipped = torch.einsum("btp,bt->btp", ratios, deltas)
        clipped = torch.einsum("btp,bt->btp", ratios.clamp(min=1 - clip_range, max=1 + clip_range), deltas)
        return -torch.minimum(unclipped, clipped).mean()
    raise ValueError(f"Unknown mode: {mode}")


@right("compute_loss")
def loss_as_max_of_negatives(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    d = deltas.detach().unsqueeze(-1)
    if mode == "naive":
        return (-log_probs * d).sum() / log_probs.numel()
    if mode not in ("unclipped", "clipped"):
        raise ValueError(mode)
    ratio = (log_probs - _old(log_probs, old_log_probs)).exp()
    if mode == "unclipped":
        return (-ratio * d).mean()
    return torch.max(-ratio * d, -ratio.clamp(1 - clip_range, 1 + clip_range) * d).mean()


@wrong(
    "compute_loss",
    "ratio written as log_probs / old_log_probs; the ratio is exp(log_probs - old_log_probs)",
)
def lecture_slip_ratio_of_log_probs(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    return _loss(log_probs, deltas, mode, log_probs / _old(log_probs, old_log_probs), clip_range)


@wrong(
    "compute_loss",
    "old log-probs not detached: with old_log_probs=None, old = log_probs.detach(); without the detach the ratio exp(log_probs - log_probs) is 1 with zero gradient",
)
def old_log_probs_not_detached(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    old = log_probs if old_log_probs is None else old_log_probs
    return _loss(log_probs, deltas, mode, torch.exp(log_probs - old), clip_range)


@wrong("compute_loss", "ratio inverted: it is exp(log_probs - old_log_probs), not exp(old_log_probs - log_probs)")
def loss_ratio_inverted(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    return _loss(log_probs, deltas, mode, torch.exp(_old(log_probs, old_log_probs) - log_probs), clip_range)


@wrong("compute_loss", "ratio without exp: log_probs - old_log_probs is the log of the ratio")
def loss_ratio_without_exp(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    return _loss(log_probs, deltas, mode, log_probs - _old(log_probs, old_log_probs), clip_range)


@wrong(
    "compute_loss",
    "ratio = exp(log_probs) / exp(old_log_probs) is 0 / 0 for very unlikely tokens; compute exp(log_probs - old_log_probs)",
)
def loss_ratio_of_probabilities(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs) / torch.exp(_old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode, ratio, clip_range)


@wrong("compute_loss", "clip_range ignored (the lecture's fixed 0.01 instead of the clip_range argument)")
def clip_range_fixed_at_the_lectures_0_01(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode, ratio, 0.01)


@wrong("compute_loss", "wrong sign (the loss is MINUS the mean of ratio * delta, or of log_probs * delta)")
def loss_not_negated(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return -_loss(log_probs, deltas, mode, ratio, clip_range)


@wrong("compute_loss", "max instead of min in the clipped loss (keep the smaller, pessimistic term)")
def loss_max_instead_of_min(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    if mode == "clipped":
        d = deltas.detach().unsqueeze(-1)
        return -torch.maximum(ratio * d, ratio.clamp(1 - clip_range, 1 + clip_range) * d).mean()
    return _loss(log_probs, deltas, mode, ratio, clip_range)


@wrong(
    "compute_loss",
    "only the clipped term; take the min of ratio * delta and clamp(ratio, 1 - clip_range, 1 + clip_range) * delta",
)
def loss_only_the_clipped_term(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    if mode == "clipped":
        return -(ratio.clamp(1 - clip_range, 1 + clip_range) * deltas.detach().unsqueeze(-1)).mean()
    return _loss(log_probs, deltas, mode, ratio, clip_range)


@wrong("compute_loss", "sum instead of mean over every [batch, trial, pos] entry")
def loss_sum(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode, ratio, clip_range) * log_probs.numel()


@wrong(
    "compute_loss",
    "summed over a reply's positions before the mean; the loss is the mean over every [batch, trial, pos] entry",
)
def summed_over_positions_first(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    d = deltas.detach()
    if mode == "naive":
        return -(log_probs.sum(dim=-1) * d).mean()
    if mode == "unclipped":
        return -(ratio.sum(dim=-1) * d).mean()
    if mode == "clipped":
        d = d.unsqueeze(-1)
        return -torch.minimum(ratio * d, ratio.clamp(1 - clip_range, 1 + clip_range) * d).sum(dim=-1).mean()
    raise ValueError(mode)


@wrong(
    "compute_loss",
    "deltas broadcast along the position axis (deltas[:, None] is [batch, 1, trial]); a reply's delta goes to each of its positions: deltas[:, :, None]",
)
def deltas_on_the_position_axis(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    d = deltas.detach()[:, None]
    if mode == "naive":
        return -(log_probs * d).mean()
    if mode == "unclipped":
        return -(ratio * d).mean()
    if mode == "clipped":
        return -torch.minimum(ratio * d, ratio.clamp(1 - clip_range, 1 + clip_range) * d).mean()
    raise ValueError(mode)


@wrong(
    "compute_loss",
    "the log-ratio was clipped to [-clip_range, clip_range] before exp(): the ratio's bounds became "
    "[exp(-clip_range), exp(clip_range)]; clamp the ratio itself to [1 - clip_range, 1 + clip_range]",
)
def clipped_the_log_ratio(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    if mode != "clipped":
        return _loss(log_probs, deltas, mode, torch.exp(log_probs - _old(log_probs, old_log_probs)), clip_range)
    log_ratio = log_probs - _old(log_probs, old_log_probs)
    d = deltas.detach().unsqueeze(-1)
    clipped = log_ratio.clamp(-clip_range, clip_range).exp()
    return -torch.minimum(log_ratio.exp() * d, clipped * d).mean()


@wrong(
    "compute_loss",
    "clip_range's default is the lecture's 0.01 (a call without clip_range clips the ratio to [0.99, 1.01]), not 0.2",
    defaults={"clip_range": 0.2},
)
def clip_range_default_0_2(log_probs, deltas, mode, old_log_probs=None, clip_range=0.2):
    return KEY.lecture.compute_loss(log_probs, deltas, mode, old_log_probs, clip_range)


@wrong("compute_loss", "instead of raising ValueError")
def loss_unknown_mode_falls_back(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode if mode in ("naive", "unclipped") else "clipped", ratio, clip_range)


@wrong("compute_loss", "do not detach log_probs")
def loss_log_probs_detached(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    log_probs = log_probs.detach()
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode, ratio, clip_range)
