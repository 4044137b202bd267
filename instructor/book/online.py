"""The grading book of rlhf_practice/rl/online.py (task 16): select_pairs (TASKS.md §16.2) and proxy_agreement (§16.3).

For each graded function, in the order of the course table (rlhf_practice.course.GRADED): the builder of its cases
(registered with :func:`instructor.cases.cases_of`) and its catalogued mistakes and right variants
(:func:`instructor.mistakes.wrong` and :func:`~instructor.mistakes.right`).

The published cases use hard-coded numbers or their own generators (:func:`_own`), never the shared ``g``. The
grader's hidden cases (``fresh=True``) draw from ``g``.
"""

from __future__ import annotations

import torch

from instructor.cases import DTYPES, F64, _adder, _name, _perm, _show, _uniform, cases_of
from instructor.mistakes import right, wrong

F32 = torch.float32


def _own(seed: int) -> torch.Generator:
    """A published case's own generator: its inputs stay the same whatever the other functions' cases draw."""
    return torch.Generator().manual_seed(seed)


# ================ select_pairs (TASKS.md §16.2) =====================================================================

# --- its cases

# TASKS.md §16.2: k = 2 reward models, C = 6 candidate pairs, M = 2 labels.
BOOK_A = [[1.2, 0.3, -0.4, 2.0, 0.1, 0.9], [1.0, -0.3, -0.6, 1.6, 0.5, 1.1]]
BOOK_B = [[0.2, 0.1, -0.5, -1.0, 0.6, 0.8], [0.4, 0.5, -0.3, -1.4, 0.0, 1.2]]
SELECTIONS = ("random", "uncertain", "disagreement")


def _select_args(a, b, m, selection) -> list:
    return [("scores_a", a), ("scores_b", b), ("num_labels", m), ("selection", selection)]


