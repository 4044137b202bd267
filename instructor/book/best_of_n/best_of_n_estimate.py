"""The grading book of best_of_n_estimate (rlhf_practice/rl/best_of_n.py, TASKS.md §15.3): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.best_of_n._shared import F32, _own
from instructor.cases import DTYPES, F64, _adder, _name, _perm, _show, _uniform, cases_of
from instructor.mistakes import right, wrong

# --- its cases

# TASKS.md §15.3: B = 2 prompts, a pool of N = 4 replies each. Prompt 0: the proxy's favourite (0.7) has gold 0, so the
# estimate falls with n. Prompt 1: the proxy's top two (0.9) tie, with gold 1.0 and 0.0: each counts as their mean 0.5.
BOOK_PROXY = [[0.1, 0.7, 0.3, 0.5], [0.6, 0.9, 0.2, 0.9]]
BOOK_GOLD = [[1.0, 0.0, 0.5, 1.0], [-0.5, 1.0, 0.5, 0.0]]


def _estimate_args(proxy, scores, max_n=None) -> list:
    args = [("proxy_scores", proxy), ("scores", scores)]
    return args if max_n is None else [*args, ("max_n", max_n)]


def _fresh_book_pool(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh variant of the §15.3 pools: one of 4 distinct proxy scores, one whose top two tie with different
    gold; other values, in another order."""
    distinct = _uniform(g, 0.05, 0.95, 4)
    while len(set(distinct.tolist())) < 4:
        distinct = _uniform(g, 0.05, 0.95, 4)
    low = sorted(set(_uniform(g, 0.05, 0.45, 8).tolist()))[:2]
    top = _uniform(g, 0.55, 0.95, 1).item()
    tied = torch.tensor([low[0], low[1], top, top], dtype=F64)[_perm(g, 4)]
    gold = _uniform(g, -1, 1, 2, 4)
    ties = (tied == top).nonzero().flatten()
    gold[1, ties[1]] = gold[1, ties[0]] - 0.5 - _uniform(g, 0, 0.5, 1).item()  # the tied pair's gold differs
    return torch.stack([distinct, tied]), gold


def _tied(case: dict) -> bool:
    """Whether a case's proxy scores hold a tie within a prompt's pool."""
    proxy = dict(case["args"])["proxy_scores"]
    return any(len(set(row)) < len(row) for row in proxy.tolist())


def _tied_pools(g: torch.Generator, rows: int, size: int, runs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, size) proxy scores holding ``runs`` runs of 2 to 4 equal values each (at the bottom, in the middle, at
    the top of the pool), the rest distinct, and gold scores that differ within every run."""
    proxies, golds = [], []
    for _ in range(rows):
        values = _uniform(g, -2, 2, size).tolist()
        ranked = sorted(range(size), key=lambda i: values[i])
        start = 0
        for r in range(runs):  # runs spread from the lowest to the highest proxy scores
            length = 2 + int(torch.randint(0, 3, (), generator=g))
            start = min(max(start, r * size // runs), size - length)
            for i in ranked[start : start + length]:
                values[i] = values[ranked[start]]
            start += length
        proxies.append(values)
        golds.append(_uniform(g, -1, 1, size).tolist())
    return torch.tensor(proxies, dtype=F64), torch.tensor(golds, dtype=F64)


def _rule_reward_pool(g: torch.Generator, rows: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A pool as the pipeline scores one: a continuous proxy (a reward model's normalised score) and a gold in
    {-1, -1/3, 0, 1/3, 1} (the sentiment rule reward's values), correlated with the proxy."""
    gold = torch.tensor([-1.0, -1 / 3, 0.0, 1 / 3, 1.0], dtype=F64)[torch.randint(0, 5, (rows, size), generator=g)]
    proxy = gold + torch.randn(rows, size, generator=g, dtype=F64) * 0.7
    return proxy, gold


