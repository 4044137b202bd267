"""Property laws of rlhf_practice/rl/lecture.py: the two sort rewards, compute_deltas, compute_loss and compute_kl_penalty (§10), task 10."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from hypothesis import strategies as st

from properties import NO_GRADIENT, TIE_TOL, TOL, close, fmt, got, law
from properties.draws import (
    TIE_VALUES,
    _number,
    _olds,
    _ratio,
    away_from,
    floats,
    gradcheck,
    raises_value_error,
    tensor,
    unchanged,
)

NO_GRADIENT["compute_deltas"] = "deltas are constants of the loss"
NO_GRADIENT["sort_distance_reward"] = "returns a Python number"
NO_GRADIENT["sort_inclusion_ordering_reward"] = "returns a Python number"

# --- the two sort rewards (§10.1): Python numbers, no gradient -----------------------------------------

_sort = (
    st.integers(1, 6)
    .flatmap(
        lambda n: st.fixed_dictionaries(
            {
                "prompt": st.lists(st.integers(0, 5), min_size=n, max_size=n),
                "response": st.lists(st.integers(0, 5), min_size=n, max_size=n),
            }
        )
    )
    .flatmap(lambda ex: st.permutations(range(len(ex["prompt"]))).map(lambda p: {**ex, "order": p}))
)


def _number_in(out: object, hi: int) -> str | None:
    if not isinstance(out, int | float) or isinstance(out, bool):
        return f"returned {type(out).__name__}, expected a Python number (a float; an int is fine too)"
    return None if 0 <= out <= hi else f"returned {out:g}, outside [0, {hi}]"


def _sort_laws_of_both(function: str, most: Callable[[int], int]) -> None:
    """The laws both sort rewards obey; ``most(n)`` is the reward's largest value for n numbers."""

    @law(
        function,
        "prompt_order_irrelevant",
        "reordering the prompt changes nothing (only its sorted version matters)",
        _sort,
    )
    def _(fn, ex):
        prompt, response = ex["prompt"], ex["response"]
        a, b = fn(list(prompt), list(response)), fn([prompt[i] for i in ex["order"]], list(response))
        return None if a == b else f"{b!r} for the reordered prompt, {a!r} before"

    @law(
        function,
        "inputs_unchanged",
        "prompt and response stay unchanged (as lists and as tensors), and the result is a Python number",
        _sort,
    )
    def _(fn, ex):
        prompt, response = list(ex["prompt"]), list(ex["response"])
        if bad := unchanged(fn, (prompt, response)):
            return bad
        out = fn(torch.tensor(ex["prompt"]), torch.tensor(ex["response"]))
        return _number_in(out, most(len(prompt)))


@law(
    "sort_distance_reward",
    "sorted_prompt_scores_n",
    "the sorted prompt scores n, whatever the prompt's order, and any other response scores less (a number in [0, n])",
    _sort,
)
def _(fn, ex):
    prompt, response = ex["prompt"], ex["response"]
    n, target = len(prompt), sorted(prompt)
    best = fn(list(prompt), list(target))
    if best != float(n):
        return f"sorted(prompt) scored {best!r}, expected {float(n)}"
    out = fn(list(prompt), list(response))
    if bad := _number_in(out, n):
        return bad
    return None if response == target or out < n else f"{response} scored {out:g}, the maximum"


@law(
    "sort_distance_reward",
    "position_by_position",
    "the right numbers in another order score only the positions where they match sorted(prompt)",
    _sort,
)
def _(fn, ex):
    target = sorted(ex["prompt"])
    shuffled = [target[i] for i in ex["order"]]
    expected = float(sum(x == y for x, y in zip(shuffled, target)))
    out = fn(list(ex["prompt"]), shuffled)
    return None if out == expected else f"response {shuffled} scored {out!r}, expected {expected:g}"


_sort_laws_of_both("sort_distance_reward", lambda n: n)


