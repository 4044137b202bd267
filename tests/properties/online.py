"""Property laws of rlhf_practice/rl/online.py: select_pairs (§16.2) and proxy_agreement (§16.3), task 16."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from properties import NO_GRADIENT, close, fmt, got, law
from properties.draws import DTYPES, floats, raises_value_error, tensor

NO_GRADIENT["select_pairs"] = "it returns indices: nothing to differentiate"
NO_GRADIENT["proxy_agreement"] = "a share of pairs: the detector is logged, never trained on"

F64 = torch.float64
SELECTIONS = ("random", "uncertain", "disagreement")


@st.composite
def _candidates(draw: st.DrawFn, least: int = 1) -> dict:
    k, c = draw(st.integers(least, 4)), draw(st.integers(1, 8))
    return {
        "a": draw(tensor((k, c))),
        "b": draw(tensor((k, c))),
        "m": draw(st.integers(1, c)),
        "selection": draw(st.sampled_from(SELECTIONS if k > 1 else SELECTIONS[:2])),
        "order": draw(st.permutations(range(k))),
    }


def _indices(out: object, m: int, c: int) -> str | None:
    """None if ``out`` is M different int64 indices of the C candidates, increasing; else what it is instead."""
    if not isinstance(out, torch.Tensor) or out.dtype != torch.long or tuple(out.shape) != (m,):
        what = f"shape {tuple(out.shape)}, dtype {out.dtype}" if isinstance(out, torch.Tensor) else got(out)
        return f"{what}, expected shape ({m},), dtype torch.int64"
    values = out.tolist()
    if any(not 0 <= i < c for i in values):
        return f"indices {values} outside 0 to {c - 1}"
    if values != sorted(set(values)):
        return f"indices {values}: expected different indices in increasing order"
    return None


def _brute(a: torch.Tensor, b: torch.Tensor, m: int, selection: str) -> list[int]:
    """The key's choice, written pair by pair."""
    c = a.shape[1]
    if selection == "random":
        return list(range(m))
    if selection == "uncertain":
        key = [abs(a[:, i].mean().item() - b[:, i].mean().item()) for i in range(c)]
    else:
        key = [-torch.sigmoid(a[:, i] - b[:, i]).var().item() for i in range(c)]
    return sorted(sorted(range(c), key=lambda i: (key[i], i))[:m])


def _clear(a: torch.Tensor, b: torch.Tensor, selection: str) -> bool:
    """No two keys within rounding of each other (a law's expected choice is then the same in any written form)."""
    if selection == "random":
        return True
    key = (a.mean(0) - b.mean(0)).abs() if selection == "uncertain" else torch.sigmoid(a - b).var(0)
    gaps = (key[:, None] - key[None, :]).abs() + torch.eye(len(key), dtype=key.dtype)
    return bool((gaps > 1e-6).all())


def _choice_law(selection: str, least: int, examples: int = 15) -> None:
    words = {
        "random": "'random' takes the first M pairs",
        "uncertain": "'uncertain' takes the M smallest |mean_k a - mean_k b|, the indices increasing",
        "disagreement": "'disagreement' takes the M largest variances over the k models of sigmoid(a - b), the indices "
        "increasing",
    }[selection]

    @law(
        "select_pairs",
        f"the_choice_{selection}",
        words,
        _candidates(least).filter(lambda ex: _clear(ex["a"], ex["b"], selection)),
    )
    def _(fn, ex):
        a, b, m = ex["a"], ex["b"], ex["m"]
        out = fn(a, b, m, selection)
        if bad := _indices(out, m, a.shape[1]):
            return bad
        expected = _brute(a, b, m, selection)
        return None if out.tolist() == expected else f"{got(out)}, expected {expected}"


_choice_law("random", 1)
_choice_law("uncertain", 1)
_choice_law("disagreement", 3, examples=40)


