"""The grading book of select_pairs (rlhf_practice/rl/online.py, TASKS.md §16.2): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.online._shared import F32, _own, _unchanged
from instructor.cases import DTYPES, F64, _adder, _name, _perm, _show, _uniform, cases_of
from instructor.mistakes import right, wrong

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


def _third_anywhere(g: torch.Generator, scores: torch.Tensor) -> torch.Tensor:
    """(k, 3) scores with pair 2 moved to a fresh place, pairs 0 and 1 kept in their order."""
    third = int(torch.randint(0, 3, (), generator=g))
    return scores[:, [0, 1][:third] + [2] + [0, 1][third:]]


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
    if fresh:
        fine = _third_anywhere(g, fine)
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
    # A key equal on paper under another monotone map is not equal in floats: a difference of 1e-30 squares to 0 in
    # float32, a tie with a difference of 0 that the lower index would win.
    t = 1e-30 if not fresh else _uniform(g, 1, 9, 1).item() * 10.0 ** -int(torch.randint(24, 33, (), generator=g))
    tiny = torch.tensor([[t, 0.0, 0.5]], dtype=F32) * (
        1 if not fresh else float(torch.randint(0, 2, (), generator=g)) * 2 - 1
    )
    if fresh:  # the tiny difference stays before the zero one
        tiny = _third_anywhere(g, tiny)
    add(
        "uncertain_tiny_difference",
        f"select_pairs(scores_a={_show(tiny)} (float32), scores_b=zeros, num_labels=1, selection='uncertain') (a "
        f"difference of {t:.2g} is not a tie with 0, though its square underflows to 0 in float32)",
        _select_args(tiny, torch.zeros_like(tiny), 1, "uncertain"),
    )
    # Every pair asked for (num_labels = C): the selection is still checked before anything is picked.
    own = g if fresh else _own(1604)
    c = 5 if not fresh else int(torch.randint(3, 9, (), generator=g))
    every = _uniform(own, -2, 2, 1, c)
    name = "everything" if not fresh else ("all", "every", "most")[int(torch.randint(0, 3, (), generator=g))]
    for selection, why in ((name, "not random, uncertain or disagreement"), ("disagreement", "one model")):
        add(
            f"every_pair_{'unknown_selection' if selection == name else 'one_model_disagreement'}_raises",
            f"select_pairs on 1 model x {c} pairs, num_labels={c} (every pair), selection={selection!r} ({why}: "
            "raise ValueError whatever num_labels is)",
            _select_args(every, every.flip(1), c, selection),
            raises="ValueError",
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


@wrong(
    "select_pairs",
    "broke ties with a small jitter (the key plus 1e-6 x the index): keys apart by less than the jitter swap their "
    "order; sort the keys as they are, stably (torch.sort(key, stable=True) puts a tie's lower index first)",
)
def select_jitter_tie_break(scores_a, scores_b, num_labels, selection):
    def jitter(a):
        return 1e-6 * torch.arange(a.shape[1], dtype=a.dtype)

    def unsure(a, b):
        return (a.mean(0) - b.mean(0)).abs() + jitter(a)

    def spread(a, b):
        return -(torch.sigmoid(a - b).var(0) - jitter(a))

    return _select(scores_a, scores_b, num_labels, selection, uncertain=unsure, spread=spread)


@wrong(
    "select_pairs",
    "'uncertain' sorted the squared difference (mean a - mean b)**2: the same order on paper, but in float32 a "
    "difference below about 3e-23 squares to 0, a tie that is none; sort |mean a - mean b| itself",
)
def select_squared_difference(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, uncertain=lambda a, b: (a.mean(0) - b.mean(0)) ** 2)


@wrong(
    "select_pairs",
    "raise ValueError whatever num_labels is",
)
def select_every_pair_first(scores_a, scores_b, num_labels, selection):
    if num_labels == scores_a.shape[1]:  # "every pair, whatever the selection": before the selection is checked
        return torch.arange(num_labels)
    return _select(scores_a, scores_b, num_labels, selection)


@wrong(
    "select_pairs",
    "returned the positions torch.sort gives (its .indices: 0 to M - 1), not the picked pairs' indices in "
    "increasing order (its .values)",
)
def select_sort_positions(scores_a, scores_b, num_labels, selection):
    return _select(scores_a, scores_b, num_labels, selection, order=lambda picked: torch.sort(picked).indices)
