"""Property laws of rlhf_practice/rl/after_grpo.py: compute_rloo_advantages (§14.2), clip_higher_loss (§14.3),
gspo_loss (§14.4), cispo_loss (§14.5) and filter_groups (§14.6), task 14."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from properties import NO_GRADIENT, TOL, _Override, close, fmt, got, law
from properties.draws import (
    _number,
    _ratio,
    away_from,
    clipped_loss_inputs,
    floats,
    gradcheck,
    loss_reduction,
    other_padding,
    raises_value_error,
    tensor,
    unchanged,
)

NO_GRADIENT["compute_rloo_advantages"] = "advantages are constants of the loss"
NO_GRADIENT["filter_groups"] = "it returns which groups to keep, a bool mask: nothing to differentiate"


def _k3(lp: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    d = lp - ref
    return torch.exp(-d) - 1 + d


def _reply_mean(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)


# --- compute_rloo_advantages (§14.2) ------------------------------------------------------------------

_rloo = st.tuples(st.integers(1, 3), st.integers(2, 5)).flatmap(
    lambda bk: st.fixed_dictionaries(
        {"rewards": tensor((bk[0] * bk[1],)), "group_size": st.just(bk[1]), "shift": floats(-50, 50)}
    )
)


def _vector(a: object, shape: torch.Size) -> str | None:
    return None if isinstance(a, torch.Tensor) and a.shape == shape else f"{got(a)}, expected shape {tuple(shape)}"


@law(
    "compute_rloo_advantages",
    "scaled_centred_rewards",
    "each advantage is K / (K - 1) times the reward minus its group's mean (r minus the mean of the other K - 1)",
    _rloo,
)
def _(fn, ex):
    r, k = ex["rewards"], ex["group_size"]
    a = fn(r, k)
    if bad := _vector(a, r.shape):
        return bad
    g = r.view(-1, k)
    expected = (k / (k - 1) * (g - g.mean(dim=1, keepdim=True))).reshape(-1)
    return None if close(a, expected) else f"{got(a)}, expected {fmt(expected)}"


@law(
    "compute_rloo_advantages",
    "shift_invariant",
    "adding the same number to every reward changes no advantage",
    _rloo,
)
def _(fn, ex):
    r, k = ex["rewards"], ex["group_size"]
    a, b = fn(r, k), fn(r + ex["shift"], k)
    if bad := _vector(a, r.shape) or _vector(b, r.shape):
        return bad
    return None if close(b, a.detach(), 1e-5) else f"{got(b)} after the shift, {fmt(a)} before"


@law(
    "compute_rloo_advantages",
    "tie_exactly_zero",
    "a group of equal rewards gets advantages of exactly 0, in float32 too",
    st.fixed_dictionaries(
        {
            "value": st.sampled_from([100.3, 1000.1, 12.4, 1.4]) | floats(-500, 500),
            "group_size": st.integers(2, 8),
            "dtype": st.sampled_from([torch.float32, torch.float64]),
        }
    ),
)
def _(fn, ex):
    r = torch.full((2 * ex["group_size"],), ex["value"], dtype=ex["dtype"])
    a = fn(r, ex["group_size"])
    if bad := _vector(a, r.shape):
        return bad
    return None if bool((a == 0).all()) else got(a)


@law(
    "compute_rloo_advantages",
    "one_reply_raises",
    "group_size 1 raises ValueError (a reply alone has no others to compare with)",
    st.fixed_dictionaries({"rewards": tensor((3,))}),
    examples=5,
)
def _(fn, ex):
    return raises_value_error(lambda: fn(ex["rewards"], 1))


@law(
    "compute_rloo_advantages",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    _rloo,
)
def _(fn, ex):
    return unchanged(fn, (ex["rewards"], ex["group_size"]))


# --- the losses: shared inputs ------------------------------------------------------------------------

_shape = st.tuples(st.integers(1, 4), st.integers(1, 4))
_losses = clipped_loss_inputs(_shape, clip_range_low=floats(0.05, 0.4), clip_range_high=floats(0.05, 0.5))

TENSORS = ("logprobs", "old_logprobs", "ref_logprobs", "advantages", "mask")


def _args(ex: dict, names: tuple[str, ...], **change: object) -> tuple:
    ex = _Override(ex, change)
    return tuple(ex[n] for n in TENSORS + names)


def _constants(fn, ex: dict, names: tuple[str, ...]) -> str | None:
    """None if no gradient reaches old_logprobs, ref_logprobs or advantages (constants of the loss)."""
    leaves = {n: ex[n].detach().clone().requires_grad_(True) for n in ("old_logprobs", "ref_logprobs", "advantages")}
    out = fn(*_args(ex, names, **leaves))
    if bad := _number(out):
        return bad
    if not out.requires_grad:
        return None
    grads = torch.autograd.grad(out, list(leaves.values()), allow_unused=True)
    for name, grad in zip(leaves, grads):
        if grad is not None and bool(grad.abs().sum() > 0):
            return f"a gradient reached {name} ({fmt(grad)}): detach it"
    return None


# --- clip_higher_loss (§14.3) -------------------------------------------------------------------------

CLIP_HIGHER = ("clip_range_low", "clip_range_high", "beta", "loss_type", "max_tokens")


@law(
    "clip_higher_loss",
    "equal_ranges_are_grpo_clip",
    "with clip_range_low == clip_range_high == epsilon it is grpo_clip_loss (§9.2) with clip_range epsilon",
    _losses,
)
def _(fn, ex):
    eps = ex["clip_range_low"]
    out = fn(*_args(ex, CLIP_HIGHER, clip_range_high=eps))
    if bad := _number(out):
        return bad
    lp, old, ref, adv, m = (ex[n] for n in TENSORS)
    ratio, a = torch.exp(lp - old), adv[:, None]
    per_token = -torch.min(ratio * a, ratio.clamp(1 - eps, 1 + eps) * a) + ex["beta"] * _k3(lp, ref)
    expected = loss_reduction(per_token, m, ex["loss_type"], ex["max_tokens"])
    return None if close(out, expected) else f"{got(out)}, grpo_clip_loss gives {fmt(expected)}"


@law(
    "clip_higher_loss",
    "wider_ranges_never_raise_the_loss",
    "widening either clip range never raises the loss (a wider range clips fewer tokens, and the clip only lowers "
    "the objective); the ceiling is 1 + clip_range_high, the floor 1 - clip_range_low",
    st.fixed_dictionaries({"ex": _losses, "more": floats(0.05, 0.5), "side": st.sampled_from(["low", "high"])}),
)
def _(fn, ex):
    e, name = ex["ex"], f"clip_range_{ex['side']}"
    wider = min(e[name] + ex["more"], 0.95)
    a, b = fn(*_args(e, CLIP_HIGHER)), fn(*_args(e, CLIP_HIGHER, **{name: wider}))
    if bad := _number(a) or _number(b):
        return bad
    return None if b.item() <= a.item() + TOL else f"{fmt(a)} at {name} {e[name]:.4g}, {fmt(b)} at {wider:.4g}"


@law(
    "clip_higher_loss",
    "two_ranges",
    "with beta = 0 the loss is the loss_type's reduction of -min(ratio * A, clamp(ratio, 1 - clip_range_low, "
    "1 + clip_range_high) * A): the floor from clip_range_low, the ceiling from clip_range_high",
    _losses,
)
def _(fn, ex):
    out = fn(*_args(ex, CLIP_HIGHER, beta=0.0))
    if bad := _number(out):
        return bad
    lp, old, _, adv, m = (ex[n] for n in TENSORS)
    ratio, a = torch.exp(lp - old), adv[:, None]
    clipped = ratio.clamp(1 - ex["clip_range_low"], 1 + ex["clip_range_high"])
    expected = loss_reduction(-torch.min(ratio * a, clipped * a), m, ex["loss_type"], ex["max_tokens"])
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "clip_higher_loss",
    "dr_grpo_divides_by_max_tokens",
    "with loss_type 'dr_grpo' the loss is divided by N * max_tokens: doubling max_tokens halves it",
    _losses,
)
def _(fn, ex):
    a = fn(*_args(ex, CLIP_HIGHER, loss_type="dr_grpo"))
    b = fn(*_args(ex, CLIP_HIGHER, loss_type="dr_grpo", max_tokens=2 * ex["max_tokens"]))
    if bad := _number(a) or _number(b):
        return bad
    return (
        None
        if close(b, a.detach() / 2)
        else f"{got(b)} at max_tokens {2 * ex['max_tokens']}, {fmt(a)} at {ex['max_tokens']}"
    )


@law(
    "clip_higher_loss",
    "constants_carry_no_gradient",
    "no gradient reaches old_logprobs, ref_logprobs or advantages: they are constants of the loss",
    _losses,
)
def _(fn, ex):
    return _constants(fn, ex, CLIP_HIGHER)


@law(
    "clip_higher_loss",
    "padding_changes_nothing",
    "values under padding, and extra padding columns, change nothing",
    _losses,
)
def _(fn, ex):
    return other_padding(fn, ex, lambda **change: _args(ex, CLIP_HIGHER, **change))


@law(
    "clip_higher_loss",
    "unknown_loss_type_raises",
    "a loss_type other than 'grpo', 'dapo' or 'dr_grpo' raises ValueError",
    st.fixed_dictionaries({"ex": _losses, "loss_type": st.sampled_from(["cispo", "GRPO", "mean", ""])}),
    examples=8,
)
def _(fn, ex):
    return raises_value_error(lambda: fn(*_args(ex["ex"], CLIP_HIGHER, loss_type=ex["loss_type"])))


@law(
    "clip_higher_loss",
    "gradcheck",
    "autograd's gradient w.r.t. logprobs equals float64 central differences (all-masked rows included)",
    _losses.filter(
        lambda ex: away_from(
            _ratio(ex, "logprobs", "old_logprobs"), [1 - ex["clip_range_low"], 1 + ex["clip_range_high"]]
        )
    ),
    examples=10,
)
def _(fn, ex):
    rest = _args(ex, CLIP_HIGHER)[1:]
    return gradcheck(lambda lp: fn(lp, *rest), [ex["logprobs"]], "logprobs")


@law(
    "clip_higher_loss",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    _losses,
)
def _(fn, ex):
    return unchanged(fn, _args(ex, CLIP_HIGHER))


# --- gspo_loss (§14.4) --------------------------------------------------------------------------------

GSPO = ("clip_range_low", "clip_range_high", "beta")


@law(
    "gspo_loss",
    "ratio_one",
    "where every ratio is 1 (old_logprobs == logprobs) the loss is mean(-A) plus beta times the mean over replies "
    "of each reply's mean k3 over its real tokens",
    _losses,
)
def _(fn, ex):
    lp, ref, adv, m = ex["logprobs"], ex["ref_logprobs"], ex["advantages"], ex["mask"]
    out = fn(*_args(ex, GSPO, old_logprobs=lp.clone()))
    if bad := _number(out):
        return bad
    expected = (-adv + ex["beta"] * _reply_mean(_k3(lp, ref), m)).mean()
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "gspo_loss",
    "length_invariant",
    "saying every token of every reply twice (each column repeated) changes nothing: s_i is the geometric MEAN of "
    "the reply's token ratios, and the KL term its mean k3",
    _losses,
)
def _(fn, ex):
    base = fn(*_args(ex, GSPO))
    twice = {n: ex[n].repeat_interleave(2, dim=1) for n in ("logprobs", "old_logprobs", "ref_logprobs", "mask")}
    out = fn(*_args(ex, GSPO, **twice))
    if bad := _number(base) or _number(out):
        return bad
    return None if close(out, base.detach()) else f"{got(out)} with every token twice, {fmt(base)} before"


@law(
    "gspo_loss",
    "one_ratio_per_reply",
    "with beta = 0 a reply's loss is -min(s * A, clamp(s, 1 - clip_range_low, 1 + clip_range_high) * A) with s = "
    "exp(mean of its real tokens' log-ratios): the clip acts on the reply's one ratio",
    _losses,
)
def _(fn, ex):
    lp, old, adv, m = ex["logprobs"], ex["old_logprobs"], ex["advantages"], ex["mask"]
    out = fn(*_args(ex, GSPO, beta=0.0))
    if bad := _number(out):
        return bad
    s = torch.exp(_reply_mean(lp - old, m))
    expected = -torch.min(s * adv, s.clamp(1 - ex["clip_range_low"], 1 + ex["clip_range_high"]) * adv).mean()
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "gspo_loss",
    "padding_changes_nothing",
    "values under padding, and extra padding columns, change nothing",
    _losses,
)
def _(fn, ex):
    return other_padding(fn, ex, lambda **change: _args(ex, GSPO, **change))


def _s(ex: dict) -> torch.Tensor:
    return torch.exp(_reply_mean(ex["logprobs"] - ex["old_logprobs"], ex["mask"]))


@law(
    "gspo_loss",
    "gradcheck",
    "autograd's gradient w.r.t. logprobs equals float64 central differences (all-masked rows included)",
    _losses.filter(lambda ex: away_from(_s(ex), [1 - ex["clip_range_low"], 1 + ex["clip_range_high"]])),
    examples=10,
)
def _(fn, ex):
    rest = _args(ex, GSPO)[1:]
    return gradcheck(lambda lp: fn(lp, *rest), [ex["logprobs"]], "logprobs")


@law(
    "gspo_loss",
    "constants_carry_no_gradient",
    "no gradient reaches old_logprobs, ref_logprobs or advantages: they are constants of the loss",
    _losses,
)
def _(fn, ex):
    return _constants(fn, ex, GSPO)


@law("gspo_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _losses)
def _(fn, ex):
    return unchanged(fn, _args(ex, GSPO))


# --- cispo_loss (§14.5) -------------------------------------------------------------------------------

CISPO = ("clip_range_high", "beta")


@law(
    "cispo_loss",
    "gradient",
    "autograd's gradient w.r.t. logprobs is (-w * A + beta * (1 - exp(ref_logprobs - logprobs))) * mask / (number of "
    "real tokens in the batch), w = min(ratio, 1 + clip_range_high) a constant: every real token keeps its gradient",
    _losses,
)
def _(fn, ex):
    lp = ex["logprobs"].detach().clone().requires_grad_(True)
    out = fn(*_args(ex, CISPO, logprobs=lp))
    if bad := _number(out):
        return bad
    if not out.requires_grad:
        return "the result carries no gradient to logprobs"
    (grad,) = torch.autograd.grad(out, lp, allow_unused=True)
    old, ref, adv, m = ex["old_logprobs"], ex["ref_logprobs"], ex["advantages"], ex["mask"]
    w = torch.exp(ex["logprobs"] - old).clamp(max=1 + ex["clip_range_high"])
    expected = (-w * adv[:, None] + ex["beta"] * (1 - torch.exp(ref - ex["logprobs"]))) * m / m.sum().clamp(min=1)
    grad = torch.zeros_like(lp) if grad is None else grad
    return None if close(grad, expected) else f"gradient {fmt(grad)}, expected {fmt(expected)}"


@law(
    "cispo_loss",
    "ratio_one",
    "where every ratio is 1 (old_logprobs == logprobs, so w = 1) the loss is the mean over every real token of the "
    "batch of -A * logprobs + beta * k3",
    _losses,
)
def _(fn, ex):
    lp, ref, adv, m = ex["logprobs"], ex["ref_logprobs"], ex["advantages"], ex["mask"]
    out = fn(*_args(ex, CISPO, old_logprobs=lp.clone()))
    if bad := _number(out):
        return bad
    expected = loss_reduction(-adv[:, None] * lp + ex["beta"] * _k3(lp, ref), m, "dapo", 0)
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "cispo_loss",
    "weight_capped_not_floored",
    "with beta = 0 the loss is the mean over every real token of -min(ratio, 1 + clip_range_high) * A * logprobs: "
    "capped above, no floor",
    _losses,
)
def _(fn, ex):
    lp, old, adv, m = ex["logprobs"], ex["old_logprobs"], ex["advantages"], ex["mask"]
    out = fn(*_args(ex, CISPO, beta=0.0))
    if bad := _number(out):
        return bad
    w = torch.exp(lp - old).clamp(max=1 + ex["clip_range_high"])
    expected = loss_reduction(-w * adv[:, None] * lp, m, "dapo", 0)
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "cispo_loss",
    "padding_changes_nothing",
    "values under padding, and extra padding columns, change nothing",
    _losses,
)
def _(fn, ex):
    return other_padding(fn, ex, lambda **change: _args(ex, CISPO, **change))


@law(
    "cispo_loss",
    "constants_carry_no_gradient",
    "no gradient reaches old_logprobs, ref_logprobs or advantages: they are constants of the loss",
    _losses,
)
def _(fn, ex):
    return _constants(fn, ex, CISPO)


@law("cispo_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _losses)
def _(fn, ex):
    return unchanged(fn, _args(ex, CISPO))


# --- filter_groups (§14.6) ----------------------------------------------------------------------------

_outcomes = st.tuples(st.integers(1, 4), st.integers(1, 6)).flatmap(
    lambda bk: st.fixed_dictionaries(
        {
            "correct": st.lists(st.booleans(), min_size=bk[0] * bk[1], max_size=bk[0] * bk[1]).map(
                lambda xs: torch.tensor(xs, dtype=torch.float64)
            ),
            "group_size": st.just(bk[1]),
            "order": st.permutations(range(bk[1])),
            "as_bool": st.booleans(),
        }
    )
)


def _keep(out: object, groups: int) -> str | None:
    if isinstance(out, torch.Tensor) and out.shape == (groups,) and out.dtype == torch.bool:
        return None
    return f"{got(out)}, expected a bool tensor of shape ({groups},)"


def _correct(ex: dict) -> torch.Tensor:
    return ex["correct"].bool() if ex["as_bool"] else ex["correct"]


@law(
    "filter_groups",
    "mixed_groups_kept",
    "a group is kept exactly when some of its replies are right and some wrong (0 < right ones < K)",
    _outcomes,
)
def _(fn, ex):
    k = ex["group_size"]
    right_ones = ex["correct"].view(-1, k).sum(dim=1)
    out = fn(_correct(ex), k)
    if bad := _keep(out, len(right_ones)):
        return bad
    expected = (right_ones > 0) & (right_ones < k)
    return None if torch.equal(out, expected) else f"{got(out)}, expected {expected.tolist()}"


@law(
    "filter_groups",
    "shuffle_within_group",
    "shuffling the replies inside each group changes nothing",
    _outcomes,
)
def _(fn, ex):
    k, n = ex["group_size"], len(ex["correct"])
    p = [g + i for g in range(0, n, k) for i in ex["order"]]
    a, b = fn(_correct(ex), k), fn(_correct(ex)[p], k)
    if bad := _keep(a, n // k) or _keep(b, n // k):
        return bad
    return None if torch.equal(a, b) else f"{got(b)} after shuffling, {fmt(a)} before"


@law(
    "filter_groups",
    "outcomes_flipped",
    "flipping every outcome (right <-> wrong) changes nothing: all right and all wrong are both ties",
    _outcomes,
)
def _(fn, ex):
    k = ex["group_size"]
    flipped = 1.0 - ex["correct"]
    a, b = fn(_correct(ex), k), fn(flipped.bool() if ex["as_bool"] else flipped, k)
    groups = len(ex["correct"]) // k
    if bad := _keep(a, groups) or _keep(b, groups):
        return bad
    return None if torch.equal(a, b) else f"{got(b)} with every outcome flipped, {fmt(a)} before"


@law(
    "filter_groups",
    "one_odd_reply_kept",
    "a group with one reply unlike all the others (one right among wrong ones, or one wrong among right ones) is kept, "
    "however large the group",
    st.fixed_dictionaries(
        {"group_size": st.integers(2, 32), "odd": st.integers(0, 31), "right": st.booleans(), "as_bool": st.booleans()}
    ),
)
def _(fn, ex):
    k = ex["group_size"]
    correct = torch.full((k,), float(ex["right"]), dtype=torch.float64)
    correct[ex["odd"] % k] = 1.0 - correct[ex["odd"] % k]
    out = fn(correct.bool() if ex["as_bool"] else correct, k)
    if bad := _keep(out, 1):
        return bad
    return None if bool(out.all()) else f"{got(out)}, expected [True]"


@law("filter_groups", "inputs_unchanged", "the input stays unchanged", _outcomes)
def _(fn, ex):
    before = ex["correct"].clone()
    fn(ex["correct"], ex["group_size"])
    return None if torch.equal(before, ex["correct"]) else f"correct was changed in place to {fmt(ex['correct'])}"