@law(
    "select_pairs",
    "disagreement_counts_every_model",
    "'disagreement' is the variance over all k models, not the extremes: probabilities (0.15, 0.85, 0.85) vary more "
    "than (0.1, 0.5, 0.9) although their range is smaller",
    st.fixed_dictionaries({"order": st.permutations(range(3)), "shift": floats(-0.02, 0.02), "first": st.booleans()}),
    examples=6,
)
def _(fn, ex):
    wide, bunched = torch.tensor([0.1, 0.5, 0.9], dtype=F64), torch.tensor([0.15, 0.85, 0.85], dtype=F64)
    pairs = [bunched, wide] if ex["first"] else [wide, bunched]
    p = torch.stack(pairs, dim=1)[list(ex["order"])] + ex["shift"]  # (3 models, 2 pairs)
    a = torch.log(p / (1 - p))  # sigmoid(a - 0) = p
    out = fn(a, torch.zeros_like(a), 1, "disagreement")
    expected = [0 if ex["first"] else 1]
    if bad := _indices(out, 1, 2):
        return bad
    return None if out.tolist() == expected else f"{got(out)} for probabilities {fmt(p)}, expected {expected}"


@st.composite
def _near_certain(draw: st.DrawFn) -> dict:
    k, c = draw(st.integers(3, 4)), draw(st.integers(2, 6))
    spread = draw(st.lists(floats(0.05, 1), min_size=c, max_size=c, unique=True))
    noise = draw(tensor((k, c), -1, 1))
    return {"a": (3 + noise * torch.tensor(spread, dtype=F64) * 1e-3).float(), "m": draw(st.integers(1, c))}


def _clear_relative(a: torch.Tensor) -> bool:
    key = torch.sigmoid(a.double()).var(0)
    gaps = (key[:, None] - key[None, :]).abs() + torch.eye(len(key), dtype=key.dtype) * key.max()
    return bool((gaps > 0.05 * key.max()).all())


@law(
    "select_pairs",
    "disagreement_near_certain",
    "'disagreement' where every probability is near 0.95 and the models differ in the 4th decimal (float32): the same "
    "M largest variances as in float64",
    _near_certain().filter(lambda ex: _clear_relative(ex["a"])),
)
def _(fn, ex):
    a, m = ex["a"], ex["m"]
    out = fn(a, torch.zeros_like(a), m, "disagreement")
    if bad := _indices(out, m, a.shape[1]):
        return bad
    expected = _brute(a.double(), torch.zeros_like(a, dtype=F64), m, "disagreement")
    return None if out.tolist() == expected else f"{got(out)}, expected {expected}"


@law(
    "select_pairs",
    "ties_lower_index_first",
    "every candidate listed twice (pairs i and C + i the same): of two equal keys the lower index is picked first",
    _candidates().filter(lambda ex: _clear(ex["a"], ex["b"], ex["selection"])),
)
def _(fn, ex):
    a, b, m, selection = ex["a"].repeat(1, 2), ex["b"].repeat(1, 2), ex["m"], ex["selection"]
    out = fn(a, b, m, selection)
    if bad := _indices(out, m, a.shape[1]):
        return bad
    expected = _brute(a, b, m, selection)
    return None if out.tolist() == expected else f"{got(out)}, expected {expected}"


@law(
    "select_pairs",
    "uncertain_reads_the_mean",
    "'uncertain' judges the proxy, the mean of the k models: k models pick what their mean as one model picks",
    _candidates(least=2).filter(lambda ex: _clear(ex["a"], ex["b"], "uncertain")),
)
def _(fn, ex):
    a, b, m = ex["a"], ex["b"], ex["m"]
    many, one = fn(a, b, m, "uncertain"), fn(a.mean(0, keepdim=True), b.mean(0, keepdim=True), m, "uncertain")
    if bad := _indices(many, m, a.shape[1]) or _indices(one, m, a.shape[1]):
        return bad
    return None if many.tolist() == one.tolist() else f"{got(many)} from {len(a)} models, {fmt(one)} from their mean"


