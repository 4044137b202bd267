"""Property laws of rlhf_practice/rl/best_of_n.py: best_of_n_kl (§15.2), best_of_n_estimate (§15.3) and
ensemble_reward (§15.5), task 15."""

from __future__ import annotations

import itertools

import torch
from hypothesis import strategies as st

from properties import NO_GRADIENT, TOL, close, fmt, got, law
from properties.draws import DTYPES, floats, gradcheck, raises_value_error, tensor, unchanged

NO_GRADIENT["best_of_n_kl"] = "n counts samples: nothing to differentiate"
NO_GRADIENT["best_of_n_estimate"] = "an expected score read off the pool: the contract needs no gradient"

F64 = torch.float64


def _tensor_of(out: object, shape: tuple[int, ...], dtype: torch.dtype) -> str | None:
    """None if ``out`` is a tensor of ``shape`` and ``dtype``, else what it is instead."""
    if isinstance(out, torch.Tensor) and tuple(out.shape) == shape and out.dtype == dtype:
        return None
    what = f"shape {tuple(out.shape)}, dtype {out.dtype}" if isinstance(out, torch.Tensor) else got(out)
    return f"{what}, expected shape {shape}, dtype {dtype}"


# --- best_of_n_kl (§15.2) -----------------------------------------------------------------------------

_counts = st.fixed_dictionaries({"n": st.lists(st.integers(1, 10**6), min_size=1, max_size=6)})


def _kl(n: torch.Tensor) -> torch.Tensor:
    n = n.to(F64)
    return torch.log(n) - (n - 1) / n


@law(
    "best_of_n_kl",
    "n_1_is_0",
    "best-of-1 is the policy itself: n = 1 gives KL 0, as an int or in a tensor",
    st.fixed_dictionaries({"size": st.integers(1, 5)}),
    examples=5,
)
def _(fn, ex):
    for n in (1, torch.ones(ex["size"], dtype=torch.long), torch.ones(ex["size"], dtype=torch.float32)):
        out = fn(n)
        if not isinstance(out, torch.Tensor) or not bool((out == 0).all()):
            return f"n = {fmt(n) if isinstance(n, torch.Tensor) else n}: {got(out)}"
    return None


@law("best_of_n_kl", "formula", "the KL is log n - (n - 1)/n in nats, for every n >= 1", _counts)
def _(fn, ex):
    n = torch.tensor(ex["n"])
    out = fn(n)
    if bad := _tensor_of(out, tuple(n.shape), F64):
        return bad
    expected = _kl(n)
    return None if close(out, expected, 1e-9) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "best_of_n_kl",
    "rising_below_log_n",
    "the KL rises with n and stays between 0 and log n (best-of-n moves further from the policy as n grows)",
    _counts,
)
def _(fn, ex):
    n = torch.tensor(sorted(ex["n"]), dtype=F64)
    out = fn(n)
    if bad := _tensor_of(out, tuple(n.shape), F64):
        return bad
    if bool((out < -TOL).any()) or bool((out > torch.log(n) + TOL).any()):
        return f"{got(out)} for n = {fmt(n)}: outside [0, log n]"
    return None if bool((out.diff() >= -TOL).all()) else f"{got(out)} for n = {fmt(n)}: not rising"


@law(
    "best_of_n_kl",
    "dtype_and_shape",
    "an int gives a 0-dim float64 tensor, an integer tensor a float64 tensor of its shape, a float tensor its own "
    "dtype and shape",
    st.fixed_dictionaries({"n": st.integers(1, 5000), "shape": st.sampled_from([(), (3,), (2, 2)]), "dtype": DTYPES}),
)
def _(fn, ex):
    n, shape = ex["n"], ex["shape"]
    for given, dtype in (
        (n, F64),
        (torch.full(shape, n, dtype=torch.int32), F64),
        (torch.full(shape, n, dtype=torch.long), F64),
        (torch.full(shape, float(n), dtype=ex["dtype"]), ex["dtype"]),
    ):
        out = fn(given)
        want = () if isinstance(given, int) else shape
        if bad := _tensor_of(out, want, dtype):
            return f"n = {given!r}: {bad}"
    return None