def _fresh_book(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh variant of the §16.2 example: 2 models x 6 pairs, distinct keys in every selection."""
    while True:
        a, b = _uniform(g, -2, 2, 2, 6), _uniform(g, -2, 2, 2, 6)
        unsure = (a.mean(0) - b.mean(0)).abs()
        spread = torch.sigmoid(a - b).var(0)
        if unsure.unique().numel() == 6 and spread.unique().numel() == 6:
            return a.to(F32), b.to(F32)


def _unchanged(add):
    """``add`` whose every case also checks that the function leaves its inputs as they were."""

    def add_unchanged(*args, **extra):
        extra.setdefault("unmodified", True)
        return add(*args, **extra)

    return add_unchanged


def _tie_among_others(g: torch.Generator, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh place for a float32 tie of pairs 0 and 1 of (k, 2) scores: negated or not, among 2 to 4 pairs whose
    difference is 0.8 to 2 (further from 0), pair 0 still before pair 1."""
    sign = float(torch.randint(0, 2, (), generator=g)) * 2 - 1
    extra = _uniform(g, 0.8, 2.0, 1, int(torch.randint(2, 5, (), generator=g))).to(F32).expand(a.shape[0], -1)
    a, b = torch.cat([a * sign, extra], 1), torch.cat([b * sign, torch.zeros_like(extra)], 1)
    n = a.shape[1]
    first, second = sorted(_perm(g, n)[:2].tolist())
    columns = torch.empty(n, dtype=torch.long)  # place -> the column it shows: pair 0 first, pair 1 second
    columns[first], columns[second] = 0, 1
    columns[[i for i in range(n) if i not in (first, second)]] = torch.arange(2, n)
    return a[:, columns].contiguous(), b[:, columns].contiguous()


@cases_of("select_pairs")
def select_pairs_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _unchanged(_adder(key, cases, "select_pairs", fresh))
    a, b = torch.tensor(BOOK_A), torch.tensor(BOOK_B)
    example = "the §16.2 example (2 models x 6 pairs)"
    if fresh:
        a, b = _fresh_book(g)
        example = f"a fresh variant of the §16.2 example (scores_a = {_show(a)}, scores_b = {_show(b)})"
    for selection in SELECTIONS:
        add(
            f"book_example_{selection}",
            f"select_pairs on {example}, num_labels=2, selection={selection!r}",
            _select_args(a, b, 2, selection),
            book="§16.2",
        )
    rng = g if fresh else _own(1602)
    # The picked indices come back in increasing order, although the best key sits at a high index.
    a = torch.tensor([[0.9, -1.0, 0.4, 0.0, 2.0]], dtype=F64)
    b = torch.tensor([[0.0, 1.5, 0.3, 0.05, -1.0]], dtype=F64)
    if fresh:
        a, b = (a * _uniform(g, 0.8, 1.2, 1).item())[:, _perm(g, 5)], (b * 0.9)[:, _perm(g, 5)]
    add(
        "uncertain_increasing_order",
        f"select_pairs(scores_a={_show(a)}, scores_b={_show(b)}, num_labels=3, selection='uncertain') (one model; "
        "the indices in increasing order)",
        _select_args(a, b, 3, "uncertain"),
    )
    # Two pairs whose differences are equal in size and opposite in sign: |a - b| ties; the lower index first.
    diff = 0.25 if not fresh else _uniform(g, 0.1, 0.9, 1).item()
    a = torch.tensor([[0.0, diff, 1.0, -diff, 0.0, 3.0]], dtype=F64)
    b = torch.tensor([[1.5, 0.0, -1.0, 0.0, 2.5, 0.0]], dtype=F64)
    add(
        "uncertain_ties_lower_index_first",
        f"select_pairs(scores_a={_show(a)}, scores_b={_show(b)}, num_labels=1, selection='uncertain') (pairs 1 and 3 "
        "tie at |a - b| = " + f"{diff:g}: the lower index is picked)",
        _select_args(a, b, 1, "uncertain"),
    )
    # Two models that disagree in sign on pair 0: their mean difference is 0 (unsure) although each model is sure.
    a = torch.tensor([[2.0, 0.3, 1.0, -0.2], [-2.0, 0.3, 1.0, -0.2]], dtype=F64)
    b = torch.tensor([[0.0, 0.0, 0.4, 0.5], [0.0, 0.0, 0.4, 0.5]], dtype=F64)
    if fresh:
        a[0, 0], a[1, 0] = 2.0 + diff, -2.0 - diff
    add(
        "uncertain_mean_of_the_models",
        f"select_pairs(scores_a={_show(a)}, scores_b={_show(b)}, num_labels=1, selection='uncertain') (pair 0: the "
        "models' mean difference is 0, each model's difference is large)",
        _select_args(a, b, 1, "uncertain"),
    )
    # Disagreement of the probabilities, not of the differences: pair 1's differences (5, 12) vary more than pair
    # 0's (0, 6), but both of its probabilities are nearly 1.
    a = torch.tensor([[0.0, 5.0, 0.5], [6.0, 12.0, -0.5]], dtype=F64)
    b = torch.zeros(2, 3, dtype=F64)
    if fresh:
        shift = _uniform(g, -0.3, 0.3, 1).item()
        a = a + shift
    add(
        "disagreement_of_probabilities",
        f"select_pairs(scores_a={_show(a)}, scores_b={_show(b)}, num_labels=1, selection='disagreement') (the "
        "variance of sigmoid(a - b) over the models, not of a - b)",
        _select_args(a, b, 1, "disagreement"),
    )
    f = 1.0 if not fresh else _uniform(g, 0.5, 2.0, 1).item()  # pairs 1 and 2 the same: (f, -f, f), an exact tie
    a = torch.tensor([[0.0, f, f, 0.5], [0.0, -f, -f, 0.5], [0.0, f, f, 0.5]], dtype=F64)
    b = torch.zeros(3, 4, dtype=F64)
    add(
        "disagreement_ties_lower_index_first",
        f"select_pairs(scores_a={_show(a)}, scores_b=zeros, num_labels=1, selection='disagreement') (pairs 1 and 2 "
        "tie: the lower index is picked)",
        _select_args(a, b, 1, "disagreement"),
    )
    scores = _uniform(rng, -2, 2, 1, 5)
    add(
        "disagreement_one_model_raises",
        "select_pairs with one model, selection='disagreement' (one model cannot disagree: raise ValueError)",
        _select_args(scores, scores.flip(1), 2, "disagreement"),
        raises="ValueError",
    )
    a, b = _uniform(rng, -2, 2, 2, 8), _uniform(rng, -2, 2, 2, 8)
    add(
        "random_first_pairs",
        "select_pairs on 2 models x 8 pairs, num_labels=3, selection='random' (the first 3 pairs)",
        _select_args(a, b, 3, "random"),
    )
    for selection in SELECTIONS:
        add(
            f"all_pairs_{selection}",
            f"select_pairs on 2 models x 8 pairs, num_labels=8 (every pair), selection={selection!r}",
            _select_args(a, b, 8, selection),
        )
    one = torch.tensor([[0.3], [-0.2]]) if not fresh else _uniform(g, -2, 2, 2, 1).to(F32)
    for selection in SELECTIONS:
        add(
            f"one_pair_{selection}",
            f"select_pairs on 2 models x 1 pair (C = 1), num_labels=1, selection={selection!r} (the one pair: [0])",
            _select_args(one, one.flip(0), 1, selection),
        )
    for m in (0, 9):
        add(
            f"num_labels_{m}_raises",
            f"select_pairs on 8 pairs with num_labels={m} (outside 1 to 8: raise ValueError)",
            _select_args(a, b, m, "random"),
            raises="ValueError",
        )
    unknown = (
        ("largest", "Uncertain")
        if not fresh
        else (("entropy", "RANDOM"), ("margin", "Disagreement"))[int(torch.randint(0, 2, (), generator=g))]
    )
    for selection in unknown:
        add(
            f"unknown_selection_{selection.lower()}_raises",
            f"select_pairs with selection={selection!r} (not random, uncertain or disagreement: raise ValueError)",
            _select_args(a, b, 2, selection),
            raises="ValueError",
        )
    # Every pair tied (torch.topk and unstable sorts return tied indices in no set order), for both keys.
    c = 40 if not fresh else int(torch.randint(24, 64, (), generator=g))  # torch's sorts are stable below 17
    same = _uniform(rng, -1, 1, 2, c)
    add(
        "uncertain_every_pair_tied",
        f"select_pairs where both replies of every one of {c} pairs score alike, num_labels=5, selection='uncertain' "
        "(every key ties: the first 5 indices)",
        _select_args(same, same.clone(), 5, "uncertain"),
    )
    even = _uniform(rng, -1, 1, 3, c)
    add(
        "disagreement_every_pair_tied",
        f"select_pairs where each of 3 models scores both replies of every one of {c} pairs alike, num_labels=5, "
        "selection='disagreement' (every probability is 1/2, every variance 0: the first 5 indices)",
        _select_args(even, even.clone(), 5, "disagreement"),
    )
    # Differences that differ only in the fourth decimal are not ties; differences beyond float32's sigmoid are not
    # ties either (sigmoid(20) and sigmoid(30) are both 1.0 in float32).
    close = torch.tensor([[0.0008, 0.0003, 0.0006, 0.5]], dtype=F64)
    if fresh:
        close = (close * _uniform(g, 0.6, 0.9, 1).item())[:, _perm(g, 4)]
    add(
        "uncertain_close_differences",
        f"select_pairs(scores_a={_show(close)}, scores_b=zeros, num_labels=2, selection='uncertain') (differences "
        "apart in the 4th decimal are not a tie)",
        _select_args(close, torch.zeros_like(close), 2, "uncertain"),
    )
    # Float64 scores whose differences show in 64 bits only: pair 0 is 1e-10 further from a tie than pair 1. In
    # float32 both are 1.0, a tie that the lower index (pair 0) would win.
    t, v = (1e-10, 1.0) if not fresh else (_uniform(g, 1, 50, 1).item() * 1e-11, _uniform(g, 0.8, 1.5, 1).item())
    fine = torch.tensor([[v + t, v, 0.5 * v]], dtype=F64)
    if fresh:  # pair 0 stays before pair 1; the third pair anywhere
        third = int(torch.randint(0, 3, (), generator=g))
        fine = fine[:, [c for c in ([0, 1][:third] + [2] + [0, 1][third:])]]
    add(
        "uncertain_float64_differences",
        f"select_pairs(scores_a={_show(fine)} (float64), scores_b=zeros, num_labels=2, selection='uncertain') "
        f"(differences apart by {t:.2g}: no tie in float64, the scores' dtype)",
        _select_args(fine, torch.zeros_like(fine), 2, "uncertain"),
    )
    far = torch.tensor([[30.0, 0.1, 20.0, 25.0]], dtype=F32)
    if fresh:  # the largest difference stays first: a sigmoid distance then keeps it (the lower index of three ties)
        far = torch.cat(
            [_uniform(g, 31, 40, 1), _uniform(g, 0.05, 0.5, 1), _uniform(g, 18, 24, 1), _uniform(g, 25, 30, 1)]
        )
        far = far.to(F32)[None]
    add(
        "uncertain_large_differences",
        f"select_pairs(scores_a={_show(far)} (float32), scores_b=zeros, num_labels=3, selection='uncertain') "
        "(differences of 20 to 30 are far apart, though sigmoid rounds each of them to 1.0 in float32)",
        _select_args(far, torch.zeros_like(far), 3, "uncertain"),
    )
    # Pairs 0 and 1 differ by -0.55 on paper (mean a - mean b = 0 - 0.55 and -0.65 + 0.1), and pair 2 is pair 0
    # again. Computed as the book orders it (each reply's mean over the models, then the difference) all three are
    # -0.54999995 in float32: a tie, pair 0 first. The mean of the per-model differences rounds pair 1's alone so.
    ta = torch.tensor([[-0.4, -1.6, -0.4], [0.4, 0.3, 0.4]], dtype=F32)
    tb = torch.tensor([[-0.7, -0.2, -0.7], [1.8, 0.0, 1.8]], dtype=F32)
    if fresh:
        ta, tb = _tie_among_others(g, ta[:, :2], tb[:, :2])
    add(
        "uncertain_mean_then_difference_float32",
        f"select_pairs(scores_a={_show(ta.double().round(decimals=4))}, "
        f"scores_b={_show(tb.double().round(decimals=4))} (float32), num_labels=1, selection='uncertain') (pairs "
        "that tie at |mean_k a - mean_k b|, computed in that order in float32: the lowest index is picked)",
        _select_args(ta, tb, 1, "uncertain"),
    )
    # Three models: pairs 0 and 1 differ by 0.2 on paper (mean a - mean b = 0 + 0.2 and -0.8 + 1.0), both 0.19999999
    # in float32 as the book computes them: a tie. The sums over the models (0.59999996 and 0.5999999) are none.
    ta = torch.tensor([[-0.8, 1.0], [0.4, -1.8], [0.4, -1.6]], dtype=F32)
    tb = torch.tensor([[-0.7, -1.0], [0.0, -0.9], [0.1, -1.1]], dtype=F32)
    if fresh:
        ta, tb = _tie_among_others(g, ta, tb)
    add(
        "uncertain_mean_not_sum_float32",
        f"select_pairs(scores_a={_show(ta.double().round(decimals=4))}, "
        f"scores_b={_show(tb.double().round(decimals=4))} (float32), num_labels=1, selection='uncertain') (3 models; "
        "pairs that tie at |mean_k a - mean_k b| in float32, though not at |sum_k a - sum_k b|: the lowest index)",
        _select_args(ta, tb, 1, "uncertain"),
    )
    # Probabilities near 0.95 whose spreads differ by little: E[p^2] - E[p]^2 in float32 loses them to cancellation.
    spreads, base = torch.tensor([0.2, 1.0, 0.5, 0.8, 0.3, 0.6], dtype=F64), 3.0
    if fresh:  # 12 spreads 0.08 apart in a fresh order, at a fresh level: the cancellation's noise picks 2 of 12
        spreads, base = (_perm(g, 12) + 2).to(F64) * 0.08, _uniform(g, 2.5, 3.5, 1).item()
    near = (base + torch.tensor([[0.0], [1.0], [-1.0]], dtype=F64) * spreads * 1e-3).to(F32)
    add(
        "disagreement_small_variances_float32",
        f"select_pairs(scores_a={_show(near)} (float32), scores_b=zeros, num_labels=2, selection='disagreement') "
        "(probabilities near 0.95 that differ in the 4th decimal: the variance of deviations from the mean, not "
        "E[p^2] - E[p]^2)",
        _select_args(near, torch.zeros_like(near), 2, "disagreement"),
    )
    add("inputs_unmodified", "select_pairs", _select_args(a.clone(), b.clone(), 3, "disagreement"), unmodified=True)
    for dtype in DTYPES:
        for k, c, m in ((1, 10, 4), (3, 16, 5), (4, 64, 20)):
            a, b = torch.randn(k, c, generator=rng, dtype=F64), torch.randn(k, c, generator=rng, dtype=F64)
            for selection in SELECTIONS[1:] if k > 1 else ("uncertain",):
                add(
                    f"random_{_name(dtype)}_k{k}_C{c}_M{m}_{selection}",
                    f"select_pairs on random {dtype} scores, k={k}, C={c}, num_labels={m}, selection={selection!r}",
                    _select_args(a.to(dtype), b.to(dtype), m, selection),
                )
    # Many ties in a mixed order: 4 levels of difference among 100 pairs. numpy's and torch's unstable sorts
    # reorder the pairs of one level; a stable sort keeps them in index order.
    c = 100 if not fresh else int(torch.randint(80, 160, (), generator=g))
    levels = torch.tensor([0.0, 0.25, 0.5, 0.75]) * (1.0 if not fresh else _uniform(g, 0.5, 2.0, 1).item())
    mixed = levels[torch.randint(0, 4, (c,), generator=rng)].expand(2, -1).contiguous()
    add(
        "uncertain_many_ties",
        f"select_pairs on {c} pairs whose differences take 4 values ({_show(levels)}), num_labels={c // 3}, "
        "selection='uncertain' (within a value, the lower indices first)",
        _select_args(mixed, torch.zeros_like(mixed), c // 3, "uncertain"),
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("select_pairs")
def select_written_out(scores_a, scores_b, num_labels, selection):
    k, c = scores_a.shape
    if num_labels < 1 or num_labels > c:
        raise ValueError("num_labels out of range")
    if selection == "random":
        return torch.arange(num_labels)
    if selection == "uncertain":
        key = [abs(float(scores_a[:, i].sum() / k - scores_b[:, i].sum() / k)) for i in range(c)]
    elif selection == "disagreement" and k > 1:
        p = 1 / (1 + torch.exp(scores_b - scores_a))
        key = [-float(((p[:, i] - p[:, i].mean()) ** 2).sum()) for i in range(c)]
    else:
        raise ValueError(selection)
    order = sorted(range(c), key=lambda i: (key[i], i))
    return torch.tensor(sorted(order[:num_labels]), dtype=torch.long)


@right("select_pairs")
def select_std_in_float64(scores_a, scores_b, num_labels, selection):
    if selection not in ("random", "uncertain", "disagreement") or not 0 < num_labels <= scores_a.shape[1]:
        raise ValueError(selection)
    if selection == "random":
        return torch.arange(num_labels, dtype=torch.long)
    diff = scores_a.double() - scores_b.double()
    if selection == "uncertain":
        key = diff.mean(0).abs()
    elif scores_a.shape[0] < 2:
        raise ValueError("one model")
    else:
        key = -torch.sigmoid(diff).std(0)
    return torch.argsort(key, stable=True)[:num_labels].sort().values


@right("select_pairs")
def select_by_rank(scores_a, scores_b, num_labels, selection):
    if selection not in ("random", "uncertain", "disagreement"):
        raise ValueError("unknown selection")
    models, pairs = scores_a.shape
    if num_labels < 1 or num_labels > pairs:
        raise ValueError("num_labels must be 1..C")
    index = torch.arange(pairs)
    if selection == "random":
        return index[:num_labels]
    if selection == "uncertain":
        key = (scores_a.mean(0) - scores_b.mean(0)).abs()
        ahead = key[None, :] < key[:, None]  # [i, j]: pair j goes before pair i
    else:
        if models < 2:
            raise ValueError("one model cannot disagree with itself")
        key = torch.sigmoid(scores_a - scores_b).var(0)
        ahead = key[None, :] > key[:, None]
    ahead |= (key[None, :] == key[:, None]) & (index[None, :] < index[:, None])
    return index[ahead.sum(1) < num_labels]


def _select(scores_a, scores_b, num_labels, selection, *, uncertain=None, spread=None, descending=False, order=None):
    """The key's selection with one step replaced: ``uncertain`` / ``spread`` (a, b) -> (C,) key, smallest first;
    ``descending``: the largest keys first; ``order`` (picked) -> the result."""
    if not 1 <= num_labels <= scores_a.shape[1]:
        raise ValueError("num_labels")
    if selection == "random":
        return torch.arange(num_labels)
    if selection == "uncertain":
        key = (scores_a.mean(0) - scores_b.mean(0)).abs() if uncertain is None else uncertain(scores_a, scores_b)
    elif selection == "disagreement":
        if scores_a.shape[0] < 2:
            raise ValueError("one model")
        key = -torch.sigmoid(scores_a - scores_b).var(0) if spread is None else spread(scores_a, scores_b)
    else:
        raise ValueError(selection)
    picked = torch.sort(key, stable=True, descending=descending).indices[:num_labels]
    return picked.sort().values if order is None else order(picked)


@wrong(
    "select_pairs",
    "'uncertain' picked the pairs the proxy is MOST sure about (the largest |mean a - mean b|); the proxy learns least "
    "there: pick the smallest differences",
)
def select_most_certain(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, descending=selection == "uncertain")


@wrong(
    "select_pairs",
    "'uncertain' without the absolute value: the smallest signed difference picks pairs where b wins by much; the "
    "proxy is unsure where |mean a - mean b| is small",
)
def select_signed_difference(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, uncertain=lambda a, b: a.mean(0) - b.mean(0))


@wrong(
    "select_pairs",
    "'uncertain' averaged each model's |a - b|; the proxy is the models' mean, so take |mean_k a - mean_k b| (two "
    "models sure of opposite answers make an unsure proxy)",
)
def select_mean_of_absolute_differences(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, uncertain=lambda a, b: (a - b).abs().mean(0))


@wrong(
    "select_pairs",
    "'uncertain' averaged the models' differences, mean_k (a - b); the key is the difference of the models' means, "
    "mean_k a - mean_k b, in that order: in floats the two round differently, and a tie of the key becomes a "
    "preference",
)
def select_mean_of_differences(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, uncertain=lambda a, b: (a - b).mean(0).abs())


@wrong(
    "select_pairs",
    "'uncertain' read the first model only (scores[0]); the proxy is the mean of the k models",
)
def select_first_model_only(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, uncertain=lambda a, b: (a[0] - b[0]).abs())


@wrong(
    "select_pairs",
    "'uncertain' took each reply's lowest score over the models (the pessimistic ensemble that training may use); "
    "the proxy asked here is the models' mean: |mean_k a - mean_k b|",
)
def select_lowest_over_models(scores_a, scores_b, num_labels, selection):
    return _select(
        scores_a, scores_b, num_labels, selection, uncertain=lambda a, b: (a.min(0).values - b.min(0).values).abs()
    )


@wrong(
    "select_pairs",
    "'uncertain' averaged over dim=1, the pairs; scores are (k, C): average over the k models, dim=0, one difference "
    "per pair",
)
def select_mean_over_pairs(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, uncertain=lambda a, b: (a.mean(1) - b.mean(1)).abs())


@wrong(
    "select_pairs",
    "'disagreement' took the variance of the score differences a - b; take it of the Bradley-Terry probabilities "
    "sigmoid(a - b) (two models that both prefer a, by 5 and by 12, do not disagree)",
)
def select_variance_of_differences(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, spread=lambda a, b: -(a - b).var(0))


@wrong(
    "select_pairs",
    "'disagreement' picked the pairs the models AGREE on most (the smallest variance); pick the largest",
)
def select_least_disagreement(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, spread=lambda a, b: torch.sigmoid(a - b).var(0))


@wrong(
    "select_pairs",
    "the variance over dim=1, the pairs; scores are (k, C): take it over the k models, dim=0, one value per pair",
)
def select_variance_over_pairs(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, spread=lambda a, b: -torch.sigmoid(a - b).var(1))


@wrong(
    "select_pairs",
    "one model cannot disagree: raise ValueError",
)
def select_one_model_disagrees(scores_a, scores_b, num_labels, selection):
    if selection == "disagreement" and scores_a.shape[0] < 2:
        return torch.arange(num_labels)
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "equal keys took the HIGHER index first; ties go to the lower index (a stable sort of the key)",
)
def select_ties_higher_index_first(scores_a, scores_b, num_labels, selection):
    c = scores_a.shape[1]

    def order(a, b, key):
        flipped = torch.sort(key.flip(0), stable=True).indices  # reversed: ties in decreasing index
        return c - 1 - flipped

    if selection in ("uncertain", "disagreement") and 1 <= num_labels <= c:
        if selection == "disagreement" and scores_a.shape[0] < 2:
            raise ValueError("one model")
        key = (
            (scores_a.mean(0) - scores_b.mean(0)).abs()
            if selection == "uncertain"
            else -torch.sigmoid(scores_a - scores_b).var(0)
        )
        return order(scores_a, scores_b, key)[:num_labels].sort().values
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "the indices in the order of their keys; return them in increasing order (sort the picked indices)",
)
def select_in_key_order(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, order=lambda picked: picked)


@wrong(
    "select_pairs",
    "the indices in decreasing order; return them increasing (sort the picked indices, smallest first)",
)
def select_decreasing_indices(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection).sort(descending=True).values


@wrong(
    "select_pairs",
    "'random' drew a random permutation; the candidates are already a random sample, so take the first M (random "
    "numbers here only make the run unrepeatable)",
)
def select_random_permutation(scores_a, scores_b, num_labels, selection):
    if selection == "random" and 1 <= num_labels <= scores_a.shape[1]:
        generator = torch.Generator().manual_seed(0)
        return torch.randperm(scores_a.shape[1], generator=generator)[:num_labels]
    return _select(scores_a, scores_b, num_labels, selection)


@wrong("select_pairs", "'random' took the last M pairs; take the first M (indices 0 to M - 1)")
def select_last_pairs(scores_a, scores_b, num_labels, selection):
    if selection == "random" and 1 <= num_labels <= scores_a.shape[1]:
        return torch.arange(scores_a.shape[1] - num_labels, scores_a.shape[1])
    return _select(scores_a, scores_b, num_labels, selection)


@wrong("select_pairs", "'random' took indices 1 to M (off by one); the first M pairs are 0 to M - 1")
def select_random_from_one(scores_a, scores_b, num_labels, selection):
    if selection == "random" and 1 <= num_labels <= scores_a.shape[1]:
        return torch.arange(1, num_labels + 1)
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "kept every pair whose key is at most the M-th smallest: pairs tied at the M-th place all came back (more than "
    "M); take exactly M pairs, the lower index first among ties",
)
def select_threshold_at_mth_key(scores_a, scores_b, num_labels, selection):
    if selection == "uncertain" and 1 <= num_labels <= scores_a.shape[1]:
        key = (scores_a.mean(0) - scores_b.mean(0)).abs()
        return torch.nonzero(key <= key.sort().values[num_labels - 1]).squeeze(1)
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "'disagreement' took the variance of each model's confidence |sigmoid(a - b) - 1/2|; two models sure of opposite "
    "replies (p and 1 - p) then look agreed: take the variance of the probabilities sigmoid(a - b) themselves",
)
def select_variance_of_confidence(scores_a, scores_b, num_labels, selection):
    return _select(
        scores_a, scores_b, num_labels, selection,
        spread=lambda a, b: -(torch.sigmoid(a - b) - 0.5).abs().var(0),
    )  # fmt: skip