@law(
    "select_pairs",
    "every_pair_tied",
    "where both replies of every pair score alike, every key ties (difference 0, every probability 1/2): the first "
    "M indices, however many pairs",
    st.fixed_dictionaries(
        {"a": st.integers(2, 4).flatmap(lambda k: tensor((k, 40))), "m": st.integers(1, 12), "uncertain": st.booleans()}
    ),
    examples=8,
)
def _(fn, ex):
    a, m = ex["a"], ex["m"]
    out = fn(a, a.clone(), m, "uncertain" if ex["uncertain"] else "disagreement")
    if bad := _indices(out, m, a.shape[1]):
        return bad
    return None if out.tolist() == list(range(m)) else f"{got(out)}, expected {list(range(m))}"


@law(
    "select_pairs",
    "uncertain_scale_free",
    "'uncertain' picks the same pairs when every score is multiplied by 1000 (in float32 too) or by 1/1000: it "
    "compares the differences themselves",
    _candidates().filter(lambda ex: _clear(ex["a"], ex["b"], "uncertain")),
)
def _(fn, ex):
    a, b, m = ex["a"], ex["b"], ex["m"]
    first = fn(a, b, m, "uncertain")
    for scale, dtype in ((1000.0, torch.float32), (1e-3, F64)):
        scaled = fn((a * scale).to(dtype), (b * scale).to(dtype), m, "uncertain")
        if bad := _indices(first, m, a.shape[1]) or _indices(scaled, m, a.shape[1]):
            return bad
        if scaled.tolist() != first.tolist():
            return f"{got(scaled)} with the scores times {scale:g} ({dtype}), {fmt(first)} before"
    return None


@law(
    "select_pairs",
    "nested",
    "one more label picks the same pairs and one more (the M best keys are among the M + 1 best)",
    _candidates(least=2).filter(lambda ex: ex["m"] < ex["a"].shape[1] and _clear(ex["a"], ex["b"], ex["selection"])),
)
def _(fn, ex):
    a, b, m, selection = ex["a"], ex["b"], ex["m"], ex["selection"]
    fewer, more = fn(a, b, m, selection), fn(a, b, m + 1, selection)
    if bad := _indices(fewer, m, a.shape[1]) or _indices(more, m + 1, a.shape[1]):
        return bad
    missing = set(fewer.tolist()) - set(more.tolist())
    return None if not missing else f"{got(fewer)} with {m} labels, {fmt(more)} with {m + 1}: lost {sorted(missing)}"


@law(
    "select_pairs",
    "models_permuted",
    "listing the k models in another order picks the same pairs",
    _candidates(least=2).filter(lambda ex: _clear(ex["a"], ex["b"], ex["selection"])),
)
def _(fn, ex):
    a, b, m, selection, order = ex["a"], ex["b"], ex["m"], ex["selection"], ex["order"]
    first, second = fn(a, b, m, selection), fn(a[order], b[order], m, selection)
    if bad := _indices(first, m, a.shape[1]) or _indices(second, m, a.shape[1]):
        return bad
    return None if first.tolist() == second.tolist() else f"{got(second)} with the models reordered, {fmt(first)}"


@law(
    "select_pairs",
    "swapped_replies",
    "swapping the two replies of every pair picks the same pairs (unsure and disputed either way round)",
    _candidates(least=2).filter(lambda ex: _clear(ex["a"], ex["b"], ex["selection"])),
)
def _(fn, ex):
    a, b, m, selection = ex["a"], ex["b"], ex["m"], ex["selection"]
    first, second = fn(a, b, m, selection), fn(b, a, m, selection)
    if bad := _indices(first, m, a.shape[1]) or _indices(second, m, a.shape[1]):
        return bad
    return None if first.tolist() == second.tolist() else f"{got(second)} with a and b swapped, {fmt(first)} before"