@cases_of("best_of_n_estimate")
def best_of_n_estimate_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "best_of_n_estimate", fresh)
    proxy, gold = torch.tensor(BOOK_PROXY, dtype=F64), torch.tensor(BOOK_GOLD, dtype=F64)
    example = f"the §15.3 example (proxy_scores = {BOOK_PROXY}, scores = {BOOK_GOLD}"
    if fresh:
        proxy, gold = _fresh_book_pool(g)
        example = f"a fresh variant of the §15.3 example (proxy_scores = {_show(proxy)}, scores = {_show(gold)}"
    proxy, gold = proxy.to(F32), gold.to(F32)
    # Each idea on its own first: the weights on the example's first prompt (no ties), max_n = N given explicitly,
    # then its second prompt alone (the tie), then the whole example. (The cases are put in this order at the end:
    # every pool without ties before any with them, the errors last.)
    first = f"the first prompt of {example.split(' (')[0]} alone (proxy_scores = {_show(proxy[:1])}, scores = "
    first += f"{_show(gold[:1])}: no ties, the weights alone"
    add("book_example_prompt_1", f"best_of_n_estimate on {first})", _estimate_args(proxy[:1], gold[:1]), book="§15.3")
    add(
        "book_example_prompt_1_max_n_4",
        f"best_of_n_estimate on {first}, max_n=4 = N: allowed, best-of-N keeps the proxy's top reply)",
        _estimate_args(proxy[:1], gold[:1], 4),
    )
    add(
        "book_example_prompt_1_max_n_2",
        f"best_of_n_estimate on {first}, max_n=2)",
        _estimate_args(proxy[:1], gold[:1], 2),
    )
    second = f"the second prompt of {example.split(' (')[0]} alone (proxy_scores = {_show(proxy[1:])}, scores = "
    second += f"{_show(gold[1:])}: its top two replies tie"
    add("book_example_prompt_2", f"best_of_n_estimate on {second})", _estimate_args(proxy[1:], gold[1:]), book="§15.3")
    add("book_example", f"best_of_n_estimate on {example})", _estimate_args(proxy, gold), book="§15.3")
    add(
        "book_example_max_n_2",
        f"best_of_n_estimate on {example}, max_n=2)",
        _estimate_args(proxy, gold, 2),
    )
    add(
        "book_example_max_n_1",
        f"best_of_n_estimate on {example}, max_n=1: the mean of each pool)",
        _estimate_args(proxy, gold, 1),
    )
    add(
        "book_example_the_proxy_itself",
        f"best_of_n_estimate on {example.split(', scores')[0]}, scores = proxy_scores: the proxy's own curve)",
        _estimate_args(proxy, proxy.clone()),
    )
    add(
        "book_example_ties_in_the_other_order",
        f"best_of_n_estimate on {example}) with each pool in reverse order: tied replies swap places",
        _estimate_args(proxy.flip(1), gold.flip(1)),
    )
    for max_n, why in ((0, "below 1"), (5, "above N = 4: a pool of 4 says nothing about best-of-5"), (-1, "below 1")):
        add(
            f"max_n_{max_n}_raises".replace("-", "minus_"),
            f"best_of_n_estimate on {example}, max_n={max_n}) ({why}: raise ValueError)",
            _estimate_args(proxy, gold, max_n),
            raises="ValueError",
        )
    rng = g if fresh else _own(1503)
    # pools of one reply: every n is the reply's own score
    single = (torch.randn(3, 1, generator=rng, dtype=F64) * 0.5).round(decimals=3)
    add(
        "pools_of_one_reply",
        f"best_of_n_estimate on 3 pools of one reply each (scores = {_show(single.flatten())})",
        _estimate_args(torch.randn(3, 1, generator=rng, dtype=F64), single),
    )
    # a pool whose proxy scores are all equal (every n: the pool's mean) beside one without ties
    flat = _uniform(rng, -1, 1, 1).item()
    proxy = torch.stack([torch.full((6,), flat, dtype=F64), _uniform(rng, -1, 1, 6)])
    add(
        "one_pool_all_tied",
        f"best_of_n_estimate on 2 pools of 6, the first with every proxy score equal ({flat:g}): each n gives its mean",
        _estimate_args(proxy, _uniform(rng, -1, 1, 2, 6)),
    )
    # the same coarse ratings (a judge's 1 to 3) in every prompt's pool: a tie never reaches across prompts
    ratings = torch.tensor([[1.0, 2.0, 2.0, 3.0, 3.0], [2.0, 3.0, 1.0, 3.0, 2.0], [3.0, 3.0, 2.0, 1.0, 1.0]])
    own = g if fresh else _own(1504)
    if fresh:  # other ratings (1 to 4), each pool with a tie at its top
        ratings = torch.randint(1, 5, (3, 5), generator=g).double()
        ratings[:, :2] = ratings.max(dim=1, keepdim=True).values
        ratings = ratings[:, _perm(g, 5)]
    add(
        "same_ratings_in_every_prompt",
        f"best_of_n_estimate on 3 pools of 5 rated on one coarse scale (proxy_scores = {_show(ratings)}): a tie is "
        "within a prompt, never across prompts",
        _estimate_args(ratings, _uniform(own, -1, 1, 3, 5)),
    )
    for dtype in DTYPES:  # runs of ties whose gold differs, at the bottom, middle and top of pools of 12
        proxy, gold = _tied_pools(rng, 3, 12, 3)
        add(
            f"runs_of_ties_{_name(dtype)}",
            f"best_of_n_estimate on 3 pools of 12 ({dtype}) with runs of 2 to 4 tied proxy scores, low to high, "
            "the tied replies' gold different",
            _estimate_args(proxy.to(dtype), gold.to(dtype)),
        )
    proxy, gold = _rule_reward_pool(rng, 4, 16)
    add(
        "rule_reward_gold",
        "best_of_n_estimate on 4 pools of 16 as the pipeline scores them: a continuous proxy, the gold in "
        "{-1, -1/3, 0, 1/3, 1}",
        _estimate_args(proxy.to(F32), gold.to(F32)),
    )
    add(
        "rule_reward_as_its_own_proxy",
        "best_of_n_estimate on 4 pools of 16 picked by the gold itself (proxy_scores = scores, in {-1, -1/3, 0, 1/3, "
        "1}: ties across the pool and across prompts)",
        _estimate_args(gold.to(F32), gold.to(F32).clone()),
    )
    # N = 1024: C(1024, 512) is 4.5e306 and 1024! overflows float64; exact only in log space, in float64
    proxy = torch.randn(1, 1024, generator=rng, dtype=F64)
    add(
        "pool_of_1024_float64",
        "best_of_n_estimate on a pool of N = 1024 random replies (float64), every n from 1 to 1024",
        _estimate_args(proxy, proxy * 0.5 + torch.randn(1, 1024, generator=rng, dtype=F64)),
    )
    proxy = (torch.randn(2, 1024, generator=rng, dtype=F64) * 2).round(decimals=1)  # many ties
    add(
        "pool_of_1024_float32_with_ties",
        "best_of_n_estimate on 2 pools of N = 1024 (float32), proxy scores rounded to 0.1 (many ties)",
        _estimate_args(proxy.to(F32), (proxy * 0.3 + torch.randn(2, 1024, generator=rng, dtype=F64)).to(F32)),
    )
    proxy, gold = _uniform(rng, -1, 1, 2, 8), _uniform(rng, -1, 1, 2, 8)
    for proxy_dtype, dtype in ((F64, F32), (F32, F64)):
        add(
            f"proxy_{_name(proxy_dtype)}_scores_{_name(dtype)}",
            f"best_of_n_estimate with {proxy_dtype} proxy_scores and {dtype} scores (the result has the scores' dtype)",
            _estimate_args(proxy.to(proxy_dtype), gold.to(dtype), 6),
        )
    proxy, gold = _uniform(rng, -1, 1, 2, 5), _uniform(rng, -1, 1, 2, 5)
    add("inputs_unmodified", "best_of_n_estimate", _estimate_args(proxy, gold), unmodified=True)
    for dtype in DTYPES:
        for rows, size, max_n in ((1, 2, None), (3, 5, 3), (4, 4, None), (5, 16, None), (2, 64, 10)):
            proxy, gold = (torch.randn(rows, size, generator=rng, dtype=F64) for _ in range(2))
            add(
                f"random_{_name(dtype)}_B{rows}_N{size}" + (f"_max_n_{max_n}" if max_n else ""),
                f"best_of_n_estimate on random {dtype} scores, B={rows}, N={size}"
                + (f", max_n={max_n}" if max_n else ""),
                _estimate_args(proxy.to(dtype), (proxy * 0.5 + gold).to(dtype), max_n),
            )
    # Added after the cases above, with generators of their own: the inputs of those stay as they were.
    own = g if fresh else _own(1506)
    proxy = torch.randn(3, 7, generator=own, dtype=F64)
    add(
        "no_ties_B3_N7",
        "best_of_n_estimate on 3 pools of 7 (float32) with no tied proxy scores",
        _estimate_args(proxy.to(F32), (proxy * 0.4 + torch.randn(3, 7, generator=own, dtype=F64)).to(F32)),
    )
    proxy = torch.randn(1, 1024, generator=own, dtype=F64)
    add(
        "pool_of_1024_float32",
        "best_of_n_estimate on a pool of N = 1024 random replies (float32, no ties), every n from 1 to 1024",
        _estimate_args(proxy.to(F32), (proxy * 0.5 + torch.randn(1, 1024, generator=own, dtype=F64)).to(F32)),
    )
    proxy, gold = _tied_pools(own, 2, 8, 2)
    add(
        "inputs_unmodified_with_ties",
        "best_of_n_estimate on 2 pools of 8 (float64) with runs of tied proxy scores, the tied replies' gold "
        "different: work on copies (a tie's mean written into scores changes the caller's gold)",
        _estimate_args(proxy, gold),
        unmodified=True,
    )
    near = g if fresh else _own(1509)  # proxy scores a few ulps apart are not tied
    proxy = torch.randn(2, 9, generator=near, dtype=F64)
    proxy[:, 1::2] = proxy[:, 0:-1:2] * (1 + 1e-12)  # each odd reply a hair above the one before it
    add(
        "near_ties_are_not_ties",
        "best_of_n_estimate on 2 pools of 9 (float64) whose proxy scores come in pairs 1e-12 apart (relative): "
        "different scores, so no ties",
        _estimate_args(proxy, torch.randn(2, 9, generator=near, dtype=F64)),
    )
    early = ("book_example_prompt_1", "book_example_prompt_1_max_n_4", "book_example_prompt_1_max_n_2", "no_ties_B3_N7")
    cases.sort(key=lambda c: (c["raises"] is not None, _tied(c), c["id"].removeprefix("hidden_") not in early))
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _checked(scores: torch.Tensor, max_n: int | None) -> int:
    """max_n (None: N), refused below 1 or above N."""
    pool = scores.shape[1]
    max_n = pool if max_n is None else max_n
    if not 1 <= max_n <= pool:
        raise ValueError(f"max_n must be in 1..{pool}, got {max_n}")
    return max_n


