"""The grading book of ensemble_reward (rlhf_practice/rl/best_of_n.py, TASKS.md §15.5): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.best_of_n._shared import F32, _own
from instructor.cases import DTYPES, F64, _adder, _grad, _grads_of, _name, _perm, _show, _uniform, cases_of
from instructor.mistakes import right, wrong

# --- its cases

# TASKS.md §15.5: k = 3 reward models, B = 4 replies. They agree on reply 3 (0.3 each), disagree most on reply 2.
BOOK_ENSEMBLE = [[0.2, -0.5, 1.0, 0.3], [0.4, -0.1, -1.0, 0.3], [0.0, -0.3, 0.5, 0.3]]
MODES = ("mean", "min", "uwo")


def _ensemble_args(scores, mode) -> list:
    return [("scores", scores), ("mode", mode)]


def _fresh_ensemble_book(g: torch.Generator) -> torch.Tensor:
    """A fresh variant of the §15.5 scores: 3 models x 4 replies, one reply they agree on, in another column."""
    scores = _uniform(g, -1, 1, 3, 4)
    scores[:, int(torch.randint(0, 4, (), generator=g))] = _uniform(g, -1, 1, 1).item()
    return scores


def _distinct_columns(g: torch.Generator, k: int, replies: int, dtype=F64) -> torch.Tensor:
    """(k, replies) scores whose k values differ clearly in every column (a minimum with one argument: its gradient
    goes to that one score, whatever min the function uses)."""
    base = torch.stack([_perm(g, k) for _ in range(replies)], dim=1).to(F64) * 0.4
    return (base + _uniform(g, -0.15, 0.15, k, replies) + _uniform(g, -1, 1, 1, replies)).to(dtype)


@cases_of("ensemble_reward")
def ensemble_reward_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "ensemble_reward", fresh)
    scores, example = torch.tensor(BOOK_ENSEMBLE), f"the §15.5 example (scores = {BOOK_ENSEMBLE}"
    if fresh:
        scores = _fresh_ensemble_book(g).to(F32)
        example = f"a fresh variant of the §15.5 example (scores = {_show(scores)}"
    for mode in MODES:
        add(
            f"book_example_{mode}",
            f"ensemble_reward on {example}, mode={mode!r}"
            + (", uncertainty_coef left at its default 0.5)" if mode == "uwo" else ")"),
            _ensemble_args(scores, mode),
            book="§15.5",
        )
    rng = g if fresh else _own(1505)
    for mode in MODES:
        scores = _distinct_columns(rng, 3, 5)
        grads = _grads_of(key.best_of_n.ensemble_reward, _ensemble_args(scores, mode), ["scores"])
        add(
            f"gradient_{mode}",
            f"ensemble_reward on 3 x 5 scores, mode={mode!r}: its gradient w.r.t. scores",
            _ensemble_args(scores, mode),
            grads={"scores": _grad(grads["scores"])},
        )
    scores = _distinct_columns(rng, 4, 6)
    for name, coefficient in (("0", 0.0), ("large", 2.0 if not fresh else _uniform(g, 1.1, 3, 1).item())):
        add(
            f"uwo_coefficient_{name}",
            f"ensemble_reward on 4 x 6 scores, mode='uwo', uncertainty_coef={coefficient:g}",
            _ensemble_args(scores, "uwo"),
            kwargs={"uncertainty_coef": coefficient},
        )
    for k in (2, 5):
        scores = _distinct_columns(rng, k, 7)
        for mode in MODES:
            add(f"k{k}_{mode}", f"ensemble_reward on {k} x 7 scores, mode={mode!r}", _ensemble_args(scores, mode))
    square = _distinct_columns(rng, 3, 3)
    for mode in MODES:  # k = B: a reduction over the replies (dim 1) has the right shape, only its values tell
        add(
            f"square_{mode}",
            f"ensemble_reward on 3 models x 3 replies (k = B), mode={mode!r}",
            _ensemble_args(square, mode),
        )
    one = _uniform(rng, -1, 1, 1, 5)
    for mode in ("mean", "min"):
        add(f"one_model_{mode}", f"ensemble_reward on one model's scores, mode={mode!r}", _ensemble_args(one, mode))
    add(
        "one_model_uwo_raises",
        "ensemble_reward on one model's scores, mode='uwo' (one model has no variance: raise ValueError)",
        _ensemble_args(one, "uwo"),
        raises="ValueError",
    )
    unknown = (
        ("max", "Mean") if not fresh else (("median", "MIN"), ("sum", "Uwo"))[int(torch.randint(0, 2, (), generator=g))]
    )
    for mode in unknown:
        add(
            f"unknown_mode_{mode.lower()}_raises",
            f"ensemble_reward with mode={mode!r} (not 'mean', 'min' or 'uwo': raise ValueError)",
            _ensemble_args(_distinct_columns(rng, 3, 4), mode),
            raises="ValueError",
        )
    tied = _uniform(rng, -1, 1, 3, 4)
    tied[1, 2] = tied[0, 2] = tied[:, 2].min()  # two models share the minimum of reply 2
    add(
        "tied_minimum",
        "ensemble_reward with two models tied at a reply's minimum, mode='min'",
        _ensemble_args(tied, "min"),
    )
    add("inputs_unmodified", "ensemble_reward", _ensemble_args(_distinct_columns(rng, 3, 4), "uwo"), unmodified=True)
    for dtype in DTYPES:
        for k, replies in ((3, 1), (4, 16), (8, 64)):
            for mode in MODES:
                scores = torch.randn(k, replies, generator=rng, dtype=F64)
                add(
                    f"random_{_name(dtype)}_k{k}_B{replies}_{mode}",
                    f"ensemble_reward on random {dtype} scores, k={k}, B={replies}, mode={mode!r}",
                    _ensemble_args(scores.to(dtype), mode),
                )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("ensemble_reward")
def ensemble_written_out(scores, mode, uncertainty_coef=0.5):
    k = scores.shape[0]
    mean = scores.sum(dim=0) / k
    if mode == "mean":
        return mean
    if mode == "min":
        return scores.amin(dim=0)
    if mode == "uwo":
        if k < 2:
            raise ValueError("uwo needs two models at least")
        return mean - uncertainty_coef * ((scores - mean) ** 2).sum(dim=0) / (k - 1)
    raise ValueError(f"unknown mode {mode}")


@right("ensemble_reward")
def ensemble_var_mean(scores, mode, uncertainty_coef=0.5):
    if mode not in ("mean", "min", "uwo"):
        raise ValueError(mode)
    if mode == "min":
        return torch.sort(scores, dim=0).values[0]
    if mode == "uwo" and scores.shape[0] == 1:
        raise ValueError("one model")
    var, mean = torch.var_mean(scores, dim=0) if mode == "uwo" else (None, scores.mean(0))
    return mean if mode == "mean" else mean - uncertainty_coef * var


@right("ensemble_reward")
def ensemble_squared_std(scores, mode, uncertainty_coef=0.5):
    if mode == "uwo" and len(scores) > 1:
        return scores.mean(dim=0) - uncertainty_coef * scores.std(dim=0) ** 2
    if mode in ("mean", "min"):
        return scores.mean(dim=0) if mode == "mean" else torch.min(scores, dim=0)[0]
    raise ValueError(f"mode {mode!r} with {len(scores)} models")


def _ensemble(scores, mode, uncertainty_coef=0.5, *, var=None, dim=0, minimum=None):
    """The key's ensemble with one step replaced: ``var`` (scores -> (B,) the variance), the dimension reduced,
    ``minimum`` (scores -> (B,))."""
    if mode == "mean":
        return scores.mean(dim=dim)
    if mode == "min":
        return scores.min(dim=dim).values if minimum is None else minimum(scores)
    if mode == "uwo":
        if scores.shape[0] < 2:
            raise ValueError("uwo needs k >= 2")
        return scores.mean(dim=dim) - uncertainty_coef * (scores.var(dim=dim) if var is None else var(scores))
    raise ValueError(mode)


@wrong(
    "ensemble_reward",
    "reduced over dim=1, the replies; scores is (k, B): combine the k models, dim=0, one value per reply",
)
def ensemble_over_dim_1(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, dim=1)


@wrong(
    "ensemble_reward",
    "the variance over every score of the tensor; uwo subtracts each reply's own variance over the k models "
    "(scores.var(dim=0))",
)
def ensemble_variance_of_everything(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, var=lambda s: s.var())


@wrong(
    "ensemble_reward",
    "the variance divided by k (correction=0); use the unbiased one, divided by k - 1 (torch.var's default)",
)
def ensemble_biased_variance(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, var=lambda s: s.var(dim=0, correction=0))


@wrong(
    "ensemble_reward",
    "the variance divided twice, by k and then by k - 1 (((scores - mean)**2).mean(0) / (k - 1)); the unbiased "
    "variance divides the sum of squared deviations by k - 1 once (torch.var's default)",
)
def ensemble_variance_divided_twice(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, var=lambda s: s.var(dim=0, correction=0) / (s.shape[0] - 1))


@wrong(
    "ensemble_reward",
    "the standard deviation instead of the variance: uwo is mean - uncertainty_coef * variance (std squared)",
)
def ensemble_std_not_variance(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, var=lambda s: s.std(dim=0))


@wrong(
    "ensemble_reward",
    "the biased standard deviation (std with correction=0) instead of the variance: uwo subtracts uncertainty_coef "
    "times the unbiased variance, divided by k - 1 (std squared)",
)
def ensemble_biased_std(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, var=lambda s: s.std(dim=0, correction=0))


@wrong(
    "ensemble_reward",
    "the variance added; uwo SUBTRACTS it (mean - uncertainty_coef * variance): the models' disagreement lowers "
    "the reward",
)
def ensemble_adds_the_variance(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, var=lambda s: -s.var(dim=0))


@wrong(
    "ensemble_reward",
    "max instead of min: worst-case optimisation takes the SMALLEST of the k scores",
)
def ensemble_max_for_min(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, minimum=lambda s: s.max(dim=0).values)


@wrong(
    "ensemble_reward",
    "the minimum over every score of the tensor (min() without dim): 'min' takes each reply's smallest score over "
    "the k models, scores.min(dim=0).values, one value per reply",
)
def ensemble_min_of_everything(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, minimum=lambda s: s.min())


@wrong(
    "ensemble_reward",
    "the sum of the k scores; mode 'mean' is their mean",
)
def ensemble_sum_for_mean(scores, mode, uncertainty_coef=0.5):
    if mode == "mean":
        return scores.sum(dim=0)
    return _ensemble(scores, mode, uncertainty_coef)


@wrong(
    "ensemble_reward",
    "uncertainty_coef's default changed: it is 0.5",
    defaults={"uncertainty_coef": 1.0},
)
def ensemble_default_coefficient_1(scores, mode, uncertainty_coef=1.0):
    return _ensemble(scores, mode, uncertainty_coef)


@wrong("ensemble_reward", "returned min, expected a torch.Tensor")
def ensemble_min_values_and_indices(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores, mode, uncertainty_coef, minimum=lambda s: s.min(dim=0))


@wrong("ensemble_reward", "instead of raising ValueError")
def ensemble_unknown_mode_as_mean(scores, mode, uncertainty_coef=0.5):
    if mode in ("min", "uwo"):
        return _ensemble(scores, mode, uncertainty_coef)
    return scores.mean(dim=0)


@wrong("ensemble_reward", "instead of raising ValueError")
def ensemble_uwo_of_one_model(scores, mode, uncertainty_coef=0.5):
    if mode == "uwo":
        return scores.mean(dim=0) - uncertainty_coef * scores.var(dim=0)  # NaN for one model
    return _ensemble(scores, mode, uncertainty_coef)


@wrong("ensemble_reward", "the result carries no gradient to scores")
def ensemble_detached(scores, mode, uncertainty_coef=0.5):
    return _ensemble(scores.detach(), mode, uncertainty_coef)
