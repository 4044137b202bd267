"""Property laws of rlhf_practice/rl/ppo.py: compute_advantages (§1.2) and ppo_clip_loss (§2.2), tasks 1-2."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from properties import NO_GRADIENT, TIE_TOL, TOL, close, fmt, got, law
from properties.draws import TIE_VALUES, _olds, _ratio, away_from, floats, gradcheck, tensor, unchanged

NO_GRADIENT["compute_advantages"] = "advantages are constants of the loss; the law: no gradient reaches values"

# --- compute_advantages (§1.2) -------------------------------------------------------------------------

_pair = st.integers(2, 6).flatmap(lambda n: st.fixed_dictionaries({"rewards": tensor((n,)), "values": tensor((n,))}))


@law("compute_advantages", "no_normalize", "with normalize=False the advantages are rewards - values", _pair)
def _(fn, ex):
    a = fn(ex["rewards"], ex["values"], False)
    return None if close(a, ex["rewards"] - ex["values"]) else got(a)


@law(
    "compute_advantages",
    "normalized",
    "with normalize=True the advantages have mean 0 and std 1 (unbiased) and keep the order of rewards - values",
    _pair.filter(lambda ex: (ex["rewards"] - ex["values"]).std() > 0.1),
)
def _(fn, ex):
    d = ex["rewards"] - ex["values"]
    a = fn(ex["rewards"], ex["values"], True)
    if not isinstance(a, torch.Tensor) or a.shape != d.shape:
        return got(a)
    ordered = all(bool(a[i] > a[j]) for i in range(len(d)) for j in range(len(d)) if d[i] > d[j] + 1e-6)
    if abs(a.mean().item()) > TOL or abs(a.std().item() - 1) > 1e-5 or not ordered:
        return f"got {fmt(a)} (mean {a.mean().item():.4g}, std {a.std().item():.4g})"
    return None


@law(
    "compute_advantages",
    "equal_gives_zeros",
    "when every reply has the same rewards - values, the normalized advantages are 0 (to within 0.01), not NaN, "
    "in float32 too",
    st.fixed_dictionaries({"reward": TIE_VALUES, "value": st.just(0.0) | floats()}),
)
def _(fn, ex):
    for dtype in (torch.float32, torch.float64):
        for n in (2, 3, 6, 8, 64):
            r, v = torch.full((n,), ex["reward"], dtype=dtype), torch.full((n,), ex["value"], dtype=dtype)
            a = fn(r, v, True)
            if not close(a, torch.zeros(n, dtype=dtype), TIE_TOL):
                return f"{n} replies in {dtype}: {got(a)}"
    return None


@law(
    "compute_advantages",
    "identical_rows_not_a_tie",
    "rows that are all alike but whose elements differ are not a tie: normalized over all elements as any input",
    st.fixed_dictionaries({"row": tensor((3,)), "rows": st.integers(2, 4)}).filter(
        lambda ex: float(ex["row"].max() - ex["row"].min()) > 0.1
    ),
)
def _(fn, ex):
    rewards = ex["row"].repeat(ex["rows"], 1)
    a = fn(rewards, torch.zeros_like(rewards), True)
    expected = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
    return None if close(a, expected) else f"{got(a)}, expected {fmt(expected)}"


@law(
    "compute_advantages",
    "no_gradient_to_values",
    "no gradient reaches values (they come from the value head with gradient)",
    st.fixed_dictionaries({"ex": _pair, "normalize": st.booleans()}),
)
def _(fn, ex):
    r, v = ex["ex"]["rewards"], ex["ex"]["values"].clone().requires_grad_(True)
    a = fn(r, v, ex["normalize"])
    if not a.requires_grad:
        return None
    (grad,) = torch.autograd.grad((a * torch.arange(1.0, len(a) + 1, dtype=a.dtype)).sum(), v, allow_unused=True)
    return None if grad is None or not grad.abs().sum() > 0 else f"a gradient {fmt(grad)} reached values"


@law(
    "compute_advantages",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    st.fixed_dictionaries({"ex": _pair, "normalize": st.booleans()}),
)
def _(fn, ex):
    return unchanged(fn, (ex["ex"]["rewards"], ex["ex"]["values"], ex["normalize"]))


# --- ppo_clip_loss (§2.2) -----------------------------------------------------------------------------


def _ppo_inputs(spread: float, inside: bool = False) -> st.SearchStrategy:
    return (
        st.integers(1, 5)
        .flatmap(
            lambda n: st.fixed_dictionaries(
                {
                    "new_logprobs": tensor((n,), -5, 0),
                    "log_ratio": tensor((n,), -spread, spread),
                    "advantages": tensor((n,)),
                    "clip_range": floats(0.05, 0.5),
                }
            )
        )
        .map(_olds("new_logprobs", "old_logprobs", inside))
    )


def _ppo_args(ex: dict) -> tuple:
    return ex["new_logprobs"], ex["old_logprobs"], ex["advantages"], ex["clip_range"]


@law(
    "ppo_clip_loss",
    "inside_clip_is_unclipped",
    "when every ratio lies inside [1 - clip_range, 1 + clip_range] the loss is the unclipped -mean(ratio * A), one number",
    _ppo_inputs(1.0, inside=True),
)
def _(fn, ex):
    new, old, adv, eps = _ppo_args(ex)
    loss = fn(new, old, adv, eps)
    expected = -(torch.exp(new - old) * ex["advantages"]).mean()
    return None if close(loss, expected) else f"{got(loss)}, expected {fmt(expected)}"


@law(
    "ppo_clip_loss",
    "pessimistic",
    "the loss is at least both -mean(ratio * A) and -mean(clamp(ratio, 1 - clip_range, 1 + clip_range) * A) (min of the two terms)",
    _ppo_inputs(1.0),
)
def _(fn, ex):
    new, old, adv, eps = _ppo_args(ex)
    loss = fn(new, old, adv, eps)
    ratio = torch.exp(new - old)
    bound = max(-(ratio * adv).mean().item(), -(ratio.clamp(1 - eps, 1 + eps) * adv).mean().item())
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0 or loss.item() < bound - TOL:
        return f"{got(loss)}, below {bound:.4g}"
    return None


@law(
    "ppo_clip_loss",
    "shift_invariant",
    "adding the same large negative constant to new and old log-probs (sums over a reply: -300 in float32 is -800 in float64) changes nothing",
    st.fixed_dictionaries({"ex": _ppo_inputs(1.0), "shift": floats(-900, -760)}),
)
def _(fn, ex):
    new, old, adv, eps = _ppo_args(ex["ex"])
    base, shifted = fn(new, old, adv, eps), fn(new + ex["shift"], old + ex["shift"], adv, eps)
    return None if close(shifted, base.detach(), 1e-5) else f"{got(shifted)} instead of {fmt(base)}"


@law(
    "ppo_clip_loss",
    "batch_order",
    "the loss does not depend on the order of the batch",
    _ppo_inputs(1.0).flatmap(
        lambda ex: st.permutations(range(len(ex["advantages"]))).map(lambda p: {**ex, "order": p})
    ),
)
def _(fn, ex):
    new, old, adv, eps = _ppo_args(ex)
    p = list(ex["order"])
    a, b = fn(new, old, adv, eps), fn(new[p], old[p], adv[p], eps)
    return None if close(b, a.detach()) else f"{got(b)} after reordering, {fmt(a)} before"


@law(
    "ppo_clip_loss",
    "gradient_at_ratio_one",
    "at new_logprobs == old_logprobs the gradient w.r.t. new_logprobs is -A / N",
    _ppo_inputs(0.0),
)
def _(fn, ex):
    new = ex["new_logprobs"].clone().requires_grad_(True)
    loss = fn(new, ex["new_logprobs"].clone(), ex["advantages"], ex["clip_range"])
    if not loss.requires_grad:
        return "the loss carries no gradient to new_logprobs"
    (grad,) = torch.autograd.grad(loss, new)
    expected = -ex["advantages"] / len(new)
    return None if close(grad, expected) else f"gradient {fmt(grad)}, expected {fmt(expected)}"


@law(
    "ppo_clip_loss",
    "gradcheck",
    "autograd's gradient w.r.t. new_logprobs equals float64 central differences",
    _ppo_inputs(1.0).filter(
        lambda ex: away_from(_ratio(ex, "new_logprobs", "old_logprobs"), [1 - ex["clip_range"], 1 + ex["clip_range"]])
    ),
    examples=10,
)
def _(fn, ex):
    _, old, adv, eps = _ppo_args(ex)
    return gradcheck(lambda new: fn(new, old, adv, eps), [ex["new_logprobs"]], "new_logprobs")


@law(
    "ppo_clip_loss",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    _ppo_inputs(1.0),
)
def _(fn, ex):
    return unchanged(fn, _ppo_args(ex))