@law(
    "sort_inclusion_ordering_reward",
    "sorted_prompt_scores_max",
    "the sorted prompt scores 2n - 1, whatever the prompt's order (every reward a number in [0, 2n - 1])",
    _sort,
)
def _(fn, ex):
    prompt, n = ex["prompt"], len(ex["prompt"])
    best = fn(list(prompt), sorted(prompt))
    if best != float(2 * n - 1):
        return f"sorted(prompt) scored {best!r}, expected {float(2 * n - 1)}"
    return _number_in(fn(list(prompt), list(ex["response"])), 2 * n - 1)


@law(
    "sort_inclusion_ordering_reward",
    "sorted_response",
    "a sorted response (ties allowed) scores n - 1 for ordering plus one for every prompt entry it contains (duplicates each count)",
    _sort,
)
def _(fn, ex):
    prompt, response = ex["prompt"], sorted(ex["response"])
    n = len(prompt)
    expected = float(n - 1 + sum(x in response for x in prompt))
    out = fn(list(prompt), response)
    return None if out == expected else f"{response} scored {out!r}, expected {expected}"


_sort_laws_of_both("sort_inclusion_ordering_reward", lambda n: 2 * n - 1)


# --- compute_deltas (§10.2) ---------------------------------------------------------------------------

MODES = ["rewards", "centered_rewards", "normalized_rewards", "max_rewards"]
_reward = st.one_of(st.sampled_from([0.0, 0.5, 1.0]), floats())  # ties are common in rewards
_deltas = st.tuples(st.integers(1, 3), st.integers(2, 4)).flatmap(
    lambda s: st.fixed_dictionaries(
        {
            "rewards": st.lists(_reward, min_size=s[0] * s[1], max_size=s[0] * s[1]).map(
                lambda xs: torch.tensor(xs, dtype=torch.float64).view(s)
            ),
            "mode": st.sampled_from(MODES),
            "shift": floats(),
            "scale": floats(0.5, 3.0),
        }
    )
)


@law(
    "compute_deltas",
    "rows_independent",
    "each row (prompt) gets the same deltas alone as in the batch, in every mode",
    _deltas,
)
def _(fn, ex):
    r, mode = ex["rewards"], ex["mode"]
    out = fn(r, mode)
    if not isinstance(out, torch.Tensor) or out.shape != r.shape:
        return got(out)
    for i in range(len(r)):
        alone = fn(r[i : i + 1].clone(), mode)
        if not close(alone, out[i : i + 1].detach()):
            return f"{mode}: row {i} alone gets {fmt(alone)}, in the batch {fmt(out[i])}"
    return None


@law(
    "compute_deltas",
    "centred_modes",
    "centered and normalized rows sum to 0; a normalized row of unequal rewards has std 1 (up to the 1e-5); rewards comes back as is",
    _deltas,
)
def _(fn, ex):
    r = ex["rewards"]
    same = fn(r, "rewards")
    if not close(same, r):
        return f"rewards: {got(same)}"
    for mode in ("centered_rewards", "normalized_rewards"):
        out = fn(r, mode)
        if not isinstance(out, torch.Tensor) or out.shape != r.shape:
            return f"{mode}: {got(out)}"
        if not close(out.sum(dim=1), torch.zeros(len(r), dtype=r.dtype), 1e-5):
            return f"{mode}: {got(out)}, whose rows do not sum to 0"
    out = fn(r, "normalized_rewards")
    for i in range(len(r)):
        std = r[i].std().item()
        if std > 0.1 and abs(out[i].std().item() - std / (std + 1e-5)) > 1e-5:
            return f"normalized_rewards: {got(out)}, row {i} has std {out[i].std().item():.4g}"
    return None


@law(
    "compute_deltas",
    "centered_shift_and_scale",
    "centered_rewards: adding c to every reward changes nothing, multiplying them by c multiplies the deltas by c",
    _deltas,
)
def _(fn, ex):
    r, c, s = ex["rewards"], ex["shift"], ex["scale"]
    base = fn(r, "centered_rewards")
    shifted, scaled = fn(r + c, "centered_rewards"), fn(r * s, "centered_rewards")
    if not close(shifted, base.detach(), 1e-5):
        return f"{got(shifted)} for rewards + {c:.4g}, {fmt(base)} before"
    return (
        None if close(scaled, s * base.detach(), 1e-5) else f"{got(scaled)} for rewards x {s:.4g}, {fmt(base)} before"
    )