@wrong(
    "select_pairs",
    "took the M smallest distinct keys (torch.unique) and every pair that holds one: tied pairs all came back "
    "(more than M); take exactly M pairs, the lower index first among ties",
)
def select_smallest_distinct_keys(scores_a, scores_b, num_labels, selection):
    if selection == "uncertain" and 1 <= num_labels <= scores_a.shape[1]:
        key = (scores_a.mean(0) - scores_b.mean(0)).abs()
        return torch.nonzero(torch.isin(key, torch.unique(key)[:num_labels])).squeeze(1)
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "summed the models' scores instead of averaging them: the same order on paper, but in floats |sum_k a - sum_k b| "
    "breaks ties that |mean_k a - mean_k b| keeps (and keeps some it breaks); take the mean",
)
def select_sum_over_models(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, uncertain=lambda a, b: (a.sum(0) - b.sum(0)).abs())


@wrong(
    "select_pairs",
    "numpy's argsort (quicksort by default) is not stable: pairs of equal keys come back in no set order; use "
    "torch.sort(key, stable=True) (or np.argsort(..., kind='stable'))",
)
def select_numpy_argsort(scores_a, scores_b, num_labels, selection):
    if selection == "uncertain" and 1 <= num_labels <= scores_a.shape[1]:
        key = (scores_a.mean(0) - scores_b.mean(0)).abs()
        return torch.from_numpy(key.numpy().argsort()[:num_labels].copy()).sort().values
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "wrong output shape",
)
def select_mask(scores_a, scores_b, num_labels, selection):
    picked = _select(scores_a, scores_b, num_labels, selection)
    mask = torch.zeros(scores_a.shape[1], dtype=torch.bool)
    mask[picked] = True
    return mask