def _log_choose(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """log C(a, b) of float tensors, through lgamma (as the key computes it)."""
    return torch.lgamma(a + 1) - torch.lgamma(b + 1) - torch.lgamma(a - b + 1)


def _log_factorials(top: int, dtype=torch.float64) -> torch.Tensor:
    """(top + 1,): log k! for k = 0 ... top, in ``dtype``: C(a, b) from three look-ups, not three lgamma of a matrix
    (a pool of 1024 then costs milliseconds, not 0.2 s)."""
    return torch.lgamma(torch.arange(top + 1, dtype=dtype) + 1)


def _log_c(a: torch.Tensor, b: torch.Tensor, log_fact: torch.Tensor) -> torch.Tensor:
    """log C(a, b) for whole numbers a >= b >= 0 (integer tensors), from the table ``log_fact`` of log k!."""
    return log_fact[a] - log_fact[b] - log_fact[a - b]


def _tie_means(proxy: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """(B, N) float64: each reply's score replaced by the mean score of the replies of its prompt whose proxy score
    equals its own."""
    same = proxy[:, :, None] == proxy[:, None, :]  # (B, N, N)
    return (same.to(torch.float64) @ scores.to(torch.float64)[:, :, None]).squeeze(2) / same.sum(dim=2)


def _weights(pool: int, max_n: int, ranks: torch.Tensor | None = None, dtype=torch.float64) -> torch.Tensor:
    """(max_n, N): C(i - 1, n - 1) / C(N, n) for the ranks i (1 ... N by default), in log space, in ``dtype``."""
    i = torch.arange(1, pool + 1) if ranks is None else ranks.long()
    n = torch.arange(1, max_n + 1)[:, None]
    log_fact = _log_factorials(pool, dtype)
    possible = i >= n
    log_w = _log_c((i - 1).clamp(min=0), (n - 1).clamp(max=i - 1), log_fact) - _log_c(torch.tensor(pool), n, log_fact)
    return torch.exp(log_w).where(possible, 0.0)


def _sorted_tie_means(proxy: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """(B, N) float64: the tie means, sorted by proxy score, smallest first."""
    order = torch.argsort(proxy, dim=1, stable=True)
    return _tie_means(proxy, scores).gather(1, order)


def _exact_weights(pool: int) -> torch.Tensor:
    """(N, N) float64: C(i - 1, n - 1) / C(N, n) from exact integers (C(i, n - 1) from C(i - 1, n - 1) by
    * i / (i - n + 1)), each divided as Python ints, which rounds once."""
    import math

    rows = []
    for n in range(1, pool + 1):
        total, c, row = math.comb(pool, n), 1, [0.0] * (n - 1)
        for i in range(n, pool + 1):  # c = C(i - 1, n - 1)
            row.append(c / total)
            c = c * i // (i - n + 1)
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


@right("best_of_n_estimate")
def estimate_with_exact_integers(proxy_scores, scores, max_n=None):
    """A Python loop over prompts: each pool's tie means, sorted, against the weights made of exact integers."""
    pool = scores.shape[1]
    if max_n is None:
        max_n = pool
    if max_n < 1 or max_n > pool:
        raise ValueError(f"max_n = {max_n} is not in 1 ... {pool}")
    rows = []
    for p, s in zip(proxy_scores.tolist(), scores.tolist()):
        runs: dict[float, list[float]] = {}
        for value, score in zip(p, s):
            runs.setdefault(value, []).append(score)
        rows.append([sum(runs[value]) / len(runs[value]) for value in sorted(p)])
    return (torch.tensor(rows, dtype=torch.float64) @ _exact_weights(pool)[:max_n].T).to(scores.dtype)


@right("best_of_n_estimate")
def estimate_counted_from_the_top(proxy_scores, scores, max_n=None):
    """Sorted largest first: the j-th largest is kept when the other n - 1 come from the N - j below it,
    C(N - j, n - 1) / C(N, n); ties through torch.unique per prompt."""
    batch, pool = scores.shape
    top_n = pool if max_n is None else max_n
    if not 0 < top_n <= pool:
        raise ValueError("max_n out of range")
    tied = torch.empty(batch, pool, dtype=torch.float64)
    for b in range(batch):
        _, inverse = torch.unique(proxy_scores[b], return_inverse=True)
        sums = torch.zeros(pool, dtype=torch.float64).index_add_(0, inverse, scores[b].to(torch.float64))
        counts = torch.bincount(inverse, minlength=pool).to(torch.float64)
        tied[b] = (sums / counts.clamp(min=1))[inverse]
    order = torch.argsort(proxy_scores, dim=1, descending=True)
    below = pool - torch.arange(1, pool + 1, dtype=torch.float64)  # N - j
    drawn = torch.arange(top_n, dtype=torch.float64)[:, None]  # n - 1
    log_total = (
        torch.lgamma(torch.tensor(pool + 1.0, dtype=torch.float64))
        - torch.lgamma(drawn + 2)
        - torch.lgamma(pool - drawn)
    )
    log_ways = torch.lgamma(below + 1) - torch.lgamma(drawn + 1) - torch.lgamma((below - drawn).clamp(min=0) + 1)
    weights = torch.where(below >= drawn, torch.exp(log_ways - log_total), torch.zeros(()))
    return (tied.gather(1, order) @ weights.T).to(scores.dtype)


@right("best_of_n_estimate")
def estimate_recurrence_in_n_tied_weights_shared(proxy_scores, scores, max_n=None):
    """P_1(i) = 1/N and P_(n+1)(i) = P_n(i) (i - n)(n + 1) / (n (N - n)), in float64; tied replies share their run's
    weights evenly (the same sum as sharing their scores)."""
    batch, pool = scores.shape
    last = max_n or pool
    if max_n is not None and not 1 <= max_n <= pool:
        raise ValueError(f"need 1 <= max_n <= {pool}")
    i = torch.arange(1, pool + 1, dtype=torch.float64)
    rows, p = [], torch.full((pool,), 1.0 / pool, dtype=torch.float64)
    for n in range(1, last + 1):
        rows.append(p)
        if n < pool:
            p = p * (i - n).clamp(min=0) * (n + 1) / (n * (pool - n))
    weights = torch.stack(rows)  # (max_n, N)
    order = torch.argsort(proxy_scores, dim=1)
    ranked_proxy = proxy_scores.gather(1, order)
    ranked_scores = scores.gather(1, order).to(torch.float64)
    same = ranked_proxy[:, :, None] == ranked_proxy[:, None, :]  # (B, N, N): same run of ties
    shared = (same.to(torch.float64) @ weights.T[None]) / same.sum(dim=2, keepdim=True)  # (B, N, max_n)
    return (ranked_scores[:, None, :] @ shared).squeeze(1).to(scores.dtype)


@right("best_of_n_estimate")
def estimate_weights_normalised_by_their_sum(proxy_scores, scores, max_n=None):
    """C(i - 1, n - 1) over its sum for i = n ... N (the hockey-stick identity: the sum is C(N, n)); a tie's replies
    get the mean of their scores through a loop over the distinct proxy scores."""
    size = scores.size(1)
    max_n = size if max_n is None else int(max_n)
    if max_n not in range(1, size + 1):
        raise ValueError(max_n)
    means = scores.to(torch.float64).clone()
    for row in range(scores.size(0)):
        for value in proxy_scores[row].unique():
            tie = proxy_scores[row] == value
            means[row, tie] = means[row, tie].mean()
    means = means.gather(1, proxy_scores.argsort(dim=1))
    rank = torch.arange(size, dtype=torch.float64)  # i - 1
    k = torch.arange(max_n, dtype=torch.float64).unsqueeze(1)  # n - 1
    log_c = torch.lgamma(rank + 1) - torch.lgamma(k + 1) - torch.lgamma((rank - k).clamp(min=0) + 1)
    weights = torch.softmax(log_c.masked_fill(rank < k, float("-inf")), dim=1)
    return (means @ weights.T).to(scores.dtype)


def _estimate(proxy_scores, scores, max_n, ranked=None, weights=None):
    """The key's estimate with one step replaced: ``ranked`` (B, N) the float64 scores as the weights meet them
    (default: tie means sorted by proxy), ``weights`` (max_n, N) (default: the right ones)."""
    max_n = _checked(scores, max_n)
    ranked = _sorted_tie_means(proxy_scores, scores) if ranked is None else ranked
    weights = _weights(scores.shape[1], max_n) if weights is None else weights
    return (ranked @ weights.T).to(scores.dtype)


WRONG_END = (
    "counted from the wrong end: best-of-n keeps the reply with the HIGHEST proxy score; with the pool sorted "
    "smallest first, the i-th smallest is kept with probability C(i - 1, n - 1) / C(N, n) (sorted largest first, or "
    "weighted C(N - i, n - 1), it keeps the lowest: the estimate then falls with n on the proxy)"
)


@wrong("best_of_n_estimate", WRONG_END)
def estimate_sorted_descending(proxy_scores, scores, max_n=None):
    order = torch.argsort(proxy_scores, dim=1, descending=True, stable=True)
    return _estimate(proxy_scores, scores, max_n, _tie_means(proxy_scores, scores).gather(1, order))


@wrong("best_of_n_estimate", WRONG_END)
def estimate_weights_from_the_top(proxy_scores, scores, max_n=None):
    max_n, pool = _checked(scores, max_n), scores.shape[1]
    return _estimate(proxy_scores, scores, max_n, weights=_weights(pool, max_n).flip(1))  # C(N - i, n - 1) / C(N, n)


@wrong(
    "best_of_n_estimate",
    "the pool's mean for every n: that is best-of-1 only (column 0); best-of-n keeps the proxy's favourite of n "
    "drawn, so weight the sorted pool with C(i - 1, n - 1) / C(N, n)",
)
def estimate_pool_mean_for_every_n(proxy_scores, scores, max_n=None):
    max_n = _checked(scores, max_n)
    return _tie_means(proxy_scores, scores).mean(dim=1, keepdim=True).expand(-1, max_n).to(scores.dtype)


@wrong(
    "best_of_n_estimate",
    "the proxy's top reply for every n: that is best-of-N only (the last column); best-of-n draws n of the N at "
    "random and keeps the best of those, so weight the sorted pool with C(i - 1, n - 1) / C(N, n)",
)
def estimate_top_reply_for_every_n(proxy_scores, scores, max_n=None):
    max_n = _checked(scores, max_n)
    return _sorted_tie_means(proxy_scores, scores)[:, -1:].expand(-1, max_n).to(scores.dtype)


@wrong(
    "best_of_n_estimate",
    "drawn with replacement ((i/N)^n - ((i - 1)/N)^n); best-of-n draws n DIFFERENT replies of the pool: the i-th "
    "smallest is kept with probability C(i - 1, n - 1) / C(N, n)",
)
def estimate_with_replacement(proxy_scores, scores, max_n=None):
    max_n = _checked(scores, max_n)
    pool = scores.shape[1]
    i = torch.arange(1, pool + 1, dtype=torch.float64)
    n = torch.arange(1, max_n + 1, dtype=torch.float64)[:, None]
    return _estimate(proxy_scores, scores, max_n, weights=(i / pool) ** n - ((i - 1) / pool) ** n)


@wrong(
    "best_of_n_estimate",
    "the pool taken in its own order, not sorted: rank the replies by their proxy score, smallest first, before "
    "weighting",
)
def estimate_not_sorted(proxy_scores, scores, max_n=None):
    return _estimate(proxy_scores, scores, max_n, _tie_means(proxy_scores, scores))


@wrong(
    "best_of_n_estimate",
    "argsort's result used as each reply's rank (the scores scattered by it): argsort gives the ORDER, the index of "
    "the reply that is i-th smallest; gather the scores with it (scores.gather(1, order))",
)
def estimate_argsort_as_ranks(proxy_scores, scores, max_n=None):
    order = torch.argsort(proxy_scores, dim=1, stable=True)
    tied = _tie_means(proxy_scores, scores)
    return _estimate(proxy_scores, scores, max_n, torch.zeros_like(tied).scatter(1, order, tied))


@wrong(
    "best_of_n_estimate",
    "sorted the scores themselves: the order comes from proxy_scores (the reward model picks the winner), then "
    "each reply's OWN score (the gold) is weighted",
)
def estimate_sorts_the_scores(proxy_scores, scores, max_n=None):
    return _estimate(proxy_scores, scores, max_n, scores.to(torch.float64).sort(dim=1).values)


@wrong(
    "best_of_n_estimate",
    "the proxy's own curve: weight `scores` (the score to report, e.g. the gold), not proxy_scores",
)
def estimate_reports_the_proxy(proxy_scores, scores, max_n=None):
    return _estimate(proxy_scores, scores, max_n, _sorted_tie_means(proxy_scores, proxy_scores))


@wrong(
    "best_of_n_estimate",
    "ties ignored: tied proxy scores were ranked in the order of the pool; replies whose proxy scores are equal are "
    "kept with the same chance, so each counts with the mean score of its tie",
)
def estimate_ties_ignored(proxy_scores, scores, max_n=None):
    order = torch.argsort(proxy_scores, dim=1, stable=True)
    return _estimate(proxy_scores, scores, max_n, scores.to(torch.float64).gather(1, order))


@wrong(
    "best_of_n_estimate",
    "ties counted as all winning: each tied reply got the rank of the highest of its tie (the weights then sum to "
    "more than 1); tied replies share their chances: give each the mean score of its tie",
)
def estimate_ties_all_win(proxy_scores, scores, max_n=None):
    max_n = _checked(scores, max_n)
    ranks = (proxy_scores[:, None, :] <= proxy_scores[:, :, None]).sum(dim=2)  # (B, N): replies at or below it
    weights = torch.stack([_weights(scores.shape[1], max_n, r) for r in ranks])  # (B, max_n, N)
    return (weights @ scores.to(torch.float64)[:, :, None]).squeeze(2).to(scores.dtype)


@wrong(
    "best_of_n_estimate",
    "ties counted as all losing: each tied reply got the rank of the lowest of its tie (the weights then sum to "
    "less than 1); tied replies share their chances: give each the mean score of its tie",
)
def estimate_ties_all_lose(proxy_scores, scores, max_n=None):
    max_n = _checked(scores, max_n)
    ranks = (proxy_scores[:, None, :] < proxy_scores[:, :, None]).sum(dim=2) + 1  # (B, N)
    weights = torch.stack([_weights(scores.shape[1], max_n, r) for r in ranks])
    return (weights @ scores.to(torch.float64)[:, :, None]).squeeze(2).to(scores.dtype)


@wrong(
    "best_of_n_estimate",
    "tied replies averaged across prompts: a tie is between replies of the SAME prompt's pool (their proxy scores "
    "equal); another prompt's replies are not in it",
)
def estimate_ties_across_prompts(proxy_scores, scores, max_n=None):
    flat_p, flat_s = proxy_scores.reshape(1, -1), scores.reshape(1, -1)
    tied = _tie_means(flat_p, flat_s).view(scores.shape)
    order = torch.argsort(proxy_scores, dim=1, stable=True)
    return _estimate(proxy_scores, scores, max_n, tied.gather(1, order))


@wrong(
    "best_of_n_estimate",
    "ties found with a tolerance (torch.isclose): proxy scores that differ, however little, are not tied; a tie is "
    "exact equality (==)",
)
def estimate_ties_within_a_tolerance(proxy_scores, scores, max_n=None):
    ranked_proxy, order = torch.sort(proxy_scores, dim=1, stable=True)
    ranked = scores.to(torch.float64).gather(1, order)
    starts = torch.ones_like(ranked_proxy, dtype=torch.bool)
    starts[:, 1:] = ~torch.isclose(ranked_proxy[:, 1:], ranked_proxy[:, :-1])
    run = starts.long().cumsum(dim=1) - 1
    totals = torch.zeros_like(ranked).scatter_add_(1, run, ranked)
    counts = torch.zeros_like(ranked).scatter_add_(1, run, torch.ones_like(ranked))
    return _estimate(proxy_scores, scores, max_n, (totals / counts).gather(1, run))


@wrong(
    "best_of_n_estimate",
    "ties averaged with their neighbours only: each reply got the mean of itself and the equal replies right beside "
    "it, so a run of 3 or more equal proxy scores is split; every reply of a run gets the run's one mean",
)
def estimate_ties_with_neighbours_only(proxy_scores, scores, max_n=None):
    ranked_proxy, order = torch.sort(proxy_scores, dim=1, stable=True)
    ranked = scores.to(torch.float64).gather(1, order)
    before = torch.zeros_like(ranked_proxy, dtype=torch.bool)
    before[:, 1:] = ranked_proxy[:, 1:] == ranked_proxy[:, :-1]
    after = torch.zeros_like(before)
    after[:, :-1] = before[:, 1:]
    left, right_ = torch.cat([ranked[:, :1], ranked[:, :-1]], 1), torch.cat([ranked[:, 1:], ranked[:, -1:]], 1)
    total = ranked + torch.where(before, left, 0.0) + torch.where(after, right_, 0.0)
    return _estimate(proxy_scores, scores, max_n, total / (1 + before.double() + after.double()))


@wrong(
    "best_of_n_estimate",
    "weights off by one: C(i, n - 1) / C(N, n); the i-th smallest is kept when the other n - 1 drawn are among the "
    "i - 1 below it: C(i - 1, n - 1) / C(N, n)",
)
def estimate_weights_c_i(proxy_scores, scores, max_n=None):
    max_n, pool = _checked(scores, max_n), scores.shape[1]
    i, n = torch.arange(1, pool + 1), torch.arange(1, max_n + 1)[:, None]
    log_fact = _log_factorials(pool)
    log_w = _log_c(i, (n - 1).clamp(max=i), log_fact) - _log_c(torch.tensor(pool), n, log_fact)
    return _estimate(proxy_scores, scores, max_n, weights=torch.exp(log_w).where(i >= n - 1, 0.0))


@wrong(
    "best_of_n_estimate",
    "weights off by one: C(i - 1, n) / C(N, n); the other n - 1 replies drawn (not n) come from the i - 1 below the "
    "kept one: C(i - 1, n - 1) / C(N, n)",
)
def estimate_weights_c_i_minus_1_n(proxy_scores, scores, max_n=None):
    max_n, pool = _checked(scores, max_n), scores.shape[1]
    i, n = torch.arange(1, pool + 1), torch.arange(1, max_n + 1)[:, None]
    log_fact = _log_factorials(pool)
    log_w = _log_c(i - 1, n.clamp(max=i - 1), log_fact) - _log_c(torch.tensor(pool), n, log_fact)
    return _estimate(proxy_scores, scores, max_n, weights=torch.exp(log_w).where(i - 1 >= n, 0.0))


@wrong(
    "best_of_n_estimate",
    "C(N, n) through factorials in floating point: 1024! overflows (inf / inf = NaN); compute the weights in log "
    "space, lgamma(N + 1) - lgamma(n + 1) - lgamma(N - n + 1), and exp() only their difference",
)
def estimate_factorials_in_floating_point(proxy_scores, scores, max_n=None):
    max_n, pool = _checked(scores, max_n), scores.shape[1]
    i, n = torch.arange(1, pool + 1), torch.arange(1, max_n + 1)[:, None]
    fact = torch.exp(_log_factorials(pool))  # k!, inf from 171! on
    a, b = i - 1, (n - 1).clamp(max=i - 1)
    weights = fact[a] / (fact[b] * fact[a - b]) / (fact[pool] / (fact[n] * fact[pool - n]))
    return _estimate(proxy_scores, scores, max_n, weights=weights.where(i >= n, 0.0))


@wrong(
    "best_of_n_estimate",
    "C(i - 1, n - 1) and C(N, n) as float32 numbers overflow past 3.4e38 (N = 1024 gives inf / inf = NaN); compute "
    "the weights in log space, in float64",
)
def estimate_choose_in_float32(proxy_scores, scores, max_n=None):
    max_n, pool = _checked(scores, max_n), scores.shape[1]
    i, n = torch.arange(1, pool + 1), torch.arange(1, max_n + 1)[:, None]
    log_fact = _log_factorials(pool)
    table = torch.exp(_log_c(i - 1, (n - 1).clamp(max=i - 1), log_fact)).where(i >= n, 0.0).to(scores.dtype)
    totals = torch.exp(_log_c(torch.tensor(pool), n, log_fact)).to(scores.dtype)  # C(N, n), rounded as table
    ranked = _sorted_tie_means(proxy_scores, scores).to(scores.dtype)
    return ranked @ (table / totals).T


@wrong(
    "best_of_n_estimate",
    "log-weights in float32 are up to 1e-3 off at N = 1024 (lgamma(1025) is 6078, to float32's 5e-4); compute "
    "them in float64 whatever the scores' dtype",
)
def estimate_log_weights_in_the_scores_dtype(proxy_scores, scores, max_n=None):
    max_n = _checked(scores, max_n)
    weights = _weights(scores.shape[1], max_n, dtype=scores.dtype)
    return _sorted_tie_means(proxy_scores, scores).to(scores.dtype) @ weights.T


@wrong(
    "best_of_n_estimate",
    "log-weights in float32 are up to 1e-3 off at N = 1024 (lgamma(1025) is 6078, to float32's 5e-4); compute "
    "them in float64 whatever the scores' dtype",
)
def estimate_log_weights_always_float32(proxy_scores, scores, max_n=None):
    max_n = _checked(scores, max_n)
    weights = _weights(scores.shape[1], max_n, dtype=torch.float32).to(torch.float64)
    return (_sorted_tie_means(proxy_scores, scores) @ weights.T).to(scores.dtype)


@wrong(
    "best_of_n_estimate",
    "the mean over the prompts: return one row per prompt, (B, max_n); the experiment averages the prompts itself",
)
def estimate_mean_over_prompts(proxy_scores, scores, max_n=None):
    return _estimate(proxy_scores, scores, max_n).mean(dim=0)


@wrong(
    "best_of_n_estimate",
    "max_n's default taken from the number of prompts B (scores.shape[0]); None means N, the size of each pool "
    "(scores.shape[1])",
)
def estimate_default_max_n_from_the_prompts(proxy_scores, scores, max_n=None):
    return _estimate(proxy_scores, scores, scores.shape[0] if max_n is None else max_n)


@wrong(
    "best_of_n_estimate",
    "n stops before max_n (torch.arange(1, max_n) leaves it out): the result has max_n columns, best-of-1 to "
    "best-of-max_n",
)
def estimate_last_column_left_out(proxy_scores, scores, max_n=None):
    return _estimate(proxy_scores, scores, max_n)[:, :-1]


@wrong("best_of_n_estimate", "instead of raising ValueError")
def estimate_max_n_above_n_not_refused(proxy_scores, scores, max_n=None):
    pool = scores.shape[1]
    if max_n is not None and max_n < 1:
        raise ValueError(max_n)
    return _estimate(proxy_scores, scores, None if max_n is None else min(max_n, pool))


@wrong("best_of_n_estimate", "instead of raising ValueError")
def estimate_max_n_below_1_not_refused(proxy_scores, scores, max_n=None):
    if max_n is not None and max_n < 1:
        return scores[:, :0].clone()
    return _estimate(proxy_scores, scores, max_n)


@wrong("best_of_n_estimate", "returned dtype torch.float64, expected torch.float32")
def estimate_in_float64(proxy_scores, scores, max_n=None):
    return _estimate(proxy_scores, scores, max_n).to(torch.float64)
