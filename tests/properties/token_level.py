"""Property laws of rlhf_practice/rl/token_level.py: masked_mean, per_token_kl, compute_gae, token_ppo_loss and grpo_clip_loss (§7-§9), tasks 7-9."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from properties import NO_GRADIENT, TOL, _Override, close, fmt, got, law
from properties.draws import (
    _number,
    _olds,
    _pad,
    _ratio,
    away_from,
    clipped_loss_inputs,
    each_row,
    floats,
    gradcheck,
    loss_reduction,
    other_padding,
    raises_value_error,
    response_mask,
    tensor,
    unchanged,
)

NO_GRADIENT["compute_gae"] = "advantages and returns are constants of the loss; the law: no gradient reaches values"

# --- masked_mean (§7.2) -------------------------------------------------------------------------------

_shape = st.tuples(st.integers(1, 3), st.integers(1, 4))
_masked = _shape.flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "values": tensor(s),
            "mask": response_mask(*s),
            "other": tensor(s),
            "dim": st.sampled_from([None, 1]),
            "pad": st.integers(1, 2),
        }
    )
)


@law(
    "masked_mean",
    "ignores_masked_values",
    "the values where mask is 0 do not change the result",
    _masked,
)
def _(fn, ex):
    v, m = ex["values"], ex["mask"]
    a, b = fn(v, m, ex["dim"]), fn(torch.where(m > 0, v, ex["other"]), m, ex["dim"])
    return None if close(b, a.detach()) else f"{got(b)} with other padding values, {fmt(a)} before"


@law(
    "masked_mean",
    "padding_columns",
    "appending padding columns (mask 0) changes nothing",
    _masked,
)
def _(fn, ex):
    v, m, k = ex["values"], ex["mask"], ex["pad"]
    a, b = fn(v, m, ex["dim"]), fn(_pad(v, k, 5.0), _pad(m, k), ex["dim"])
    return None if close(b, a.detach()) else f"{got(b)} with {k} padding columns, {fmt(a)} without"


@law(
    "masked_mean",
    "one_mean_over_tokens",
    "with dim=None it is one mean over every real token of the batch (0 when there is none), one number",
    _masked,
)
def _(fn, ex):
    v, m = ex["values"], ex["mask"]
    out = fn(v, m, None)
    count = m.sum()
    expected = (v * m).sum() / count if count > 0 else torch.zeros((), dtype=v.dtype)
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "masked_mean",
    "per_row",
    "with dim=1 it gives one mean per row; an all-masked row gives 0 (not NaN) and a finite gradient",
    _masked,
)
def _(fn, ex):
    v, m = ex["values"].clone().requires_grad_(True), ex["mask"]
    out = fn(v, m, 1)
    if not isinstance(out, torch.Tensor) or out.shape != (v.shape[0],):
        return f"{got(out)}, expected shape ({v.shape[0]},)"
    empty = m.sum(dim=1) == 0
    if not torch.isfinite(out).all() or not (out.detach()[empty] == 0).all():
        return got(out)
    if out.requires_grad:
        (grad,) = torch.autograd.grad(out.sum(), v)
        if not torch.isfinite(grad).all():
            return f"gradient {fmt(grad)}"
    return None


@law(
    "masked_mean",
    "gradcheck",
    "autograd's gradient w.r.t. values equals float64 central differences",
    _masked,
    examples=10,
)
def _(fn, ex):
    m, dim = ex["mask"], ex["dim"]
    return gradcheck(lambda v: fn(v, m, dim), [ex["values"]], "values")


@law("masked_mean", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _masked)
def _(fn, ex):
    return unchanged(fn, (ex["values"], ex["mask"], ex["dim"]))


# --- per_token_kl (§7.3) ------------------------------------------------------------------------------

_kl = _shape.flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "logprobs": tensor(s, -4, 0),
            "ref_logprobs": tensor(s, -4, 0),
            "mask": response_mask(*s),
            "estimator": st.sampled_from(["k1", "k3"]),
        }
    )
)


@law(
    "per_token_kl",
    "k3_nonnegative",
    "k3 is >= 0 at every token, 0 where logprobs == ref_logprobs and > 0 on a real token where they differ",
    _kl,
)
def _(fn, ex):
    lp, ref, m = ex["logprobs"], ex["ref_logprobs"], ex["mask"]
    kl = fn(lp, ref, m, "k3")
    if not isinstance(kl, torch.Tensor) or kl.shape != lp.shape:
        return got(kl)
    differ = ((lp - ref).abs() > 1e-3) & (m > 0)
    same = fn(lp, lp.clone(), m, "k3")
    if (kl < -TOL).any() or (kl[differ] <= 0).any() or not close(same, torch.zeros_like(lp)):
        return f"{got(kl)} (and {fmt(same)} for ref_logprobs = logprobs)"
    return None


@law(
    "per_token_kl",
    "k1_is_log_ratio",
    "k1 is the log-ratio log(pi / pi_ref) = logprobs - ref_logprobs on real tokens (swapping the two negates it)",
    _kl,
)
def _(fn, ex):
    lp, ref, m = ex["logprobs"], ex["ref_logprobs"], ex["mask"]
    kl = fn(lp, ref, m, "k1")
    expected = (lp - ref) * m
    return None if close(kl, expected) else f"{got(kl)}, expected {fmt(expected)}"


@law(
    "per_token_kl",
    "unbiased_over_vocabulary",
    "over a whole vocabulary, the pi-weighted mean of k1 and of k3 both equal KL(pi || pi_ref)",
    st.integers(2, 5).flatmap(
        lambda v: st.fixed_dictionaries({"logits": tensor((1, v)), "ref_logits": tensor((1, v))})
    ),
)
def _(fn, ex):
    lp, ref = torch.log_softmax(ex["logits"], -1), torch.log_softmax(ex["ref_logits"], -1)
    kl = (lp.exp() * (lp - ref)).sum()
    for estimator in ("k1", "k3"):
        out = fn(lp, ref, torch.ones_like(lp), estimator)
        if not isinstance(out, torch.Tensor) or out.shape != lp.shape:
            return f"{estimator}: {got(out)}"
        mean = (lp.exp() * out).sum()
        if abs(mean.item() - kl.item()) > 1e-6:
            return f"{estimator}: {fmt(out)}, whose pi-weighted mean is {mean.item():.4g}, not KL = {kl.item():.4g}"
    return None


@law("per_token_kl", "masked_positions_zero", "masked positions get KL 0 (both estimators)", _kl)
def _(fn, ex):
    lp, ref, m = ex["logprobs"], ex["ref_logprobs"], ex["mask"]
    kl = fn(lp, ref, m, ex["estimator"])
    if not isinstance(kl, torch.Tensor) or kl.shape != lp.shape:
        return got(kl)
    return None if (kl.detach()[m == 0] == 0).all() else got(kl)


@law(
    "per_token_kl",
    "unknown_estimator_raises",
    "an estimator other than 'k1' or 'k3' raises ValueError",
    st.fixed_dictionaries({"ex": _kl, "estimator": st.sampled_from(["k2", "K3", "kl", ""])}),
    examples=8,
)
def _(fn, ex):
    return raises_value_error(
        lambda: fn(ex["ex"]["logprobs"], ex["ex"]["ref_logprobs"], ex["ex"]["mask"], ex["estimator"])
    )


@law(
    "per_token_kl",
    "gradcheck",
    "autograd's gradient w.r.t. logprobs equals float64 central differences",
    _kl,
    examples=10,
)
def _(fn, ex):
    ref, m, e = ex["ref_logprobs"], ex["mask"], ex["estimator"]
    return gradcheck(lambda lp: fn(lp, ref, m, e), [ex["logprobs"]], "logprobs")


@law("per_token_kl", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _kl)
def _(fn, ex):
    return unchanged(fn, (ex["logprobs"], ex["ref_logprobs"], ex["mask"], ex["estimator"]))


# --- compute_gae (§8.2) -------------------------------------------------------------------------------

_gae = _shape.flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "rewards": tensor(s),
            "values": tensor(s),
            "mask": response_mask(*s),
            "gamma": floats(0.0, 1.0),
            "lam": floats(0.0, 1.0),
            "other": tensor(s),
            "pad": st.integers(1, 2),
        }
    )
)


def _gae_args(ex: dict) -> tuple:
    return ex["rewards"], ex["values"], ex["mask"], ex["gamma"], ex["lam"]


def _pair_out(out: object, shape: torch.Size) -> str | None:
    if not isinstance(out, tuple | list) or len(out) != 2:
        return f"{got(out)}, expected (advantages, returns)"
    if any(not isinstance(x, torch.Tensor) or x.shape != shape for x in out):
        return f"returned shapes {[tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in out]}, expected two of {tuple(shape)}"
    return None


@law(
    "compute_gae",
    "returns_to_go",
    "with gamma = lam = 1 the advantage of a real token is the sum of the reply's rewards from it to the end minus V_t",
    _gae,
)
def _(fn, ex):
    r, v, m = ex["rewards"], ex["values"], ex["mask"]
    out = fn(r, v, m, 1.0, 1.0)
    if bad := _pair_out(out, r.shape):
        return bad
    to_go = (r * m).flip(1).cumsum(1).flip(1)
    expected = (to_go - v) * m
    return None if close(out[0], expected) else f"advantages {fmt(out[0])}, expected {fmt(expected)}"


@law(
    "compute_gae",
    "recursion",
    "on every real token A_t = r_t + gamma * V_{t+1} - V_t + gamma * lam * A_{t+1}, with V and A taken as 0 after the reply's last real token",
    _gae,
)
def _(fn, ex):
    r, v, m, gamma, lam = _gae_args(ex)
    out = fn(r, v, m, gamma, lam)
    if bad := _pair_out(out, r.shape):
        return bad
    a = out[0].detach()
    nxt = lambda x: torch.cat([x[:, 1:] * m[:, 1:], torch.zeros_like(x[:, :1])], dim=1)  # noqa: E731
    residual = (a - (r + gamma * nxt(v) - v + gamma * lam * nxt(a))) * m
    return None if close(residual, torch.zeros_like(a)) else f"advantages {fmt(a)}"


@law(
    "compute_gae",
    "returns_are_a_plus_v",
    "returns = advantages + values on real tokens, and both are 0 on padding",
    _gae,
)
def _(fn, ex):
    r, v, m, gamma, lam = _gae_args(ex)
    out = fn(r, v, m, gamma, lam)
    if bad := _pair_out(out, r.shape):
        return bad
    a, ret = (x.detach() for x in out)
    if close(ret, (a + v) * m) and close(a, a * m):
        return None
    return f"advantages {fmt(a)}, returns {fmt(ret)}"


@law(
    "compute_gae",
    "padding_changes_nothing",
    "rewards and values under padding, and extra padding columns, change nothing",
    _gae,
)
def _(fn, ex):
    r, v, m, gamma, lam = _gae_args(ex)
    k, other = ex["pad"], ex["other"]
    base = fn(r, v, m, gamma, lam)
    if bad := _pair_out(base, r.shape):
        return bad
    r2, v2 = _pad(torch.where(m > 0, r, other), k, 1.0), _pad(torch.where(m > 0, v, -other), k, 1.0)
    padded = fn(r2, v2, _pad(m, k), gamma, lam)
    if bad := _pair_out(padded, r2.shape):
        return bad
    for name, x, y in zip(("advantages", "returns"), base, padded):
        if not close(y.detach(), _pad(x.detach(), k)):
            return f"{name} {fmt(y)} with other padding, {fmt(x)} before"
    return None


@law(
    "compute_gae",
    "no_gradient_to_values",
    "no gradient reaches values through advantages or returns",
    _gae,
)
def _(fn, ex):
    r, v, m, gamma, lam = _gae_args(ex)
    v = v.clone().requires_grad_(True)
    out = fn(r, v, m, gamma, lam)
    parts = [x for x in out if isinstance(x, torch.Tensor) and x.requires_grad]
    if not parts:
        return None
    (grad,) = torch.autograd.grad(sum((x * torch.rand_like(x).add(0.5)).sum() for x in parts), v, allow_unused=True)
    return None if grad is None or not grad.abs().sum() > 0 else f"a gradient {fmt(grad)} reached values"


@law("compute_gae", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _gae)
def _(fn, ex):
    return unchanged(fn, _gae_args(ex))


# --- token_ppo_loss (§8.3) ----------------------------------------------------------------------------

_tppo = _shape.flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "new_logprobs": tensor(s, -4, 0),
            "log_ratio": tensor(s, -0.6, 0.6),
            "advantages": tensor(s),
            "new_values": tensor(s),
            "value_step": tensor(s, -1, 1),
            "returns": tensor(s),
            "mask": response_mask(*s),
            "clip_range": floats(0.05, 0.4),
            "clip_range_value": floats(0.05, 0.5),
            "pad": st.integers(1, 2),
        }
    )
)
_tppo_inside = _tppo.map(_olds("new_logprobs", "old_logprobs", inside=True, values=True))
_tppo = _tppo.map(_olds("new_logprobs", "old_logprobs", values=True))


def _tppo_args(ex: dict) -> tuple:
    return (
        ex["new_logprobs"],
        ex["old_logprobs"],
        ex["advantages"],
        ex["new_values"],
        ex["old_values"],
        ex["returns"],
        ex["mask"],
        ex["clip_range"],
        ex["clip_range_value"],
    )


def _mm(x: torch.Tensor, m: torch.Tensor) -> float:
    return ((x * m).sum() / m.sum().clamp(min=1)).item()


def _two(out: object) -> str | None:
    if (
        not isinstance(out, tuple | list)
        or len(out) != 2
        or any(not isinstance(x, torch.Tensor) or x.dim() for x in out)
    ):
        return f"{got(out)}, expected (policy_loss, value_loss), two numbers"
    return None


@law(
    "token_ppo_loss",
    "pessimistic",
    "policy_loss is at least the masked mean of -ratio * A and of -clamp(ratio) * A; value_loss at least the masked mean of each squared error",
    _tppo,
)
def _(fn, ex):
    new, old, adv, nv, ov, ret, m, eps, eps_v = _tppo_args(ex)
    out = fn(new, old, adv, nv, ov, ret, m, eps, eps_v)
    if bad := _two(out):
        return bad
    ratio = torch.exp(new - old)
    policy_bound = max(_mm(-ratio * adv, m), _mm(-ratio.clamp(1 - eps, 1 + eps) * adv, m))
    clipped_v = ov + (nv - ov).clamp(-eps_v, eps_v)
    value_bound = max(_mm((nv - ret) ** 2, m), _mm((clipped_v - ret) ** 2, m))
    if out[0].item() < policy_bound - TOL or out[1].item() < value_bound - TOL:
        return f"({fmt(out[0])}, {fmt(out[1])}), below the bounds ({policy_bound:.4g}, {value_bound:.4g})"
    return None


@law(
    "token_ppo_loss",
    "inside_clip_ranges",
    "when every ratio and value step lies inside its clip range, the losses are masked means of -ratio * A and (new_values - returns)^2",
    _tppo_inside,
)
def _(fn, ex):
    new, old, adv, nv, ov, ret, m, eps, eps_v = _tppo_args(ex)
    out = fn(new, old, adv, nv, ov, ret, m, eps, eps_v)
    if bad := _two(out):
        return bad
    expected = (_mm(-torch.exp(new - old) * adv, m), _mm((nv - ret) ** 2, m))
    if abs(out[0].item() - expected[0]) > TOL or abs(out[1].item() - expected[1]) > TOL:
        return f"({fmt(out[0])}, {fmt(out[1])}), expected ({expected[0]:.4g}, {expected[1]:.4g})"
    return None


@law(
    "token_ppo_loss",
    "token_weighted_rows",
    "both losses of a batch are the means over its real tokens: each row's loss weighted by its number of real tokens",
    _tppo,
)
def _(fn, ex):
    args = _tppo_args(ex)
    m = ex["mask"]
    out = fn(*args)
    if bad := _two(out):
        return bad
    counts = m.sum(dim=1)
    if counts.sum() == 0:
        return None
    rows = each_row(fn, args, len(m))
    for j, name in enumerate(("policy_loss", "value_loss")):
        expected = sum(c.item() * r[j].item() for c, r in zip(counts, rows)) / counts.sum().item()
        if abs(out[j].item() - expected) > TOL:
            return f"{name} {fmt(out[j])}, but the rows' losses {[round(r[j].item(), 4) for r in rows]} weighted by their real tokens give {expected:.4g}"
    return None


@law(
    "token_ppo_loss",
    "padding_changes_nothing",
    "values under padding, and extra padding columns, change neither loss",
    _tppo,
)
def _(fn, ex):
    args = _tppo_args(ex)
    m, k = ex["mask"], ex["pad"]
    base = fn(*args)
    if bad := _two(base):
        return bad
    padded = [_pad(torch.where(m > 0, a, a + 1.5), k, 0.7) if i < 6 else a for i, a in enumerate(args)]
    padded[6] = _pad(m, k)
    out = fn(*padded)
    if bad := _two(out):
        return bad
    if close(out[0], base[0].detach()) and close(out[1], base[1].detach()):
        return None
    return f"({fmt(out[0])}, {fmt(out[1])}) with other padding, ({fmt(base[0])}, {fmt(base[1])}) before"


@law(
    "token_ppo_loss",
    "shift_invariant",
    "adding the same large negative constant to new and old log-probs (very unlikely tokens: -150 in float32 is -800 in float64) changes neither loss",
    st.fixed_dictionaries({"ex": _tppo, "shift": floats(-900, -760)}),
)
def _(fn, ex):
    args = list(_tppo_args(ex["ex"]))
    base = fn(*args)
    args[0], args[1] = args[0] + ex["shift"], args[1] + ex["shift"]
    out = fn(*args)
    if bad := _two(base) or _two(out):
        return bad
    if close(out[0], base[0].detach(), 1e-5) and close(out[1], base[1].detach(), 1e-5):
        return None
    return f"({fmt(out[0])}, {fmt(out[1])}) after the shift, ({fmt(base[0])}, {fmt(base[1])}) before"


@law(
    "token_ppo_loss",
    "gradcheck",
    "autograd's gradients w.r.t. new_logprobs and new_values equal float64 central differences",
    _tppo.filter(
        lambda ex: (
            away_from(_ratio(ex, "new_logprobs", "old_logprobs"), [1 - ex["clip_range"], 1 + ex["clip_range"]])
            and away_from(ex["new_values"] - ex["old_values"], [-ex["clip_range_value"], ex["clip_range_value"]])
            and away_from(ex["old_values"] - ex["returns"], [0.0])
        )
    ),
    examples=10,
)
def _(fn, ex):
    _, old, adv, _, ov, ret, m, eps, eps_v = _tppo_args(ex)
    return gradcheck(
        lambda new, nv: tuple(fn(new, old, adv, nv, ov, ret, m, eps, eps_v)),
        [ex["new_logprobs"], ex["new_values"]],
        "new_logprobs and new_values",
    )


@law(
    "token_ppo_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _tppo
)
def _(fn, ex):
    return unchanged(fn, _tppo_args(ex))


# --- grpo_clip_loss (§9.2) ----------------------------------------------------------------------------

_gclip = clipped_loss_inputs(_shape, clip_range=floats(0.05, 0.4))


def _gclip_args(ex: dict, **change: object) -> tuple:
    ex = _Override(ex, change)
    return (
        ex["logprobs"],
        ex["old_logprobs"],
        ex["ref_logprobs"],
        ex["advantages"],
        ex["mask"],
        ex["clip_range"],
        ex["beta"],
        ex["loss_type"],
        ex["max_tokens"],
    )


@law(
    "grpo_clip_loss",
    "reference_only_in_kl",
    "with beta = 0 the loss does not depend on ref_logprobs (the ratio is against old_logprobs)",
    _gclip,
)
def _(fn, ex):
    a = fn(*_gclip_args(ex, beta=0.0))
    b = fn(*_gclip_args(ex, beta=0.0, ref_logprobs=ex["ref_logprobs"] - 1.0))
    if bad := _number(a) or _number(b):
        return bad
    return None if close(b, a.detach()) else f"{got(b)} with ref_logprobs - 1, {fmt(a)} before"


@law(
    "grpo_clip_loss",
    "pessimistic",
    "with beta = 0 the loss is at least the loss_type's reduction of -ratio * A and of -clamp(ratio) * A",
    _gclip,
)
def _(fn, ex):
    lp, old, _, adv, m, eps, _, loss_type, max_tokens = _gclip_args(ex)
    out = fn(*_gclip_args(ex, beta=0.0))
    if bad := _number(out):
        return bad
    ratio, a = torch.exp(lp - old), adv[:, None]
    bound = max(
        loss_reduction(-ratio * a, m, loss_type, max_tokens),
        loss_reduction(-ratio.clamp(1 - eps, 1 + eps) * a, m, loss_type, max_tokens),
    ).item()
    return None if out.item() >= bound - TOL else f"{got(out)}, below {bound:.4g}"


@law(
    "grpo_clip_loss",
    "kl_grows_with_beta",
    "a larger beta never lowers the loss, and raises it when logprobs and ref_logprobs differ on a real token",
    st.fixed_dictionaries({"ex": _gclip, "more": floats(0.1, 1.0)}),
)
def _(fn, ex):
    e = ex["ex"]
    a, b = fn(*_gclip_args(e)), fn(*_gclip_args(e, beta=e["beta"] + ex["more"]))
    if bad := _number(a) or _number(b):
        return bad
    differ = bool((((e["logprobs"] - e["ref_logprobs"]).abs() > 0.05) & (e["mask"] > 0)).any())
    if b.item() < a.item() - TOL or (differ and b.item() <= a.item() + 1e-9):
        return f"{fmt(a)} at beta {e['beta']:.4g}, {fmt(b)} at beta {e['beta'] + ex['more']:.4g}"
    return None


@law(
    "grpo_clip_loss",
    "rows_decompose",
    "the loss of a batch is the mean of its rows' losses ('grpo', 'dr_grpo') or their mean weighted by real tokens ('dapo'); row i's advantage belongs to row i",
    _gclip,
)
def _(fn, ex):
    args = _gclip_args(ex)
    m, loss_type = ex["mask"], ex["loss_type"]
    out = fn(*args)
    if bad := _number(out):
        return bad
    rows = [r.item() for r in each_row(fn, args, len(m))]
    weights = m.sum(dim=1).tolist() if loss_type == "dapo" else [1.0] * len(m)
    if sum(weights) == 0:
        return None
    expected = sum(w * r for w, r in zip(weights, rows)) / sum(weights)
    return (
        None
        if abs(out.item() - expected) <= TOL
        else f"{got(out)}, but its rows alone give {[round(r, 4) for r in rows]}"
    )


@law(
    "grpo_clip_loss",
    "padding_changes_nothing",
    "values under padding, and extra padding columns, change nothing",
    _gclip,
)
def _(fn, ex):
    return other_padding(fn, ex, lambda **change: _gclip_args(ex, **change))


@law(
    "grpo_clip_loss",
    "shift_invariant",
    "adding the same large negative constant to logprobs, old_logprobs and ref_logprobs (very unlikely tokens: -150 in float32 is -800 in float64) changes nothing",
    st.fixed_dictionaries({"ex": _gclip, "shift": floats(-900, -760)}),
)
def _(fn, ex):
    e, shift = ex["ex"], ex["shift"]
    base = fn(*_gclip_args(e))
    names = ("logprobs", "old_logprobs", "ref_logprobs")
    out = fn(*_gclip_args(e, **{name: e[name] + shift for name in names}))
    if bad := _number(base) or _number(out):
        return bad
    return None if close(out, base.detach(), 1e-5) else f"{got(out)} after the shift, {fmt(base)} before"


@law(
    "grpo_clip_loss",
    "unknown_loss_type_raises",
    "a loss_type other than 'grpo', 'dapo' or 'dr_grpo' raises ValueError",
    st.fixed_dictionaries({"ex": _gclip, "loss_type": st.sampled_from(["bnpo", "GRPO", "mean", ""])}),
    examples=8,
)
def _(fn, ex):
    return raises_value_error(lambda: fn(*_gclip_args(ex["ex"], loss_type=ex["loss_type"])))


@law(
    "grpo_clip_loss",
    "gradcheck",
    "autograd's gradient w.r.t. logprobs equals float64 central differences (all-masked rows included)",
    _gclip.filter(
        lambda ex: away_from(_ratio(ex, "logprobs", "old_logprobs"), [1 - ex["clip_range"], 1 + ex["clip_range"]])
    ),
    examples=10,
)
def _(fn, ex):
    _, old, ref, adv, m, eps, beta, loss_type, max_tokens = _gclip_args(ex)
    return gradcheck(
        lambda lp: fn(lp, old, ref, adv, m, eps, beta, loss_type, max_tokens), [ex["logprobs"]], "logprobs"
    )


@law(
    "grpo_clip_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _gclip
)
def _(fn, ex):
    return unchanged(fn, _gclip_args(ex))