@wrong("select_pairs", "returned dtype torch.float32, expected torch.int64")
def select_float_indices(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection).to(scores_a.dtype)


@wrong(
    "select_pairs",
    "outside 1 to 8: raise ValueError",
)
def select_no_range_check(scores_a, scores_b, num_labels, selection):
    m = min(max(num_labels, 1), scores_a.shape[1])
    return _select(scores_a, scores_b, m, selection)[:num_labels]


@wrong(
    "select_pairs",
    "not random, uncertain or disagreement: raise ValueError",
)
def select_unknown_is_random(scores_a, scores_b, num_labels, selection):
    known = selection if selection in ("uncertain", "disagreement") else "random"
    return _select(scores_a, scores_b, num_labels, known)


@wrong(
    "select_pairs",
    "changed its input `scores_a` in place",
)
def select_in_place(scores_a, scores_b, num_labels, selection):
    picked = _select(scores_a, scores_b, num_labels, selection)
    if selection in ("uncertain", "disagreement"):
        scores_a.sub_(scores_b)
    return picked


@wrong(
    "select_pairs",
    "torch.topk (or an unstable sort) returns tied keys in no set order; ties go to the lower index: "
    "torch.sort(key, stable=True)",
)
def select_topk(scores_a, scores_b, num_labels, selection):
    if selection in ("uncertain", "disagreement") and 1 <= num_labels <= scores_a.shape[1]:
        if selection == "disagreement" and scores_a.shape[0] < 2:
            raise ValueError("one model")
        if selection == "uncertain":
            picked = torch.topk((scores_a.mean(0) - scores_b.mean(0)).abs(), num_labels, largest=False).indices
        else:
            picked = torch.topk(torch.sigmoid(scores_a - scores_b).var(0), num_labels).indices
        return picked.sort().values
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "torch.argsort (or torch.sort) without stable=True returns tied keys in no set order; ties go to the lower "
    "index: torch.sort(key, stable=True)",
)
def select_unstable_sort(scores_a, scores_b, num_labels, selection):
    if selection in ("uncertain", "disagreement") and 1 <= num_labels <= scores_a.shape[1]:
        if selection == "disagreement" and scores_a.shape[0] < 2:
            raise ValueError("one model")
        if selection == "uncertain":
            key = (scores_a.mean(0) - scores_b.mean(0)).abs()
        else:
            key = -torch.sigmoid(scores_a - scores_b).var(0)
        return torch.argsort(key)[:num_labels].sort().values
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "rounded the keys before sorting; keys apart in the 4th decimal are not a tie: sort the keys as they are",
)
def select_rounded_keys(scores_a, scores_b, num_labels, selection):
    def unsure(a, b):
        return torch.round((a.mean(0) - b.mean(0)).abs(), decimals=3)

    def spread(a, b):
        return -torch.round(torch.sigmoid(a - b).var(0), decimals=3)

    return _select(scores_a, scores_b, num_labels, selection, uncertain=unsure, spread=spread)