@law(
    "best_of_n_kl",
    "below_1_raises",
    "an n below 1 (no sample to keep) raises ValueError, as an int or anywhere in a tensor",
    st.fixed_dictionaries(
        {
            "low": st.sampled_from([0, -1, -7]),
            "kind": st.sampled_from(["int", "long", "float"]),
            "at": st.integers(0, 2),
        }
    ),
    examples=8,
)
def _(fn, ex):
    if ex["kind"] == "int":
        return raises_value_error(lambda: fn(ex["low"]))
    n = torch.tensor([4.0, 2.0, 9.0])
    n[ex["at"]] = ex["low"] if ex["kind"] == "long" else 0.5
    return raises_value_error(lambda: fn(n.long() if ex["kind"] == "long" else n))


@law("best_of_n_kl", "inputs_unchanged", "the input stays unchanged, and a float64 n gives a float64 result", _counts)
def _(fn, ex):
    return unchanged(fn, (torch.tensor(ex["n"], dtype=F64),))


# --- best_of_n_estimate (§15.3) -----------------------------------------------------------------------

# Proxy scores from a few values, so that ties are common (in a pool and across prompts), or from anywhere.
_PROXY_VALUES = st.sampled_from([-1.0, 0.0, 0.5, 2.0]) | floats(-2, 2)


@st.composite
def _pools(draw: st.DrawFn, most: int = 6) -> dict:
    rows, size = draw(st.integers(1, 3)), draw(st.integers(1, most))
    proxy = draw(st.lists(_PROXY_VALUES, min_size=rows * size, max_size=rows * size))
    return {
        "proxy_scores": torch.tensor(proxy, dtype=F64).view(rows, size),
        "scores": draw(tensor((rows, size))),
        "order": draw(st.permutations(range(size))),
        "max_n": draw(st.integers(1, size)),
        "a": draw(floats(-2, 2)),
        "b": draw(floats(-2, 2)),
    }


def _curve(out: object, rows: int, columns: int, dtype: torch.dtype = F64) -> str | None:
    return _tensor_of(out, (rows, columns), dtype)


def _brute_force(proxy: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """(B, N): for every n, the mean over every n-subset of a pool of the score best-of-n keeps from it (the
    highest proxy score; a tie's replies equally likely, so their mean score)."""
    rows, size = scores.shape
    out = torch.zeros(rows, size, dtype=F64)
    for b in range(rows):
        p, s = proxy[b].tolist(), scores[b].tolist()
        for n in range(1, size + 1):
            kept = []
            for subset in itertools.combinations(range(size), n):
                top = max(p[i] for i in subset)
                winners = [s[i] for i in subset if p[i] == top]
                kept.append(sum(winners) / len(winners))
            out[b, n - 1] = sum(kept) / len(kept)
    return out


@law(
    "best_of_n_estimate",
    "every_subset",
    "column n - 1 is the mean, over every n-subset of a prompt's pool, of the score of the reply best-of-n keeps "
    "from it (the highest proxy score; tied ones equally likely)",
    _pools(),
)
def _(fn, ex):
    proxy, scores = ex["proxy_scores"], ex["scores"]
    out = fn(proxy, scores)
    if bad := _curve(out, *scores.shape):
        return bad
    expected = _brute_force(proxy, scores)
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "best_of_n_estimate",
    "ends_of_the_curve",
    "column 0 is the mean of the pool; column N - 1 is the score of the proxy's top reply (the mean score of the "
    "replies tied at the top)",
    _pools(most=12),
)
def _(fn, ex):
    proxy, scores = ex["proxy_scores"], ex["scores"]
    out = fn(proxy, scores)
    if bad := _curve(out, *scores.shape):
        return bad
    top = proxy == proxy.max(dim=1, keepdim=True).values
    expected = torch.stack([scores.mean(dim=1), (scores * top).sum(dim=1) / top.sum(dim=1)], dim=1)
    ends = out[:, [0, -1]]
    return None if close(ends, expected) else f"columns 0 and N - 1 {fmt(ends)}, expected {fmt(expected)}"


@law(
    "best_of_n_estimate",
    "constant_scores",
    "every reply scoring c gives c for every n: each n's chances of being kept sum to 1",
    _pools(most=12),
)
def _(fn, ex):
    proxy = ex["proxy_scores"]
    scores = torch.full(proxy.shape, ex["a"], dtype=F64)
    out = fn(proxy, scores)
    if bad := _curve(out, *proxy.shape):
        return bad
    return None if close(out, scores) else f"{got(out)}, expected {ex['a']:.4g} everywhere"