@law(
    "compute_deltas",
    "max_keeps_the_maxima",
    "max_rewards: every reply that reaches its row's maximum keeps its reward, every other reply gets 0",
    _deltas,
)
def _(fn, ex):
    r = ex["rewards"]
    out = fn(r, "max_rewards")
    best = r.max(dim=1, keepdim=True).values
    expected = torch.where(r == best, r, torch.zeros_like(r))
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law(
    "compute_deltas",
    "equal_row_gives_zeros",
    "a row of equal rewards gives deltas 0 (to within 0.01), not NaN, in the centered and normalized modes, whatever "
    "the value, in float32 too",
    st.fixed_dictionaries({"value": TIE_VALUES}),
)
def _(fn, ex):
    for dtype in (torch.float32, torch.float64):
        for trials in (3, 6, 8):
            r = torch.full((1, trials), ex["value"], dtype=dtype)
            for mode in MODES[1:3]:
                out = fn(r, mode)
                if not close(out, torch.zeros_like(r), TIE_TOL):
                    return f"{mode}, {trials} trials in {dtype}: {got(out)}"
    return None


@law(
    "compute_deltas",
    "unknown_mode_raises",
    "a mode other than the four raises ValueError",
    st.fixed_dictionaries({"ex": _deltas, "mode": st.sampled_from(["centered", "max", "normalized", ""])}),
    examples=8,
)
def _(fn, ex):
    return raises_value_error(lambda: fn(ex["ex"]["rewards"], ex["mode"]))


@law(
    "compute_deltas",
    "inputs_unchanged",
    "the rewards stay unchanged and a float64 input gives a float64 result",
    _deltas,
)
def _(fn, ex):
    return unchanged(fn, (ex["rewards"], ex["mode"]))


# --- compute_loss (§10.3) -----------------------------------------------------------------------------

LOSS_MODES = ["naive", "unclipped", "clipped"]
_loss = (
    st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3))
    .flatmap(
        lambda s: st.fixed_dictionaries(
            {
                "log_probs": tensor(s, -4, 0),
                "log_ratio": tensor(s, -0.5, 0.5),
                "deltas": tensor(s[:2]),
                "mode": st.sampled_from(LOSS_MODES),
                "clip_range": floats(0.02, 0.3),
                "ratio": floats(0.5, 1.5),
                "shift": floats(-900, -760),
                "order": st.permutations(range(s[1])),
            }
        )
    )
    .map(_olds("log_probs", "old_log_probs"))
)


def _loss_args(ex: dict) -> tuple:
    return ex["log_probs"], ex["deltas"], ex["mode"], ex["old_log_probs"], ex["clip_range"]


@law(
    "compute_loss",
    "on_policy_gradient",
    "on-policy (old_log_probs=None) every mode's gradient w.r.t. log_probs is -delta / (batch * trial * pos) at each position",
    _loss,
)
def _(fn, ex):
    lp = ex["log_probs"].clone().requires_grad_(True)
    loss = fn(lp, ex["deltas"], ex["mode"])
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        return f"{ex['mode']}: {got(loss)}, expected one number"
    if not loss.requires_grad:
        return f"{ex['mode']}: the loss carries no gradient to log_probs"
    (grad,) = torch.autograd.grad(loss, lp)
    expected = (-ex["deltas"][..., None] / lp.numel()).expand_as(lp)
    return None if close(grad, expected) else f"{ex['mode']}: gradient {fmt(grad)}, expected {fmt(expected)}"