@wrong(
    "select_pairs",
    "computed the keys in float32 (.float()): float64 scores whose differences are apart by 1e-10 became a tie; "
    "compute in the scores' own dtype",
)
def select_in_float32(scores_a, scores_b, num_labels, selection):
    return _select(scores_a.float(), scores_b.float(), num_labels, selection)


@wrong(
    "select_pairs",
    "'uncertain' measured |sigmoid(mean a - mean b) - 1/2|: in float32 sigmoid rounds every difference above about "
    "17 to 1, so far-apart pairs tie; compare |mean a - mean b| itself",
)
def select_probability_distance(scores_a, scores_b, num_labels, selection):
    def unsure(a, b):
        return (torch.sigmoid(a.mean(0) - b.mean(0)) - 0.5).abs()

    return _select(scores_a, scores_b, num_labels, selection, uncertain=unsure)


@wrong(
    "select_pairs",
    "'uncertain' averaged the models' probabilities sigmoid(a - b); the proxy is the models' mean SCORE: take "
    "|mean_k a - mean_k b|",
)
def select_mean_of_probabilities(scores_a, scores_b, num_labels, selection):
    def unsure(a, b):
        return (torch.sigmoid(a - b).mean(0) - 0.5).abs()

    return _select(scores_a, scores_b, num_labels, selection, uncertain=unsure)


@wrong(
    "select_pairs",
    "'disagreement' took the variance of sigmoid(a) - sigmoid(b); each model's Bradley-Terry probability is "
    "sigmoid(a - b)",
)
def select_difference_of_sigmoids(scores_a, scores_b, num_labels, selection):
    return _select(
        scores_a, scores_b, num_labels, selection, spread=lambda a, b: -(torch.sigmoid(a) - torch.sigmoid(b)).var(0)
    )


@wrong(
    "select_pairs",
    "'disagreement' compared the first two models only; take the variance over all k models",
)
def select_first_two_models(scores_a, scores_b, num_labels, selection):
    def spread(a, b):
        p = torch.sigmoid(a - b)
        return -(p[0] - p[1]).abs()

    return _select(scores_a, scores_b, num_labels, selection, spread=spread)


@wrong(
    "select_pairs",
    "never considered the last pair (a loop over range(C - 1)); every one of the C pairs is a candidate",
)
def select_skips_the_last_pair(scores_a, scores_b, num_labels, selection):
    c = scores_a.shape[1]
    if selection in ("uncertain", "disagreement") and 1 <= num_labels < c:
        return _select(scores_a[:, :-1], scores_b[:, :-1], num_labels, selection)
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "'disagreement' took the range (max - min) of the probabilities; take their variance over the k models",
)
def select_range_of_probabilities(scores_a, scores_b, num_labels, selection):
    def spread(a, b):
        p = torch.sigmoid(a - b)
        return -(p.max(0).values - p.min(0).values)

    return _select(scores_a, scores_b, num_labels, selection, spread=spread)


@wrong(
    "select_pairs",
    "'disagreement' took the variance of the models' votes sign(a - b); take it of their probabilities sigmoid(a - b)",
)
def select_variance_of_votes(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, spread=lambda a, b: -torch.sign(a - b).var(0))


@wrong(
    "select_pairs",
    "'disagreement' took the variance of log sigmoid(a - b); the models' log-probabilities spread most where they all "
    "agree b is far better: take the variance of the probabilities sigmoid(a - b) themselves",
)
def select_variance_of_log_probabilities(scores_a, scores_b, num_labels, selection):
    return _select(
        scores_a, scores_b, num_labels, selection, spread=lambda a, b: -torch.nn.functional.logsigmoid(a - b).var(0)
    )


@wrong(
    "select_pairs",
    "the variance as E[p^2] - E[p]^2: in float32 the two terms cancel and small variances come out wrong; use "
    "torch.var (deviations from the mean)",
)
def select_variance_by_cancellation(scores_a, scores_b, num_labels, selection):
    def spread(a, b):
        p = torch.sigmoid(a - b)
        k = p.shape[0]
        return -((p * p).mean(0) - p.mean(0) ** 2) * k / max(k - 1, 1)

    return _select(scores_a, scores_b, num_labels, selection, spread=spread)


@wrong(
    "select_pairs",
    "returned the sorted keys (the differences or variances), not the indices of the pairs they belong to",
)
def select_returned_keys(scores_a, scores_b, num_labels, selection):
    if selection == "uncertain" and 1 <= num_labels <= scores_a.shape[1]:
        key = (scores_a.mean(0) - scores_b.mean(0)).abs()
        return torch.sort(key, stable=True).values[:num_labels].long()
    if selection == "disagreement" and 1 <= num_labels <= scores_a.shape[1] and scores_a.shape[0] > 1:
        key = torch.sigmoid(scores_a - scores_b).var(0)
        return torch.sort(key, stable=True, descending=True).values[:num_labels].long()
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "two mistakes: 'uncertain' picked the MOST certain pairs, and the indices are in the order of their keys, not "
    "increasing",
)
def select_most_certain_in_key_order(scores_a, scores_b, num_labels, selection):
    return _select(
        scores_a, scores_b, num_labels, selection, descending=selection == "uncertain", order=lambda picked: picked
    )


# ================ proxy_agreement (TASKS.md §16.3) ==================================================================

# --- its cases

# TASKS.md §16.3: 8 labelled pairs. Pairs 2 and 6 are ties of the annotator (they do not count); on pair 4 the
# proxy ties (it agrees with nobody). Of the 6 counted pairs the proxy orders 3 as the annotator (0, 1, 7): 1/2.
BOOK_PROXY_A = [1.3, -0.2, 0.7, 0.4, 0.5, 2.1, -1.0, 0.9]
BOOK_PROXY_B = [0.8, 0.6, 0.1, 1.1, 0.5, -0.3, 0.2, 1.4]
BOOK_GOLD_A = [1.0, -1.0, 0.0, 1.0, 1.0, -1.0, 0.0, 0.333]
BOOK_GOLD_B = [0.0, 1.0, 0.0, 0.333, -1.0, 1.0, 0.0, 1.0]


def _agreement_args(pa, pb, ga, gb) -> list:
    return [("proxy_a", pa), ("proxy_b", pb), ("gold_a", ga), ("gold_b", gb)]


def _gold_values(g: torch.Generator, n: int, dtype=F64) -> torch.Tensor:
    """``n`` gold scores among the rule reward's few values, so that ties happen as they do in training."""
    values = torch.tensor([-1.0, 0.0, 1 / 3, 1.0], dtype=F64)
    return values[torch.randint(0, 4, (n,), generator=g)].to(dtype)