@law(
    "best_of_n_estimate",
    "rises_on_the_proxy",
    "scored by the proxy itself (scores = proxy_scores), the estimate never falls as n grows: best-of-n keeps the "
    "HIGHEST proxy score",
    _pools(most=12),
)
def _(fn, ex):
    proxy = ex["proxy_scores"]
    out = fn(proxy, proxy.clone())
    if bad := _curve(out, *proxy.shape):
        return bad
    return None if bool((out.diff(dim=1) >= -TOL).all()) else f"{got(out)}: falls somewhere"


@law(
    "best_of_n_estimate",
    "pool_order",
    "reordering the replies of every pool (proxy_scores and scores alike) changes nothing, ties included",
    _pools(),
)
def _(fn, ex):
    proxy, scores, order = ex["proxy_scores"], ex["scores"], ex["order"]
    a, b = fn(proxy, scores), fn(proxy[:, order], scores[:, order])
    if bad := _curve(a, *scores.shape) or _curve(b, *scores.shape):
        return bad
    return None if close(b, a.detach()) else f"{got(b)} after reordering, {fmt(a)} before"


@law(
    "best_of_n_estimate",
    "prompts_apart",
    "each prompt's row depends on its own pool only: the batch's estimate is each prompt's estimate alone, stacked",
    _pools(),
)
def _(fn, ex):
    proxy, scores = ex["proxy_scores"], ex["scores"]
    out = fn(proxy, scores)
    if bad := _curve(out, *scores.shape):
        return bad
    alone = [fn(proxy[b : b + 1], scores[b : b + 1]) for b in range(len(scores))]
    if any(bad := _curve(a, 1, scores.shape[1]) for a in alone):
        return bad
    stacked = torch.cat(alone)
    return None if close(out, stacked) else f"{got(out)} for the batch, {fmt(stacked)} prompt by prompt"


@law(
    "best_of_n_estimate",
    "max_n_truncates",
    "max_n = m gives the first m columns of the full curve (n = 1 ... m)",
    _pools(),
)
def _(fn, ex):
    proxy, scores, m = ex["proxy_scores"], ex["scores"], ex["max_n"]
    full, part = fn(proxy, scores), fn(proxy, scores, m)
    if bad := _curve(full, *scores.shape) or _curve(part, len(scores), m):
        return bad
    return None if close(part, full[:, :m].detach()) else f"{got(part)} with max_n={m}, {fmt(full)} without"


@law(
    "best_of_n_estimate",
    "max_n_out_of_range_raises",
    "max_n below 1 or above N raises ValueError (a pool of N says nothing about best-of-(N + 1))",
    st.fixed_dictionaries({"pools": _pools(), "over": st.sampled_from([-1, 0, 1, 3])}),
    examples=8,
)
def _(fn, ex):
    proxy, scores, over = ex["pools"]["proxy_scores"], ex["pools"]["scores"], ex["over"]
    max_n = over if over < 1 else scores.shape[1] + over
    return raises_value_error(lambda: fn(proxy, scores, max_n))


@law(
    "best_of_n_estimate",
    "affine_in_the_scores",
    "scores a * s + b give a * (the estimate of s) + b: each column is a weighted mean of the scores, the weights set "
    "by the proxy alone",
    _pools(),
)
def _(fn, ex):
    proxy, scores, a, b = ex["proxy_scores"], ex["scores"], ex["a"], ex["b"]
    base, moved = fn(proxy, scores), fn(proxy, a * scores + b)
    if bad := _curve(base, *scores.shape) or _curve(moved, *scores.shape):
        return bad
    expected = a * base.detach() + b
    return None if close(moved, expected, 1e-5) else f"{got(moved)}, expected {fmt(expected)}"


@law(
    "best_of_n_estimate",
    "proxy_order_only",
    "only the proxy scores' order counts: 4 * proxy_scores, or each proxy score replaced by its rank among the "
    "prompt's distinct ones, changes nothing",
    _pools(),
)
def _(fn, ex):
    proxy, scores = ex["proxy_scores"], ex["scores"]
    base = fn(proxy, scores)
    if bad := _curve(base, *scores.shape):
        return bad
    ranks = torch.stack([torch.unique(row, return_inverse=True)[1] for row in proxy]).to(F64)
    for changed in (4 * proxy, ranks):  # both exact in floating point: no two proxy scores merge or part
        out = fn(changed, scores)
        if bad := _curve(out, *scores.shape):
            return bad
        if not close(out, base.detach()):
            return f"{got(out)} with proxy_scores {fmt(changed)}, {fmt(base)} with {fmt(proxy)}"
    return None