@law(
    "select_pairs",
    "refused",
    "num_labels outside 1 to C, an unknown selection, or 'disagreement' with one model raises ValueError",
    st.fixed_dictionaries(
        {
            "a": tensor((2, 5)),
            "case": st.sampled_from(["zero", "too_many", "unknown", "Random", "one_model"]),
        }
    ),
    examples=8,
)
def _(fn, ex):
    a, case = ex["a"], ex["case"]
    call = {
        "zero": lambda: fn(a, -a, 0, "random"),
        "too_many": lambda: fn(a, -a, 6, "uncertain"),
        "unknown": lambda: fn(a, -a, 2, "largest"),
        "Random": lambda: fn(a, -a, 2, "Random"),
        "one_model": lambda: fn(a[:1], -a[:1], 2, "disagreement"),
    }[case]
    return raises_value_error(call)


@law(
    "select_pairs",
    "inputs_unchanged",
    "the inputs stay unchanged, in float32 too",
    st.fixed_dictionaries({"ex": _candidates(least=2), "dtype": DTYPES}),
)
def _(fn, ex):
    a, b = ex["ex"]["a"].to(ex["dtype"]), ex["ex"]["b"].to(ex["dtype"])
    before = (a.clone(), b.clone())
    out = fn(a, b, ex["ex"]["m"], ex["ex"]["selection"])
    if bad := _indices(out, ex["ex"]["m"], a.shape[1]):
        return bad
    return None if torch.equal(before[0], a) and torch.equal(before[1], b) else "scores_a or scores_b changed in place"


# --- proxy_agreement (§16.3) --------------------------------------------------------------------------

_GOLD = st.sampled_from([-1.0, 0.0, 1 / 3, 1.0])


@st.composite
def _labelled(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 8))
    return {
        "pa": torch.tensor(draw(st.lists(floats(-2, 2), min_size=n, max_size=n)), dtype=F64),
        "pb": torch.tensor(draw(st.lists(floats(-2, 2), min_size=n, max_size=n)), dtype=F64),
        "ga": torch.tensor(draw(st.lists(_GOLD, min_size=n, max_size=n)), dtype=F64),
        "gb": torch.tensor(draw(st.lists(_GOLD, min_size=n, max_size=n)), dtype=F64),
        "order": draw(st.permutations(range(n))),
    }


def _share(out: object, dtype: torch.dtype = F64) -> str | None:
    if isinstance(out, torch.Tensor) and out.shape == () and out.dtype == dtype:
        return None
    what = f"shape {tuple(out.shape)}, dtype {out.dtype}" if isinstance(out, torch.Tensor) else got(out)
    return f"{what}, expected a 0-dim tensor of dtype {dtype}"


def _expected(ex: dict) -> float:
    counted = [
        (pa, pb, ga, gb) for pa, pb, ga, gb in zip(*(ex[k].tolist() for k in ("pa", "pb", "ga", "gb"))) if ga != gb
    ]
    if not counted:
        return float("nan")
    return sum((pa > pb and ga > gb) or (pa < pb and ga < gb) for pa, pb, ga, gb in counted) / len(counted)


@law(
    "proxy_agreement",
    "the_share",
    "the share of the pairs the annotator does not tie on which the proxy strictly prefers the annotator's reply "
    "(NaN when the annotator ties every pair)",
    _labelled(),
)
def _(fn, ex):
    out = fn(ex["pa"], ex["pb"], ex["ga"], ex["gb"])
    if bad := _share(out):
        return bad
    expected = _expected(ex)
    if expected != expected:
        return None if bool(out.isnan()) else f"{got(out)} where every pair is a tie of the annotator, expected NaN"
    return None if close(out, torch.tensor(expected, dtype=F64)) else f"{got(out)}, expected {expected:.6g}"


@law(
    "proxy_agreement",
    "proxy_ties",
    "a proxy that scores both replies of every pair alike prefers neither: it agrees on no pair (0; NaN when the "
    "annotator ties every pair too)",
    _labelled(),
)
def _(fn, ex):
    out = fn(ex["pa"], ex["pa"].clone(), ex["ga"], ex["gb"])
    if bad := _share(out):
        return bad
    if bool((ex["ga"] == ex["gb"]).all()):
        return None if bool(out.isnan()) else f"{got(out)} where every pair is a tie of both, expected NaN"
    return None if float(out) == 0.0 else f"{got(out)} for a proxy that ties every pair, expected 0"