@cases_of("proxy_agreement")
def proxy_agreement_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _unchanged(_adder(key, cases, "proxy_agreement", fresh))
    pa, pb, ga, gb = (torch.tensor(v) for v in (BOOK_PROXY_A, BOOK_PROXY_B, BOOK_GOLD_A, BOOK_GOLD_B))
    example = "the §16.3 example (8 pairs: 2 gold ties, 1 proxy tie)"
    if fresh:
        order = _perm(g, 8)
        pa, pb, ga, gb = (v[order] for v in (pa, pb, ga, gb))
        pa = pa + _uniform(g, -0.05, 0.05, 8, dtype=F32) * (pa != pb)
        example = f"a fresh variant of the §16.3 example (proxy_a = {_show(pa)}, gold_a = {_show(ga)})"
    add("book_example", f"proxy_agreement on {example}", _agreement_args(pa, pb, ga, gb), book="§16.3")
    rng = g if fresh else _own(1603)
    pa, pb = _uniform(rng, -2, 2, 6), _uniform(rng, -2, 2, 6)
    sign = torch.sign(pa - pb)
    add(
        "all_agree",
        "proxy_agreement where the gold orders every pair as the proxy does (1)",
        _agreement_args(pa, pb, sign, -sign),
    )
    add(
        "all_disagree",
        "proxy_agreement where the gold orders every pair against the proxy (0)",
        _agreement_args(pa, pb, -sign, sign),
    )
    gold = _uniform(rng, -1, 1, 5)
    add(
        "every_pair_a_gold_tie",
        "proxy_agreement where the annotator ties every pair (nothing to measure: NaN)",
        _agreement_args(_uniform(rng, -2, 2, 5), _uniform(rng, -2, 2, 5), gold, gold.clone()),
    )
    ga, gb = torch.tensor([1.0, 0.0, -1.0, 1.0]), torch.tensor([0.0, 1.0, 1.0, -1.0])
    same = _uniform(rng, -1, 1, 4)
    add(
        "proxy_ties_agree_with_nobody",
        f"proxy_agreement where the proxy ties every pair, gold_a = {_show(ga)}, gold_b = {_show(gb)} (0)",
        _agreement_args(same, same.clone(), ga, gb),
    )
    tiny = 1e-4 if not fresh else _uniform(g, 1, 50, 1).item() * 1e-5
    add(
        "tiny_proxy_differences",
        f"proxy_agreement where the proxy prefers each reply by only {tiny:g} (a preference still: 1)",
        _agreement_args(torch.tensor([tiny, 0.0, 0.5]), torch.tensor([0.0, tiny, 0.5 - tiny]),
                        torch.tensor([1.0, 0.0, 1.0]), torch.tensor([0.0, 1.0, -1.0])),
    )  # fmt: skip
    if not fresh:
        t32, t64, n, share, levels = 1e-23, 1e-9, 2, "1", torch.tensor([1.0, 0.5], dtype=F64)
        pairs = ""
        a_wins, proxy_agrees = torch.tensor([True, False]), torch.tensor([True, True])
    else:  # magnitudes alone stay within allclose of the published ones: new pairs, orders, and one disagreeing
        t32, t64 = _uniform(g, 2, 9, 1).item() * 1e-24, _uniform(g, 2, 9, 1).item() * 1e-10
        n = int(torch.randint(3, 7, (1,), generator=g))
        a_wins, proxy_agrees = torch.rand(n, generator=g) < 0.5, _perm(g, n) != 0
        share, levels, pairs = f"{n - 1}/{n}", _uniform(g, 0.5, 1.5, n), f" on {n} pairs"

    def tiny_pairs(t: float, dtype: torch.dtype, gold_levels: torch.Tensor) -> list:
        """Pairs whose proxy scores are apart by ``t`` (a ahead where a_wins) and whose gold scores are apart by ``t``
        above ``gold_levels``, the same way where proxy_agrees and the other way elsewhere."""
        ahead, level = torch.tensor(t, dtype=F64), torch.tensor(0.0, dtype=F64)
        gold_wins = a_wins == proxy_agrees
        return _agreement_args(
            torch.where(a_wins, ahead, level).to(dtype),
            torch.where(a_wins, level, ahead).to(dtype),
            (gold_levels + torch.where(gold_wins, ahead, level)).to(dtype),
            (gold_levels + torch.where(gold_wins, level, ahead)).to(dtype),
        )

    add(
        "tiny_differences_float32",
        f"proxy_agreement in float32{pairs} where proxy and gold differ by {t32:.3g} on each pair (still "
        f"preferences: {share}; a product of the two differences underflows to 0)",
        tiny_pairs(t32, torch.float32, torch.zeros(n, dtype=F64)),
    )
    add(
        "tiny_differences_float64",
        f"proxy_agreement in float64{pairs} where proxy and gold differ by {t64:.3g} on each pair (preferences, "
        f"not ties: {share})",
        tiny_pairs(t64, F64, levels),
    )
    # A float32 proxy with float64 gold: the gold's differences are compared in float64 (cast to float32 first,
    # 1 + 1e-9 and 1 are one number: a tie that is none).
    pa, pb = torch.tensor([0.7, 0.1, -0.3]), torch.tensor([0.2, 0.4, -0.3])
    ga = torch.tensor([1.0 + 1e-9, 0.5, 2.0], dtype=F64)
    gb = torch.tensor([1.0, 0.5 + 1e-9, 1.0], dtype=F64)
    told = "1e-9 on two pairs"
    if fresh:
        order = _perm(g, 3)
        apart = _uniform(g, 2, 9, 1).item() * 1e-10
        level = _uniform(g, 0.5, 1.5, 1).item()
        pa, pb = (pa + _uniform(g, 0.05, 0.15, 3, dtype=torch.float32) * (pa != pb))[order], pb[order]
        ga = torch.tensor([level + apart, level, 2.0], dtype=F64)[order]
        gb = torch.tensor([level, level + apart, 1.0], dtype=F64)[order]
        told = f"{apart:.3g} on two pairs"
    add(
        "float64_gold_apart_in_float32_ties",
        f"proxy_agreement with a float32 proxy and float64 gold apart by {told} (preferences in float64, ties only "
        "if cast to float32; a proxy tie on the other: 2/3)",
        _agreement_args(pa, pb, ga, gb),
    )
    pa, pb = torch.tensor([0.5, 0.1, -0.2, 0.3]), torch.tensor([0.2, 0.4, 0.0, 0.3])
    ga, gb = torch.tensor([2, 1, 0, 1]), torch.tensor([1, 1, 3, 0])
    if fresh:  # pair 0, at a fresh place, agrees with a proxy apart by less than 1 (a cast to int64 ties it)
        pa, pb = _uniform(g, -1, 1, 6, dtype=F32), _uniform(g, -1, 1, 6, dtype=F32)
        ga, gb = torch.randint(0, 4, (6,), generator=g), torch.randint(0, 4, (6,), generator=g)
        pa[0], pb[0], ga[0], gb[0] = 0.5 + pa[0].abs() / 4, 0.2 - pb[0].abs() / 4, 3, 1
        order = _perm(g, 6)
        pa, pb, ga, gb = pa[order], pb[order], ga[order], gb[order]
    add(
        "integer_gold",
        "proxy_agreement with int64 gold scores (the result has the proxy's dtype)",
        _agreement_args(pa, pb, ga, gb),
    )
    add(
        "inputs_unmodified",
        "proxy_agreement",
        _agreement_args(_uniform(rng, -2, 2, 6), _uniform(rng, -2, 2, 6), _gold_values(rng, 6), _gold_values(rng, 6)),
        unmodified=True,
    )
    for dtype in DTYPES:
        for n in (1, 7, 64, 500):
            pa, pb = torch.randn(n, generator=rng, dtype=F64).to(dtype), torch.randn(n, generator=rng, dtype=F64)
            ga, gb = _gold_values(rng, n), _gold_values(rng, n)
            if n == 1:
                ga, gb = torch.tensor([1.0], dtype=F64), torch.tensor([0.0], dtype=F64)
            add(
                f"random_{_name(dtype)}_N{n}",
                f"proxy_agreement on {n} random {dtype} pairs, gold among -1, 0, 1/3, 1 (ties happen)",
                _agreement_args(pa, pb.to(dtype), ga.to(dtype), gb.to(dtype)),
            )
    # A pair both tie (pair 0): the annotator's tie leaves it out, whatever the proxy says (sign 0 == sign 0 is no
    # agreement); of the other three the proxy orders two as the annotator: 2/3.
    pa, pb = torch.tensor([0.3, 0.9, -0.2, 0.4]), torch.tensor([0.3, 0.1, 0.6, -0.5])
    ga, gb = torch.tensor([0.5, 1.0, 1.0, 0.0]), torch.tensor([0.5, 0.0, 0.0, -1.0])
    if fresh:
        order, shift = _perm(g, 4), _uniform(g, -0.5, 0.5, 1).item()
        pa, pb, ga, gb = pa[order] + shift, pb[order] + shift, ga[order], gb[order]
    add(
        "a_pair_both_tie",
        f"proxy_agreement(proxy_a={_show(pa)}, proxy_b={_show(pb)}, gold_a={_show(ga)}, gold_b={_show(gb)}) (one pair "
        "ties for both: it does not count; 2/3)",
        _agreement_args(pa, pb, ga, gb),
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("proxy_agreement")
def agreement_written_out(proxy_a, proxy_b, gold_a, gold_b):
    same = ((proxy_a > proxy_b) & (gold_a > gold_b)) | ((proxy_a < proxy_b) & (gold_a < gold_b))
    return same.sum().to(proxy_a.dtype) / (gold_a != gold_b).sum().to(proxy_a.dtype)


@right("proxy_agreement")
def agreement_mean_over_counted(proxy_a, proxy_b, gold_a, gold_b):
    counted = gold_a != gold_b
    agree = torch.sign(proxy_a - proxy_b) == torch.sign(gold_a - gold_b)
    return agree[counted].to(proxy_a.dtype).mean()


@right("proxy_agreement")
def agreement_sign_product(proxy_a, proxy_b, gold_a, gold_b):
    product = torch.sign(proxy_a - proxy_b) * torch.sign((gold_a - gold_b).to(proxy_a.dtype))
    return (product > 0).to(proxy_a.dtype).sum() / (product != 0).logical_or(gold_a != gold_b).to(proxy_a.dtype).sum()


def _agreement(proxy_a, proxy_b, gold_a, gold_b, *, agree=None, counted=None, share=None):
    """The key's detector with one step replaced: ``agree`` / ``counted`` (pa, pb, ga, gb) -> (N,) bool, ``share``
    (agree, counted, dtype) -> the result."""
    c = (gold_a != gold_b) if counted is None else counted(proxy_a, proxy_b, gold_a, gold_b)
    if agree is None:
        a = torch.sign(proxy_a - proxy_b) == torch.sign(gold_a - gold_b).to(proxy_a.dtype)
    else:
        a = agree(proxy_a, proxy_b, gold_a, gold_b)
    if share is not None:
        return share(a, c, proxy_a.dtype)
    return (a & c).sum().to(proxy_a.dtype) / c.sum().to(proxy_a.dtype)


@wrong(
    "proxy_agreement",
    "counted the annotator's ties as disagreements (divided by every pair); a tie says nothing about the order: "
    "count only the pairs with gold_a != gold_b",
)
def agreement_ties_in_denominator(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(
        proxy_a, proxy_b, gold_a, gold_b, counted=lambda pa, pb, ga, gb: torch.ones_like(ga, dtype=torch.bool)
    )


@wrong(
    "proxy_agreement",
    "counted the annotator's ties as agreements; a tie says nothing about the order: leave those pairs out",
)
def agreement_ties_agree(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b, share=_ties_agree)


def _ties_agree(agree, counted, dtype):
    """A share where every tie of the annotator agrees: over all N pairs."""
    return ((agree & counted) | ~counted).sum().to(dtype) / torch.tensor(float(len(counted)), dtype=dtype)


@wrong(
    "proxy_agreement",
    "a proxy tie agreed with the annotator when b won ((proxy_a > proxy_b) == (gold_a > gold_b)); a proxy that "
    "scores both replies alike prefers neither: compare the signs",
)
def agreement_proxy_tie_agrees(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b, agree=lambda pa, pb, ga, gb: (pa > pb) == (ga > gb))


@wrong(
    "proxy_agreement",
    "two mistakes: a proxy tie counted as preferring a (proxy_a >= proxy_b), and the annotator's ties counted as "
    "agreements; a proxy tie agrees with nobody, and a tie of the annotator is left out",
)
def agreement_greater_or_equal_and_ties_agree(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(
        proxy_a, proxy_b, gold_a, gold_b, agree=lambda pa, pb, ga, gb: (pa >= pb) == (ga > gb), share=_ties_agree
    )


@wrong(
    "proxy_agreement",
    "two mistakes: ((proxy_a > proxy_b) == (gold_a > gold_b)).mean() over every pair: the annotator's ties were "
    "counted (leave them out: NaN when nothing counts), and a proxy tie agreed where b won (compare the signs)",
)
def agreement_greater_equals_greater_over_every_pair(proxy_a, proxy_b, gold_a, gold_b):
    return ((proxy_a > proxy_b) == (gold_a > gold_b)).to(proxy_a.dtype).mean()


@wrong(
    "proxy_agreement",
    "a proxy tie counted as preferring a (proxy_a >= proxy_b); it prefers neither: a proxy tie agrees with nobody",
)
def agreement_greater_or_equal(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b, agree=lambda pa, pb, ga, gb: (pa >= pb) == (ga > gb))


@wrong(
    "proxy_agreement",
    "counted a pair that both tie (sign 0 == sign 0) as an agreement; a tie of the annotator leaves the pair out "
    "whatever the proxy says: count agreements among the counted pairs only",
)
def agreement_both_ties_agree(proxy_a, proxy_b, gold_a, gold_b):
    def share(agree, counted, dtype):
        return agree.sum().to(dtype) / counted.sum().to(dtype)

    return _agreement(proxy_a, proxy_b, gold_a, gold_b, share=share)


@wrong(
    "proxy_agreement",
    "returned the share of DISagreements; the detector is the share of counted pairs the proxy orders as the annotator",
)
def agreement_flipped(proxy_a, proxy_b, gold_a, gold_b):
    return 1 - _agreement(proxy_a, proxy_b, gold_a, gold_b)


@wrong(
    "proxy_agreement",
    "returned the number of agreeing pairs; divide by the number of counted pairs (a share in [0, 1])",
)
def agreement_count(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b, share=lambda a, c, dtype: (a & c).sum().to(dtype))


@wrong(
    "proxy_agreement",
    "returned the mean of sign products sign(proxy_a - proxy_b) * sign(gold_a - gold_b) (agreements minus "
    "disagreements, in [-1, 1]); return the share of agreements, in [0, 1]",
)
def agreement_sign_correlation(proxy_a, proxy_b, gold_a, gold_b):
    counted = gold_a != gold_b
    product = torch.sign(proxy_a - proxy_b) * torch.sign(gold_a - gold_b).to(proxy_a.dtype)
    return product[counted].sum() / counted.sum().to(proxy_a.dtype)


@wrong(
    "proxy_agreement",
    "divided with // (floor division): a share below 1 floors to 0; divide with /",
)
def agreement_floor_division(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(
        proxy_a, proxy_b, gold_a, gold_b, share=lambda a, c, dtype: (a & c).sum().to(dtype) // c.sum().to(dtype)
    )


@wrong(
    "proxy_agreement",
    "returned 0 when every pair is a tie of the annotator; nothing was measured there: return NaN (0 / 0)",
)
def agreement_zero_without_pairs(proxy_a, proxy_b, gold_a, gold_b):
    def share(agree, counted, dtype):
        return (agree & counted).sum().to(dtype) / counted.sum().clamp(min=1).to(dtype)

    return _agreement(proxy_a, proxy_b, gold_a, gold_b, share=share)


@wrong(
    "proxy_agreement",
    "counted the pairs the PROXY does not tie; a pair counts when the annotator prefers one reply (gold_a != gold_b)",
)
def agreement_counted_by_proxy(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b, counted=lambda pa, pb, ga, gb: pa != pb)


@wrong(
    "proxy_agreement",
    "left the proxy's ties out of the count; a pair counts when the annotator prefers one reply, and there a proxy "
    "tie is a disagreement (it agrees with nobody)",
)
def agreement_proxy_ties_left_out(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b, counted=lambda pa, pb, ga, gb: (ga != gb) & (pa != pb))


@wrong(
    "proxy_agreement",
    "added a small eps to the number of counted pairs; the share is agreeing / counted exactly, and NaN when nothing "
    "counts (there is nothing to measure)",
)
def agreement_eps_in_denominator(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(
        proxy_a, proxy_b, gold_a, gold_b, share=lambda a, c, dtype: (a & c).sum().to(dtype) / (c.sum().to(dtype) + 1e-8)
    )


@wrong(
    "proxy_agreement",
    "read the arguments as (proxy_a, gold_a, proxy_b, gold_b); the order is proxy_a, proxy_b, gold_a, gold_b",
)
def agreement_arguments_interleaved(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, gold_a.to(proxy_a.dtype), proxy_b.to(gold_a.dtype), gold_b)


@wrong(
    "proxy_agreement",
    "a proxy tie got half a point; a proxy that scores both replies alike prefers neither: it agrees with nobody",
)
def agreement_half_point_for_a_tie(proxy_a, proxy_b, gold_a, gold_b):
    def share(agree, counted, dtype):
        tie = (proxy_a == proxy_b) & counted
        return ((agree & counted).sum().to(dtype) + 0.5 * tie.sum().to(dtype)) / counted.sum().to(dtype)

    return _agreement(proxy_a, proxy_b, gold_a, gold_b, share=share)


@wrong(
    "proxy_agreement",
    "counted only the pairs where the annotator prefers reply a; count every pair where it prefers either one",
)
def agreement_only_where_a_wins(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b, counted=lambda pa, pb, ga, gb: ga > gb)


@wrong(
    "proxy_agreement",
    "counted an agreement only where both prefer reply a ((proxy_a > proxy_b) & (gold_a > gold_b)); both preferring "
    "b agrees too",
)
def agreement_only_a_agrees(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b, agree=lambda pa, pb, ga, gb: (pa > pb) & (ga > gb))


@wrong(
    "proxy_agreement",
    "averaged the proxy's Bradley-Terry probability of the annotator's reply (a soft accuracy); the detector counts "
    "the pairs the proxy strictly orders as the annotator",
)
def agreement_soft(proxy_a, proxy_b, gold_a, gold_b):
    counted = gold_a != gold_b
    p = torch.where(gold_a > gold_b, torch.sigmoid(proxy_a - proxy_b), torch.sigmoid(proxy_b - proxy_a))
    return p[counted].sum() / counted.sum().to(proxy_a.dtype)


@wrong(
    "proxy_agreement",
    "treated proxy differences below a tolerance as ties; only equal scores are a tie: a preference by 1e-4 is a "
    "preference",
)
def agreement_with_a_tolerance(proxy_a, proxy_b, gold_a, gold_b):
    def agree(pa, pb, ga, gb):
        d = torch.where((pa - pb).abs() < 1e-3, torch.zeros_like(pa), pa - pb)
        return torch.sign(d) == torch.sign(ga - gb).to(pa.dtype)

    return _agreement(proxy_a, proxy_b, gold_a, gold_b, agree=agree)


@wrong(
    "proxy_agreement",
    "two mistakes: a proxy tie got half a point (it agrees with nobody), and the annotator's ties were counted as "
    "disagreements (divided by every pair)",
)
def agreement_half_point_and_every_pair(proxy_a, proxy_b, gold_a, gold_b):
    def share(agree, counted, dtype):
        tie = (proxy_a == proxy_b) & counted
        return ((agree & counted).sum().to(dtype) + 0.5 * tie.sum().to(dtype)) / torch.tensor(len(counted), dtype=dtype)

    return _agreement(proxy_a, proxy_b, gold_a, gold_b, share=share)


@wrong(
    "proxy_agreement",
    "left out the last pair (a loop over range(N - 1)); every labelled pair counts",
)
def agreement_skips_the_last_pair(proxy_a, proxy_b, gold_a, gold_b):
    if len(proxy_a) < 2:
        return _agreement(proxy_a, proxy_b, gold_a, gold_b)
    return _agreement(proxy_a[:-1], proxy_b[:-1], gold_a[:-1], gold_b[:-1])


@wrong(
    "proxy_agreement",
    "compared sigmoid(proxy_a - proxy_b) with 1/2: sigmoid rounds a small difference to exactly 0.5, a tie; compare "
    "the signs of the differences themselves",
)
def agreement_sigmoid_against_half(proxy_a, proxy_b, gold_a, gold_b):
    def agree(pa, pb, ga, gb):
        return torch.sign(torch.sigmoid(pa - pb) - 0.5) == torch.sign(ga - gb).to(pa.dtype)

    return _agreement(proxy_a, proxy_b, gold_a, gold_b, agree=agree)


@wrong(
    "proxy_agreement",
    "tested agreement as (proxy_a - proxy_b) * (gold_a - gold_b) > 0: the product of two small differences "
    "underflows to 0; compare the two signs",
)
def agreement_by_product(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(
        proxy_a, proxy_b, gold_a, gold_b, agree=lambda pa, pb, ga, gb: (pa - pb) * (ga - gb).to(pa.dtype) > 0
    )


@wrong(
    "proxy_agreement",
    "called the annotator's scores a tie when they are close (torch.isclose); only equal scores are a tie",
)
def agreement_close_gold_is_a_tie(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(
        proxy_a, proxy_b, gold_a, gold_b,
        counted=lambda pa, pb, ga, gb: ~torch.isclose(ga.to(pa.dtype), gb.to(pa.dtype)),
    )  # fmt: skip


@wrong(
    "proxy_agreement",
    "cast the proxy's scores to the gold's dtype: with integer gold they are truncated (0.4 and 0.9 both become 0, a "
    "tie); compare each side in its own dtype",
)
def agreement_proxy_in_gold_dtype(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a.to(gold_a.dtype), proxy_b.to(gold_a.dtype), gold_a, gold_b).to(proxy_a.dtype)


@wrong(
    "proxy_agreement",
    "two mistakes: compared with the annotator's order reversed (sign(gold_b - gold_a)), and divided by every pair "
    "(the annotator's ties counted as disagreements); compare sign(proxy_a - proxy_b) with sign(gold_a - gold_b) on "
    "the pairs with gold_a != gold_b",
)
def agreement_gold_reversed_over_every_pair(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(
        proxy_a, proxy_b, gold_b, gold_a, counted=lambda pa, pb, ga, gb: torch.ones_like(ga, dtype=torch.bool)
    )


@wrong(
    "proxy_agreement",
    "cast the gold to the proxy's dtype before comparing: float64 gold scores apart by 1e-9 became a tie in float32; "
    "compare the gold in its own dtype (gold_a != gold_b, sign(gold_a - gold_b))",
)
def agreement_gold_in_proxy_dtype(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a.to(proxy_a.dtype), gold_b.to(proxy_a.dtype))


@wrong("proxy_agreement", "returned dtype torch.float32, expected torch.float64")
def agreement_float32(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b).to(torch.float32)


@wrong("proxy_agreement", "returned float, expected a torch.Tensor")
def agreement_python_float(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b).item()


@wrong(
    "proxy_agreement",
    "changed its input `proxy_a` in place",
)
def agreement_in_place(proxy_a, proxy_b, gold_a, gold_b):
    out = _agreement(proxy_a, proxy_b, gold_a, gold_b)
    proxy_a.sub_(proxy_b)
    return out


@wrong(
    "proxy_agreement",
    "compared with the annotator's order reversed (sign(gold_b - gold_a)); the proxy agrees when it prefers the reply "
    "the annotator scored higher: sign(proxy_a - proxy_b) == sign(gold_a - gold_b)",
)
def agreement_gold_reversed(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_b, gold_a)
