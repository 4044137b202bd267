"""The grading book of per_token_kl (rlhf_practice/rl/token_level.py, TASKS.md §7.3): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.token_level._inputs import _junk, _random_mask
from instructor.cases import DTYPES, F64, _adder, _grad, _grads_of, _name, _show, _uniform, cases_of
from instructor.mistakes import right, wrong

# ================ per_token_kl (TASKS.md §7.3) ======================================================================

# --- its cases


KL_BOOK = ([[-1.0, -2.0, -0.5]], [[-1.5, -1.0, -0.5]], [[1.0, 1.0, 0.0]])  # TASKS.md §7.3


@cases_of("per_token_kl")
def kl_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "per_token_kl", fresh)
    logprobs, ref_logprobs, mask = (torch.tensor(x, dtype=F64) for x in KL_BOOK)
    ref_logprobs = _junk(ref_logprobs, mask, -9.0)
    example = f"the §7.3 example (logprobs = {KL_BOOK[0]}, ref_logprobs = {KL_BOOK[1]}, last token masked"
    if fresh:
        logprobs, ref_logprobs = _uniform(g, -3, -0.1, 1, 3), _uniform(g, -3, -0.1, 1, 3)
        ref_logprobs = _junk(ref_logprobs, mask, _uniform(g, -12, -6, 1).item())
        example = f"a fresh variant of the §7.3 example (logprobs = {_show(logprobs)}, ref_logprobs = "
        example += f"{_show(ref_logprobs)}, last token masked"
    book = [("logprobs", logprobs), ("ref_logprobs", ref_logprobs), ("mask", mask)]
    for estimator in ("k1", "k3"):
        args = [("logprobs", logprobs), ("ref_logprobs", ref_logprobs), ("mask", mask), ("estimator", estimator)]
        add(
            f"book_example_{estimator}",
            f"per_token_kl on {example}, estimator={estimator!r})",
            args,
            book="§7.3",
        )
        expected = _grads_of(key.token_level.per_token_kl, args, ["logprobs"])["logprobs"]
        add(
            f"gradient_{estimator}",
            f"per_token_kl on {example.split(' (')[0]} (estimator={estimator!r})",
            args,
            grads={"logprobs": _grad(expected)},
        )
    add(
        "inputs_unmodified",
        "per_token_kl",
        [("logprobs", logprobs), ("ref_logprobs", ref_logprobs), ("mask", mask), ("estimator", "k3")],
        unmodified=True,
    )
    for dtype in DTYPES:
        for rows, num_tokens in ((2, 4), (16, 12)):
            for estimator in ("k1", "k3"):
                mask = _random_mask(g, rows, num_tokens, dtype)
                ref_logprobs = -torch.rand(rows, num_tokens, generator=g, dtype=F64) * 6
                logprobs = ref_logprobs + torch.randn(rows, num_tokens, generator=g, dtype=F64) * 0.7
                ref_logprobs = _junk(ref_logprobs, mask, -30.0)
                add(
                    f"random_{_name(dtype)}_{rows}x{num_tokens}_{estimator}",
                    f"per_token_kl on random {dtype} log-probs of shape ({rows}, {num_tokens}), estimator={estimator!r}",
                    [
                        ("logprobs", logprobs.to(dtype)),
                        ("ref_logprobs", ref_logprobs.to(dtype)),
                        ("mask", mask),
                        ("estimator", estimator),
                    ],
                )
    add("default_estimator", f"per_token_kl on {example}) without estimator (its default is 'k3')", book)
    for estimator in ("k2", "K3"):
        add(
            f"unknown_estimator_{estimator}",
            f"per_token_kl with estimator={estimator!r} (only 'k1' and 'k3' are known: any other raises ValueError)",
            [*book, ("estimator", estimator)],
            raises="ValueError",
        )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("per_token_kl")
def log_of_ratio(logprobs, ref_logprobs, mask, estimator="k3"):
    r = torch.exp(ref_logprobs - logprobs)
    if estimator == "k1":
        return -torch.log(r) * mask
    if estimator == "k3":
        return (r - 1 - torch.log(r)) * mask
    raise ValueError(estimator)


@right("per_token_kl")
def expm1_and_where(logprobs, ref_logprobs, mask, estimator="k3"):
    if estimator not in ("k1", "k3"):
        raise ValueError(f"estimator={estimator!r}")
    d = logprobs - ref_logprobs
    kl = d if estimator == "k1" else torch.expm1(-d) + d
    return torch.where(mask > 0, kl, torch.zeros_like(kl))


@wrong("per_token_kl", "computed k3 although estimator='k1' was asked for")
def always_k3(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    return (torch.exp(-d) - 1 + d) * mask


@wrong("per_token_kl", "computed k1 although estimator='k3' was asked for")
def always_k1(logprobs, ref_logprobs, mask, estimator="k3"):
    return (logprobs - ref_logprobs) * mask


@wrong("per_token_kl", "masked positions must be 0 (multiply by the mask)")
def mask_ignored(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    return d if estimator == "k1" else torch.exp(-d) - 1 + d


@wrong("per_token_kl", "k2 = (log ratio)^2 / 2 instead of the estimator asked for")
def k2_whatever_the_estimator(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    return d**2 / 2 * mask


@wrong("per_token_kl", "KL sign: k1 = logprobs - ref_logprobs = log(pi / pi_ref), not ref - logprobs")
def k1_sign(logprobs, ref_logprobs, mask, estimator="k3"):
    d = ref_logprobs - logprobs
    kl = d if estimator == "k1" else torch.exp(d) - 1 - d
    return kl * mask


@wrong("per_token_kl", "k3 with r = pi / pi_ref; it is r = pi_ref / pi = exp(ref_logprobs - logprobs)")
def k3_with_r_pi_over_pi_ref(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    kl = d if estimator == "k1" else torch.exp(d) - 1 - d
    return kl * mask


@wrong("per_token_kl", "k3 sign: (r - 1) - log r is >= 0 at every token; this is its negative")
def k3_negative(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    kl = d if estimator == "k1" else 1 - torch.exp(-d) - d
    return kl * mask


@wrong("per_token_kl", "instead of raising ValueError")
def unknown_estimator_falls_back_to_k3(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    return (d if estimator == "k1" else torch.exp(-d) - 1 + d) * mask