@law(
    "compute_loss",
    "constant_ratio",
    "when every ratio exp(log_probs - old_log_probs) equals r, unclipped is -r * mean(delta) and clipped -mean(min(r * delta, clamp(r) * delta))",
    _loss,
)
def _(fn, ex):
    lp, deltas, r, eps = ex["log_probs"], ex["deltas"], ex["ratio"], ex["clip_range"]
    old = lp - math.log(r)
    for mode in ("unclipped", "clipped"):
        out = fn(lp, deltas, mode, old, eps)
        rc = min(max(r, 1 - eps), 1 + eps)
        expected = (
            -r * deltas.mean().item() if mode == "unclipped" else -torch.minimum(r * deltas, rc * deltas).mean().item()
        )
        if _number(out) or abs(out.item() - expected) > TOL:
            return f"{mode}: {got(out)}, expected {expected:.4g}"
    return None


@law(
    "compute_loss",
    "clipped_not_below_unclipped",
    "the clipped loss is never below the unclipped loss for the same inputs",
    _loss,
)
def _(fn, ex):
    lp, deltas, _, old, eps = _loss_args(ex)
    clipped, unclipped = fn(lp, deltas, "clipped", old, eps), fn(lp, deltas, "unclipped", old, eps)
    if bad := _number(clipped) or _number(unclipped):
        return bad
    return None if clipped.item() >= unclipped.item() - TOL else f"clipped {fmt(clipped)} < unclipped {fmt(unclipped)}"


@law(
    "compute_loss",
    "shift_invariant",
    "unclipped and clipped: adding the same large negative constant (-300 in float32 is -800 in float64) to log_probs and old_log_probs changes nothing",
    _loss,
)
def _(fn, ex):
    lp, deltas, mode, old, eps = _loss_args(ex)
    mode = "clipped" if mode == "naive" else mode
    a, b = fn(lp, deltas, mode, old, eps), fn(lp + ex["shift"], deltas, mode, old + ex["shift"], eps)
    return None if close(b, a.detach(), 1e-5) else f"{mode}: {got(b)} after the shift, {fmt(a)} before"


@law(
    "compute_loss",
    "mean_over_entries",
    "the loss is a mean over every [batch, trial, pos] entry: repeating each reply's positions, or the whole batch, changes nothing",
    _loss,
)
def _(fn, ex):
    lp, deltas, mode, old, eps = _loss_args(ex)
    base = fn(lp, deltas, mode, old, eps)
    longer = fn(torch.cat([lp, lp], -1), deltas, mode, torch.cat([old, old], -1), eps)
    bigger = fn(torch.cat([lp, lp]), torch.cat([deltas, deltas]), mode, torch.cat([old, old]), eps)
    if not close(longer, base.detach()):
        return f"{mode}: {got(longer)} with every position twice, {fmt(base)} before"
    return None if close(bigger, base.detach()) else f"{mode}: {got(bigger)} with the batch twice, {fmt(base)} before"


@law(
    "compute_loss",
    "trial_order",
    "reordering the trials (replies) of log_probs, old_log_probs and deltas together changes nothing",
    _loss,
)
def _(fn, ex):
    lp, deltas, mode, old, eps = _loss_args(ex)
    p = list(ex["order"])
    a, b = fn(lp, deltas, mode, old, eps), fn(lp[:, p], deltas[:, p], mode, old[:, p], eps)
    return None if close(b, a.detach()) else f"{mode}: {got(b)} after reordering, {fmt(a)} before"


@law(
    "compute_loss",
    "default_clip_range",
    "clip_range defaults to the lecture's 0.01: leaving it out is the same as clip_range=0.01",
    _loss,
)
def _(fn, ex):
    lp, deltas, _, old, _ = _loss_args(ex)
    a, b = fn(lp, deltas, "clipped", old), fn(lp, deltas, "clipped", old, 0.01)
    if bad := _number(a) or _number(b):
        return bad
    return None if close(a, b.detach()) else f"{got(a)} without clip_range, {fmt(b)} with clip_range=0.01"


@law(
    "compute_loss",
    "unknown_mode_raises",
    "a mode other than 'naive', 'unclipped' or 'clipped' raises ValueError",
    st.fixed_dictionaries({"ex": _loss, "mode": st.sampled_from(["clip", "Naive", "ppo", ""])}),
    examples=8,
)
def _(fn, ex):
    lp, deltas, _, old, eps = _loss_args(ex["ex"])
    return raises_value_error(lambda: fn(lp, deltas, ex["mode"], old, eps))


