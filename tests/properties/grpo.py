"""Property laws of rlhf_practice/rl/grpo.py: compute_group_advantages (§3.2) and grpo_loss (§3.3), tasks 3-4."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from properties import NO_GRADIENT, TIE_TOL, close, fmt, got, law
from properties.draws import TIE_VALUES, floats, gradcheck, tensor, unchanged

NO_GRADIENT["compute_group_advantages"] = "advantages are constants of the loss"

# --- compute_group_advantages (§3.2) ------------------------------------------------------------------

_groups = st.tuples(st.integers(1, 3), st.integers(2, 4)).flatmap(
    lambda bk: st.fixed_dictionaries(
        {"rewards": tensor((bk[0] * bk[1],)), "group_size": st.just(bk[1]), "normalize": st.booleans()}
    )
)


def _spread(ex: dict) -> bool:
    return bool((ex["rewards"].view(-1, ex["group_size"]).std(dim=1) > 0.1).all())


@law(
    "compute_group_advantages",
    "groups_sum_to_zero",
    "the advantages of each group sum to 0 (one advantage per reply, same shape as rewards)",
    _groups,
)
def _(fn, ex):
    a = fn(ex["rewards"], ex["group_size"], ex["normalize"])
    if not isinstance(a, torch.Tensor) or a.shape != ex["rewards"].shape:
        return got(a)
    sums = a.view(-1, ex["group_size"]).sum(dim=1)
    return None if close(sums, torch.zeros_like(sums), 1e-5) else f"{got(a)}: group sums {fmt(sums)}"


@law(
    "compute_group_advantages",
    "shuffle_within_group",
    "shuffling the replies inside a group shuffles their advantages the same way",
    _groups.flatmap(lambda ex: st.permutations(range(ex["group_size"])).map(lambda p: {**ex, "order": p})),
)
def _(fn, ex):
    k, n = ex["group_size"], len(ex["rewards"])
    p = [g + i for g in range(0, n, k) for i in ex["order"]]
    a, b = fn(ex["rewards"], k, ex["normalize"]), fn(ex["rewards"][p], k, ex["normalize"])
    return None if close(b, a[p].detach()) else f"{got(b)} after shuffling, {fmt(a)} before"


@law(
    "compute_group_advantages",
    "normalized_per_group",
    "with normalize=True each group's advantages have std 1 (the group's own unbiased std) and keep the order of its rewards",
    _groups.filter(_spread).map(lambda ex: {**ex, "normalize": True}),
)
def _(fn, ex):
    k = ex["group_size"]
    a = fn(ex["rewards"], k, True)
    if not isinstance(a, torch.Tensor) or a.shape != ex["rewards"].shape:
        return got(a)
    a_g, r_g = a.view(-1, k), ex["rewards"].view(-1, k)
    std = a_g.std(dim=1)
    ordered = all(
        bool(a_g[g, i] > a_g[g, j])
        for g in range(len(r_g))
        for i in range(k)
        for j in range(k)
        if r_g[g, i] > r_g[g, j] + 1e-6
    )
    return None if close(std, torch.ones_like(std), 1e-5) and ordered else f"{got(a)} (group stds {fmt(std)})"


@law(
    "compute_group_advantages",
    "centred_scales",
    "with normalize=False, scaling every reward by c scales the advantages by c, and a larger reward gets a larger advantage within its group",
    st.fixed_dictionaries(
        {"ex": _groups.filter(_spread).map(lambda ex: {**ex, "normalize": False}), "c": floats(0.5, 3.0)}
    ),
)
def _(fn, ex):
    r, k, c = ex["ex"]["rewards"], ex["ex"]["group_size"], ex["c"]
    a, b = fn(r, k, False), fn(c * r, k, False)
    if not close(b, c * a.detach()):
        return f"{got(b)} for rewards x {c:.4g}, {fmt(a)} for the rewards"
    a_g, r_g = a.view(-1, k), r.view(-1, k)
    for g in range(len(r_g)):
        for i in range(k):
            for j in range(k):
                if r_g[g, i] > r_g[g, j] + 1e-6 and not a_g[g, i] > a_g[g, j]:
                    return f"{got(a)}: a larger reward got a smaller advantage"
    return None


@law(
    "compute_group_advantages",
    "equal_group_gives_zeros",
    "a group whose rewards are all equal gets advantages 0 (to within 0.01), not NaN, whatever the value, in float32 "
    "too, alone or beside other groups",
    st.fixed_dictionaries({"value": TIE_VALUES, "others": tensor((2, 8)), "where": st.integers(0, 2)}),
)
def _(fn, ex):
    for dtype in (torch.float32, torch.float64):
        for k in (3, 6, 8):
            for beside in (False, True):
                groups = [ex["others"][0, :k], ex["others"][1, :k]] if beside else []
                g = min(ex["where"], len(groups))
                groups.insert(g, torch.full((k,), ex["value"], dtype=torch.float64))
                r = torch.cat(groups).to(dtype)
                for normalize in (True, False):
                    a = fn(r, k, normalize)
                    if not isinstance(a, torch.Tensor) or a.shape != r.shape or not torch.isfinite(a).all():
                        return f"groups of {k} in {dtype}, normalize={normalize}: {got(a)}"
                    if not close(a[g * k : (g + 1) * k], torch.zeros(k, dtype=dtype), TIE_TOL):
                        return f"group {g} tied, groups of {k} in {dtype}, normalize={normalize}: {got(a)}"
    return None


@law(
    "compute_group_advantages",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    _groups,
)
def _(fn, ex):
    return unchanged(fn, (ex["rewards"], ex["group_size"], ex["normalize"]))


# --- grpo_loss (§3.3) ---------------------------------------------------------------------------------

_grpo = st.integers(1, 6).flatmap(
    lambda n: st.fixed_dictionaries({"logprobs": tensor((n,), -8, 0), "advantages": tensor((n,))})
)


@law("grpo_loss", "gradient", "the loss is one number whose gradient w.r.t. logprobs is -A / N", _grpo)
def _(fn, ex):
    lp = ex["logprobs"].clone().requires_grad_(True)
    loss = fn(lp, ex["advantages"])
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        return f"{got(loss)}, expected one number"
    if not loss.requires_grad:
        return "the loss carries no gradient to logprobs"
    (grad,) = torch.autograd.grad(loss, lp)
    expected = -ex["advantages"] / len(lp)
    return None if close(grad, expected) else f"gradient {fmt(grad)}, expected {fmt(expected)}"


@law(
    "grpo_loss",
    "zero_sum_shift",
    "with advantages that sum to 0 (as group advantages do), adding a constant to every log-prob changes nothing",
    st.fixed_dictionaries({"ex": _grpo, "shift": floats(-5, 5)}),
)
def _(fn, ex):
    lp, adv = ex["ex"]["logprobs"], ex["ex"]["advantages"]
    adv = adv - adv.mean()
    a, b = fn(lp, adv), fn(lp + ex["shift"], adv)
    return None if close(b, a.detach(), 1e-5) else f"{got(b)} after the shift, {fmt(a)} before"


@law("grpo_loss", "odd_in_advantages", "negating every advantage negates the loss", _grpo)
def _(fn, ex):
    a, b = fn(ex["logprobs"], ex["advantages"]), fn(ex["logprobs"], -ex["advantages"])
    return None if close(b, -a.detach()) else f"{got(b)} for -A, {fmt(a)} for A"


@law(
    "grpo_loss",
    "no_gradient_to_advantages",
    "no gradient reaches advantages (they are constants of the update)",
    _grpo,
)
def _(fn, ex):
    adv = ex["advantages"].clone().requires_grad_(True)
    loss = fn(ex["logprobs"].clone().requires_grad_(True), adv)
    if not loss.requires_grad:
        return None
    (grad,) = torch.autograd.grad(loss.sum(), adv, allow_unused=True)
    return None if grad is None or not grad.abs().sum() > 0 else f"a gradient {fmt(grad)} reached advantages"


@law(
    "grpo_loss",
    "batch_order",
    "the loss does not depend on the order of the batch",
    _grpo.flatmap(lambda ex: st.permutations(range(len(ex["logprobs"]))).map(lambda p: {**ex, "order": p})),
)
def _(fn, ex):
    p = list(ex["order"])
    a, b = fn(ex["logprobs"], ex["advantages"]), fn(ex["logprobs"][p], ex["advantages"][p])
    return None if close(b, a.detach()) else f"{got(b)} after reordering, {fmt(a)} before"


@law("grpo_loss", "gradcheck", "autograd's gradient w.r.t. logprobs equals float64 central differences", _grpo, 10)
def _(fn, ex):
    adv = ex["advantages"]
    return gradcheck(lambda lp: fn(lp, adv), [ex["logprobs"]], "logprobs")


@law("grpo_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _grpo)
def _(fn, ex):
    return unchanged(fn, (ex["logprobs"], ex["advantages"]))
