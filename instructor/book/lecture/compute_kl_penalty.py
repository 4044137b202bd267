"""The grading book of compute_kl_penalty (rlhf_practice/rl/lecture.py, TASKS.md §10.4): see :mod:`instructor.book`.

Shapes follow the lecture: [batch, trial, pos] = prompts, replies sampled per prompt, positions of a reply.
"""

from __future__ import annotations

import torch

from instructor.cases import DTYPES, F64, _adder, _grad, _grads_of, _name, _show, _uniform, cases_of
from instructor.mistakes import right, wrong

# ================ compute_kl_penalty (TASKS.md §10.4) ===============================================================

# --- its cases


KL_PENALTY_BOOK = ([[[-1.0, -2.0, -0.5], [-0.2, -0.2, -3.0]]], [[[-1.5, -1.0, -0.5], [-0.2, -1.2, -2.0]]])  # §10.4


@cases_of("compute_kl_penalty")
def kl_penalty_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_kl_penalty", fresh)
    fn = key.lecture.compute_kl_penalty
    lp, ref = (torch.tensor(x, dtype=F64) for x in KL_PENALTY_BOOK)
    example, shown = "the §10.4 example", KL_PENALTY_BOOK
    if fresh:  # as in the book, some positions where the two agree
        lp, ref = _uniform(g, -3, -0.1, 1, 2, 3), _uniform(g, -3, -0.1, 1, 2, 3)
        same = torch.rand(1, 2, 3, generator=g) < 0.3
        ref = torch.where(same, lp, ref)
        example, shown = "a fresh variant of the §10.4 example", (_show(lp), _show(ref))
    args = [("log_probs", lp), ("ref_log_probs", ref)]
    add(
        "book_example",
        f"compute_kl_penalty on {example} (log_probs = {shown[0]}, ref_log_probs = {shown[1]})",
        args,
        book="§10.4",
    )
    add(
        "gradient_on_the_book_example",
        f"compute_kl_penalty on {example}, both inputs requiring grad",
        args,
        grad_of=["log_probs", "ref_log_probs"],
        grads={"log_probs": _grad(_grads_of(fn, args, ["log_probs"])["log_probs"])},
    )
    add(
        "equal_log_probs_give_zero",
        "compute_kl_penalty with ref_log_probs == log_probs",
        [("log_probs", lp), ("ref_log_probs", lp.clone())],
    )
    add(
        "two_dims",
        "compute_kl_penalty on [reply, pos] inputs (2 replies of 3 positions)",
        [("log_probs", lp[0]), ("ref_log_probs", ref[0])],
    )
    add("inputs_unmodified", "compute_kl_penalty", args, unmodified=True)
    for dtype in DTYPES:
        for shape in ((2, 3, 5), (4, 8, 6), (6, 10)):
            ref = -torch.rand(shape, generator=g, dtype=F64) * 5
            lp = ref + torch.randn(shape, generator=g, dtype=F64) * 0.8
            args = [("log_probs", lp.to(dtype)), ("ref_log_probs", ref.to(dtype))]
            add(
                f"random_{_name(dtype)}_{'x'.join(map(str, shape))}",
                f"compute_kl_penalty on random {dtype} log-probs of shape {shape}",
                args,
                grads={"log_probs": _grad(_grads_of(fn, args, ["log_probs"])["log_probs"])},
            )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("compute_kl_penalty")
def expm1_nothing_detached(log_probs, ref_log_probs):
    d = ref_log_probs - log_probs
    return (torch.expm1(d) - d).sum(dim=-1).mean()


@right("compute_kl_penalty")
def r_minus_log_r(log_probs, ref_log_probs):
    r = torch.exp(ref_log_probs.detach() - log_probs)
    return (r - torch.log(r) - 1).sum(-1).mean()


@wrong(
    "compute_kl_penalty",
    "k3 of the log-ratio log_probs - ref_log_probs; k3 = exp(d) - d - 1 with d = ref_log_probs - log_probs",
)
def k3_of_the_swapped_log_ratio(log_probs, ref_log_probs):
    d = log_probs - ref_log_probs.detach()
    return (d.exp() - d - 1).sum(dim=-1).mean()


@wrong(
    "compute_kl_penalty",
    "k3 with + d: exp(d) - d - 1 (d = ref_log_probs - log_probs) is >= 0 at every position; exp(d) + d - 1 goes negative",
)
def k3_middle_sign_swapped(log_probs, ref_log_probs):
    d = ref_log_probs.detach() - log_probs
    return (d.exp() + d - 1).sum(dim=-1).mean()


@wrong("compute_kl_penalty", "wrong sign: k3 = exp(d) - d - 1 is >= 0; this is its negative")
def k3_negated(log_probs, ref_log_probs):
    d = ref_log_probs.detach() - log_probs
    return (1 + d - d.exp()).sum(dim=-1).mean()


@wrong("compute_kl_penalty", "k1 (log_probs - ref_log_probs) instead of k3")
def k1_instead_of_k3_penalty(log_probs, ref_log_probs):
    return (log_probs - ref_log_probs.detach()).sum(dim=-1).mean()


@wrong(
    "compute_kl_penalty",
    "mean over a reply's positions; k3 is summed over the last dim (positions), then averaged over the rest",
)
def kl_mean_over_positions(log_probs, ref_log_probs):
    d = ref_log_probs.detach() - log_probs
    return (d.exp() - d - 1).mean()


@wrong(
    "compute_kl_penalty",
    "summed over every entry; sum over the last dim (positions) only, then average over the rest",
)
def kl_sum_over_everything(log_probs, ref_log_probs):
    d = ref_log_probs.detach() - log_probs
    return (d.exp() - d - 1).sum()


@wrong("compute_kl_penalty", "do not detach log_probs")
def kl_log_probs_detached(log_probs, ref_log_probs):
    d = ref_log_probs - log_probs.detach()
    return (d.exp() - d - 1).sum(dim=-1).mean()
