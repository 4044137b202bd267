"""The grading book of proxy_agreement (rlhf_practice/rl/online.py, TASKS.md §16.3): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.online._shared import F32, _own, _unchanged
from instructor.cases import DTYPES, F64, _adder, _name, _perm, _show, _uniform, cases_of
from instructor.mistakes import right, wrong

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
    # A float64 proxy apart by 1e-12 on two pairs: preferences in float64, ties if cast to float32; it disagrees
    # plainly on the third pair, the fourth is the annotator's tie: 2/3.
    apart, level = (1e-12, 1.0) if not fresh else (_uniform(g, 2, 9, 1).item() * 1e-13, _uniform(g, 0.5, 1.5, 1).item())
    pa = torch.tensor([level + apart, 0.5, 0.2, 0.3], dtype=F64)
    pb = torch.tensor([level, 0.5 + apart, 0.9, 0.3], dtype=F64)
    ga, gb = torch.tensor([1.0, 0.0, 1.0, 0.5], dtype=F64), torch.tensor([0.0, 1.0, 0.0, 0.5], dtype=F64)
    if fresh:
        order = _perm(g, 4)
        pa, pb, ga, gb = pa[order], pb[order], ga[order], gb[order]
    add(
        "float64_proxy_apart_in_float32_ties",
        f"proxy_agreement with a float64 proxy apart by {apart:.3g} on two pairs, which the annotator orders the same "
        "way (preferences in float64, ties only if cast to float32; a plain disagreement and a tie of the annotator "
        "besides: 2/3)",
        _agreement_args(pa, pb, ga, gb),
    )
    # Scores straight from a reward model in training carry a graph: the share is counted all the same (numpy, for
    # one, refuses them).
    own = g if fresh else _own(1605)
    n = 8 if not fresh else int(torch.randint(5, 12, (), generator=g))
    pa, pb = _uniform(own, -2, 2, n, dtype=F32), _uniform(own, -2, 2, n, dtype=F32)
    ga, gb = _gold_values(own, n), _gold_values(own, n)
    add(
        "proxy_scores_with_a_graph",
        f"proxy_agreement(proxy_a={_show(pa)}, proxy_b={_show(pb)}, gold_a={_show(ga)}, gold_b={_show(gb)}) where "
        "proxy_a and proxy_b require grad (scores straight from a reward model in training)",
        _agreement_args(pa, pb, ga, gb),
        grad_of=["proxy_a", "proxy_b"],
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


@wrong(
    "proxy_agreement",
    "divided the two integer counts (int64 / int64 gives torch's default float32) and cast the share afterwards: a "
    "float64 proxy's share is rounded to float32 (2/3 became 0.66666669); cast the counts to the proxy's dtype first",
)
def agreement_integer_counts_divided(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a, gold_b, share=lambda a, c, dtype: ((a & c).sum() / c.sum()).to(dtype))


@wrong(
    "proxy_agreement",
    "cast the annotator's scores to integers (.long()): 1/3 became 0, so pairs it prefers by a fraction became ties "
    "or changed order; compare the gold scores as they are",
)
def agreement_gold_to_integers(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a, proxy_b, gold_a.long(), gold_b.long())


@wrong(
    "proxy_agreement",
    "compared the proxy's scores in float32 (.float()): float64 scores apart by 1e-12 became ties; compare them in "
    "the proxy's own dtype",
)
def agreement_proxy_in_float32(proxy_a, proxy_b, gold_a, gold_b):
    return _agreement(proxy_a.float(), proxy_b.float(), gold_a, gold_b).to(proxy_a.dtype)


@wrong(
    "proxy_agreement",
    "rounded the share (to 4 decimals) because it is only logged; return agreeing / counted as it is: the logger "
    "rounds what it prints, the detector's number stays exact",
)
def agreement_rounded(proxy_a, proxy_b, gold_a, gold_b):
    return torch.round(_agreement(proxy_a, proxy_b, gold_a, gold_b), decimals=4)