@law(
    "proxy_agreement",
    "tiny_differences",
    "the share is the same when every proxy and gold score is multiplied by 1e-25 in float32: any difference, however "
    "small, is a preference",
    _labelled().filter(
        lambda ex: (
            all(v == 0 or abs(v) > 1e-3 for k in ("pa", "pb") for v in ex[k].tolist())
            and bool(((ex["pa"] - ex["pb"]).abs() > 1e-3).all() or (ex["pa"] == ex["pb"]).any())
        )
    ),
)
def _(fn, ex):
    first = fn(ex["pa"], ex["pb"], ex["ga"], ex["gb"])
    tiny = fn(*((ex[k] * 1e-25).float() for k in ("pa", "pb", "ga", "gb")))
    if bad := _share(first) or _share(tiny, torch.float32):
        return bad
    if bool(first.isnan()):
        return None if bool(tiny.isnan()) else f"{got(tiny)} scaled by 1e-25, NaN before"
    return None if abs(float(tiny) - float(first)) < 1e-6 else f"{got(tiny)} scaled by 1e-25, {fmt(first)} before"


@law(
    "proxy_agreement",
    "swapped_replies",
    "swapping the two replies of every pair (proxy and gold alike) changes nothing",
    _labelled(),
)
def _(fn, ex):
    first, second = fn(ex["pa"], ex["pb"], ex["ga"], ex["gb"]), fn(ex["pb"], ex["pa"], ex["gb"], ex["ga"])
    if bad := _share(first) or _share(second):
        return bad
    same = torch.equal(first.isnan(), second.isnan()) and (bool(first.isnan()) or close(first, second))
    return None if same else f"{got(second)} with the replies swapped, {fmt(first)} before"


@law(
    "proxy_agreement",
    "a_reversed_proxy",
    "a proxy that reverses every order agrees on 1 - the share (a proxy without ties); ties of the annotator never count",
    _labelled().filter(lambda ex: bool((ex["pa"] != ex["pb"]).all())),
)
def _(fn, ex):
    share, reversed_ = fn(ex["pa"], ex["pb"], ex["ga"], ex["gb"]), fn(ex["pb"], ex["pa"], ex["ga"], ex["gb"])
    if bad := _share(share) or _share(reversed_):
        return bad
    if bool(share.isnan()):
        return None if bool(reversed_.isnan()) else f"{got(reversed_)} reversed, NaN before"
    return (
        None
        if close(share + reversed_, torch.tensor(1.0, dtype=F64))
        else f"{got(share)} and {fmt(reversed_)} reversed"
    )


@law(
    "proxy_agreement",
    "pairs_permuted",
    "listing the pairs in another order changes nothing",
    _labelled(),
)
def _(fn, ex):
    o = ex["order"]
    first, second = fn(ex["pa"], ex["pb"], ex["ga"], ex["gb"]), fn(ex["pa"][o], ex["pb"][o], ex["ga"][o], ex["gb"][o])
    if bad := _share(first) or _share(second):
        return bad
    same = torch.equal(first.isnan(), second.isnan()) and (bool(first.isnan()) or close(first, second))
    return None if same else f"{got(second)} with the pairs reordered, {fmt(first)} before"


@law(
    "proxy_agreement",
    "inputs_unchanged",
    "the inputs stay unchanged and a float32 proxy gives a float32 share",
    st.fixed_dictionaries({"ex": _labelled(), "dtype": DTYPES}),
)
def _(fn, ex):
    args = [ex["ex"][k].to(ex["dtype"]) for k in ("pa", "pb", "ga", "gb")]
    before = [a.clone() for a in args]
    out = fn(*args)
    if bad := _share(out, ex["dtype"]):
        return bad
    return None if all(torch.equal(b, a) for b, a in zip(before, args)) else "an input was changed in place"