@law(
    "compute_loss",
    "gradcheck",
    "autograd's gradient w.r.t. log_probs equals float64 central differences, in every mode",
    _loss.filter(
        lambda ex: away_from(_ratio(ex, "log_probs", "old_log_probs"), [1 - ex["clip_range"], 1 + ex["clip_range"]])
    ),
    examples=10,
)
def _(fn, ex):
    _, deltas, mode, old, eps = _loss_args(ex)
    return gradcheck(lambda lp: fn(lp, deltas, mode, old, eps), [ex["log_probs"]], "log_probs")


@law("compute_loss", "inputs_unchanged", "the inputs stay unchanged and a float64 input gives a float64 result", _loss)
def _(fn, ex):
    return unchanged(fn, _loss_args(ex))


# --- compute_kl_penalty (§10.4) -----------------------------------------------------------------------

_penalty = st.lists(st.integers(1, 3), min_size=1, max_size=2).flatmap(
    lambda dims: st.fixed_dictionaries(
        {"log_probs": tensor((*dims, 3), -4, 0), "ref_log_probs": tensor((*dims, 3), -4, 0)}
    )
)


@law(
    "compute_kl_penalty",
    "nonnegative",
    "the penalty is one number >= 0, 0 when log_probs == ref_log_probs and > 0 when they differ",
    _penalty,
)
def _(fn, ex):
    lp, ref = ex["log_probs"], ex["ref_log_probs"]
    out, same = fn(lp, ref), fn(lp, lp.clone())
    if bad := _number(out) or _number(same):
        return bad
    differ = bool(((lp - ref).abs() > 1e-3).any())
    if out.item() < -TOL or abs(same.item()) > TOL or (differ and out.item() <= 0):
        return f"{got(out)} (and {fmt(same)} for ref_log_probs = log_probs)"
    return None


@law(
    "compute_kl_penalty",
    "sum_over_positions",
    "summed over a reply's positions, averaged over the rest: repeating the positions doubles it, repeating the batch changes nothing",
    _penalty,
)
def _(fn, ex):
    lp, ref = ex["log_probs"], ex["ref_log_probs"]
    base = fn(lp, ref)
    longer, bigger = (
        fn(torch.cat([lp, lp], -1), torch.cat([ref, ref], -1)),
        fn(torch.cat([lp, lp]), torch.cat([ref, ref])),
    )
    if not close(longer, 2 * base.detach()):
        return f"{got(longer)} with every position twice, {fmt(base)} before"
    return None if close(bigger, base.detach()) else f"{got(bigger)} with the batch twice, {fmt(base)} before"


@law(
    "compute_kl_penalty",
    "below_reference_costs_more",
    "falling below the reference costs more than rising above it: the penalty of log_probs = ref - d exceeds that of ref + d (d > 0)",
    st.fixed_dictionaries({"ref": floats(-4, 0), "d": floats(0.01, 2.0)}),
)
def _(fn, ex):
    ref = torch.tensor([[ex["ref"]]], dtype=torch.float64)
    below, above = fn(ref - ex["d"], ref.clone()), fn(ref + ex["d"], ref.clone())
    if bad := _number(below) or _number(above):
        return bad
    return None if below.item() > above.item() else f"{fmt(below)} below the reference, {fmt(above)} above it"


@law(
    "compute_kl_penalty",
    "gradcheck",
    "autograd's gradient w.r.t. log_probs equals float64 central differences",
    _penalty,
    examples=10,
)
def _(fn, ex):
    ref = ex["ref_log_probs"]
    return gradcheck(lambda lp: fn(lp, ref), [ex["log_probs"]], "log_probs")


@law(
    "compute_kl_penalty",
    "inputs_unchanged",
    "the inputs stay unchanged and a float64 input gives a float64 result",
    _penalty,
)
def _(fn, ex):
    return unchanged(fn, (ex["log_probs"], ex["ref_log_probs"]))