@law(
    "best_of_n_estimate",
    "large_pool",
    "in a pool of hundreds, the top proxy reply is kept with probability n/N and the bottom one only at n = 1 (1/N): "
    "exact in float32 too, with no overflow (1024! overflows float64)",
    st.fixed_dictionaries({"size": st.sampled_from([1024, 700, 333]), "seed": st.integers(0, 100), "dtype": DTYPES}),
    examples=3,
)
def _(fn, ex):
    size, dtype = ex["size"], ex["dtype"]
    proxy = torch.randperm(size, generator=torch.Generator().manual_seed(ex["seed"])).to(dtype)[None]
    scores = (proxy == size - 1).to(dtype) - (proxy == 0).to(dtype)  # the top reply 1, the bottom one -1
    out = fn(proxy, scores)
    if bad := _curve(out, 1, size, dtype):
        return bad
    n = torch.arange(1, size + 1, dtype=F64)
    expected = (n / size - (n == 1).to(F64) / size)[None]
    tol = 1e-5 if dtype == torch.float32 else 1e-9
    if torch.allclose(out.double(), expected, rtol=tol, atol=tol * 1e-2):
        return None
    worst = int((out.double() - expected).abs().argmax())
    return f"column {worst} (n = {worst + 1}) is {out[0, worst].item():.8g}, expected {expected[0, worst].item():.8g}"


@law(
    "best_of_n_estimate",
    "dtype_and_inputs_unchanged",
    "the inputs stay unchanged and the result has the scores' dtype (float32 scores give float32, whatever the "
    "proxy scores' dtype)",
    st.fixed_dictionaries({"pools": _pools(), "dtype": DTYPES, "proxy_dtype": DTYPES}),
)
def _(fn, ex):
    proxy, scores = ex["pools"]["proxy_scores"].to(ex["proxy_dtype"]), ex["pools"]["scores"].to(ex["dtype"])
    before = (proxy.clone(), scores.clone())
    out = fn(proxy, scores)
    if not (torch.equal(before[0], proxy) and torch.equal(before[1], scores)):
        return "an input was changed in place"
    return _curve(out, *scores.shape, ex["dtype"])


# --- ensemble_reward (§15.5) --------------------------------------------------------------------------

MODES = ("mean", "min", "uwo")


@st.composite
def _ensembles(draw: st.DrawFn, least: int = 1) -> dict:
    k, replies = draw(st.integers(least, 5)), draw(st.integers(1, 5))
    return {
        "scores": draw(tensor((k, replies))),
        "mode": draw(st.sampled_from(MODES if least > 1 else ("mean", "min"))),
        "coef": draw(floats(0, 3)),
        "order": draw(st.permutations(range(k))),
        "columns": draw(st.lists(st.integers(0, replies - 1), min_size=1, max_size=replies)),
    }


def _reward(out: object, replies: int, dtype: torch.dtype = F64) -> str | None:
    return _tensor_of(out, (replies,), dtype)


@law(
    "ensemble_reward",
    "identical_models",
    "k models that agree give their common scores, in every mode (no disagreement: nothing for min or uwo to take off)",
    st.fixed_dictionaries({"row": tensor((4,)), "k": st.integers(2, 5), "mode": st.sampled_from(MODES)}),
)
def _(fn, ex):
    scores = ex["row"].repeat(ex["k"], 1)
    out = fn(scores, ex["mode"])
    if bad := _reward(out, 4):
        return bad
    return None if close(out, ex["row"]) else f"{got(out)}, expected {fmt(ex['row'])}"


@law(
    "ensemble_reward",
    "mean_and_min",
    "mode 'mean' is the mean over the k models (dim 0), mode 'min' their smallest score, never above the mean",
    _ensembles(),
)
def _(fn, ex):
    scores = ex["scores"]
    mean, low = fn(scores, "mean"), fn(scores, "min")
    if bad := _reward(mean, scores.shape[1]) or _reward(low, scores.shape[1]):
        return bad
    if not close(mean, scores.mean(dim=0)):
        return f"mode 'mean' {got(mean)}, expected {fmt(scores.mean(dim=0))}"
    expected = scores.min(dim=0).values
    return None if close(low, expected) else f"mode 'min' {got(low)}, expected {fmt(expected)}"


@law(
    "ensemble_reward",
    "uwo_formula",
    "mode 'uwo' is mean - uncertainty_coef * the unbiased variance over the k models (divided by k - 1), never above "
    "the mean for uncertainty_coef >= 0",
    _ensembles(least=2),
)
def _(fn, ex):
    scores, coef = ex["scores"], ex["coef"]
    out = fn(scores, "uwo", coef)
    if bad := _reward(out, scores.shape[1]):
        return bad
    mean = scores.mean(dim=0)
    expected = mean - coef * ((scores - mean) ** 2).sum(dim=0) / (len(scores) - 1)
    if bool((out > mean + TOL).any()):
        return f"{got(out)} is above the mean {fmt(mean)}"
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "ensemble_reward",
    "default_coefficient",
    "uncertainty_coef defaults to 0.5",
    _ensembles(least=2),
)
def _(fn, ex):
    scores = ex["scores"]
    a, b = fn(scores, "uwo"), fn(scores, "uwo", 0.5)
    if bad := _reward(a, scores.shape[1]) or _reward(b, scores.shape[1]):
        return bad
    return None if close(a, b.detach()) else f"{got(a)} without uncertainty_coef, {fmt(b)} with 0.5"


@law(
    "ensemble_reward",
    "models_permuted",
    "listing the k models in another order changes nothing",
    _ensembles(),
)
def _(fn, ex):
    scores, mode = ex["scores"], ex["mode"]
    a, b = fn(scores, mode), fn(scores[ex["order"]], mode)
    if bad := _reward(a, scores.shape[1]) or _reward(b, scores.shape[1]):
        return bad
    return None if close(b, a.detach()) else f"{got(b)} with the models reordered, {fmt(a)} before"


@law(
    "ensemble_reward",
    "replies_apart",
    "each reply's reward depends on its own column of scores only: any choice of columns gives those columns' rewards",
    _ensembles(least=2),
)
def _(fn, ex):
    scores, mode, columns = ex["scores"], ex["mode"], ex["columns"]
    full, part = fn(scores, mode), fn(scores[:, columns], mode)
    if bad := _reward(full, scores.shape[1]) or _reward(part, len(columns)):
        return bad
    expected = full.detach()[columns]
    return None if close(part, expected) else f"{got(part)} for columns {columns}, {fmt(expected)} within the whole"


@law(
    "ensemble_reward",
    "refused_modes",
    "an unknown mode raises ValueError, and so does 'uwo' with one model (one score has no variance)",
    st.fixed_dictionaries(
        {"scores": tensor((3, 4)), "mode": st.sampled_from(["max", "Mean", "median", "", "uwo_one_model"])}
    ),
    examples=8,
)
def _(fn, ex):
    if ex["mode"] == "uwo_one_model":
        return raises_value_error(lambda: fn(ex["scores"][:1], "uwo"))
    return raises_value_error(lambda: fn(ex["scores"], ex["mode"]))


@law(
    "ensemble_reward",
    "gradcheck",
    "autograd's gradient w.r.t. scores equals float64 central differences, in every mode",
    _ensembles(least=2).filter(
        lambda ex: bool((ex["scores"].sort(dim=0).values.diff(dim=0) > 1e-3).all())  # min: no tie to straddle
    ),
    examples=10,
)
def _(fn, ex):
    mode, coef = ex["mode"], ex["coef"]
    return gradcheck(lambda s: fn(s, mode, coef), [ex["scores"]], "scores")


@law(
    "ensemble_reward",
    "inputs_unchanged",
    "the input stays unchanged and float32 scores give a float32 result",
    st.fixed_dictionaries({"ex": _ensembles(least=2), "dtype": DTYPES}),
)
def _(fn, ex):
    scores = ex["ex"]["scores"].to(ex["dtype"])
    before = scores.clone()
    out = fn(scores, ex["ex"]["mode"])
    if not torch.equal(before, scores):
        return f"scores was changed in place to {fmt(scores)}"
    return _reward(out, scores.shape[1], ex["dtype"])
