"""The one catalog of student mistakes, and of right answers written differently.

This is the only place a mistake is written. Each variant is a graded function as a student might
write it: a plain function with the graded function's parameters (names, order and defaults, checked
against the answer key's when it is registered; a mistake in a stated default declares its wrong one),
marked with its verdict. ``@wrong(function, diagnosis)``: the variant must fail the graded cases with a message that contains ``diagnosis``;
``@right(function)``: it must pass them all. :mod:`instructor.mutations` runs every variant
in-process, in place of the key's function. A variant may call the key's ``masked_mean`` and
``per_token_kl`` (imported below from the key, never from the student's files). Its name in reports
is its function's name, unique in this module.

The graded cases record what each wrong variant returns on their inputs (:mod:`instructor.cases`),
NaN included, so a student's function that returns the same is told the variant's ``diagnosis``: the
whole sentence the student reads after "This matches a common mistake:". A diagnosis the generic
checks already give (shape, dtype, gradient, in-place) is a few words of their message instead.

A result that matches several recorded mistakes (two variants can agree on one input: ``max`` for
``min`` and a flipped sign agree on the §2.1 table) is told all of them, in the order of the functions
below; a diagnosis is never given alone where another mistake returns the same. So the order is only
the order a student reads them in: the most specific first; for a function returning a tuple, mistakes
in a later part (e.g. only the returns of ``compute_gae``) first. A wrong variant's failures must name
it, and no failure may name other mistakes without it (:mod:`instructor.mutations`).

To catalogue a new mistake: write its function below, in its graded function's section, then
``python -m instructor fixtures`` and ``python -m instructor mutations``.
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlhf_practice.course import load_impl, module_of

KEY = load_impl("answer")
masked_mean = KEY.token_level.masked_mean
per_token_kl = KEY.token_level.per_token_kl


@dataclass(frozen=True)
class Variant:
    function: str  # the graded function it replaces
    verdict: str  # "wrong" or "right"
    name: str  # its Python function's name
    fn: Callable  # the variant itself, called in place of the key's function
    diagnosis: str = ""  # wrong only: words the failure message must contain


CATALOG: list[Variant] = []  # in the order of the functions below: the precedence


def _parameters(fn: Callable) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def _register(function: str, verdict: str, diagnosis: str = "", defaults: dict | None = None) -> Callable:
    def register(fn: Callable) -> Callable:
        key = getattr(KEY.module(module_of(function)), function)
        expected = [(n, k, (defaults or {}).get(n, d)) for n, k, d in _parameters(key)]
        if _parameters(fn) != expected:
            raise TypeError(
                f"variant {fn.__name__}{inspect.signature(fn)}: give it the parameters of the key's "
                f"{function}{inspect.signature(key)} (names, order and defaults; other defaults only as "
                f"declared in defaults={defaults})"
            )
        if any(v.name == fn.__name__ for v in CATALOG):
            raise ValueError(f"two variants are named {fn.__name__}")
        CATALOG.append(Variant(function, verdict, fn.__name__, fn, diagnosis))
        return fn

    return register


def wrong(function: str, diagnosis: str, defaults: dict | None = None) -> Callable[[Callable], Callable]:
    """Catalogue a mistake in ``function``: the graded cases must fail it, naming ``diagnosis``.
    ``defaults``: {parameter: the wrong default the variant declares} for a mistake in a stated default;
    every other parameter as the key's."""
    return _register(function, "wrong", diagnosis, defaults)


def right(function: str) -> Callable[[Callable], Callable]:
    """Catalogue a right answer to ``function`` written differently: it must pass every graded case."""
    return _register(function, "right")


def wrong_variants(function: str) -> list[Variant]:
    return [v for v in CATALOG if v.function == function and v.verdict == "wrong"]


def tie_zeroed(fn: Callable) -> Callable:
    """``fn`` with a tie handled as the key handles it: the advantages of a tied group (compute_group_advantages),
    of equal advantages (compute_advantages, normalized) or the deltas of a tied row (compute_deltas, centered and
    normalized) are 0. For the variants whose one mistake is elsewhere: their results on a tie case then do not
    coincide with the tie mistake's, which would name their mistake for it."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def variant(*args, **kwargs):
        call = signature.bind(*args, **kwargs)
        call.apply_defaults()
        x, rewards = call.arguments, call.arguments["rewards"]
        if "group_size" in x:  # (N,): each reply, whether its group is tied
            grouped = rewards.detach().view(-1, x["group_size"])
            tied = (grouped == grouped[:, :1]).all(dim=1, keepdim=True).expand_as(grouped).reshape(-1)
        elif "values" in x:  # 0-dim: whether every advantage is the same
            a = (rewards - x["values"]).detach()
            tied = (a == a.flatten()[0]).all() & x["normalize"]
        else:  # (batch, 1): whether a row is tied, in the two modes that centre it
            tied = (rewards == rewards[..., :1]).all(dim=-1, keepdim=True)
            tied &= x["mode"] in ("centered_rewards", "normalized_rewards")
        out = fn(*args, **kwargs)
        if isinstance(out, torch.Tensor) and (
            tied.dim() == 0 or tied.numel() == out.numel() or tied.dim() == out.dim()
        ):
            return out.masked_fill(tied.view(out.shape) if tied.numel() == out.numel() else tied, 0.0)
        return out

    return variant


# compute_advantages: ppo.py, TASKS.md §1.2


@right("compute_advantages")
def no_grad_block(rewards, values, normalize=True, eps=1e-8):
    with torch.no_grad():
        a = rewards - values
    if normalize:
        tie = bool((a == a.flatten()[0]).all())
        a = torch.zeros_like(a) if tie else (a - a.mean()) / (a.std() + eps)
    return a


@right("compute_advantages")
def std_mean(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if not normalize:
        return a
    std, mean = torch.std_mean(a.double())  # in float64: a float32 tie is then 0 to within ~1e-8
    return ((a - mean) / (std + eps)).to(a.dtype)


@wrong(
    "compute_advantages",
    "all advantages equal but not 0: rounding puts the float32 mean ~1e-7 off and the std ~1e-7, far above eps, and "
    "(A - mean) / (std + eps) makes that noise about +-0.9; when every advantage is the same, return 0s",
)
def equal_advantages_not_zero(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_advantages", "normalize flag ignored (with normalize=False return rewards - values unchanged)")
@tie_zeroed
def always_normalizes(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    return (a - a.mean()) / (a.std() + eps)


@wrong("compute_advantages", "normalize flag ignored (with normalize=False return rewards - values unchanged)")
def never_normalizes(rewards, values, normalize=True, eps=1e-8):
    return rewards - values.detach()


@wrong("compute_advantages", "wrong sign (A = rewards - values, not values - rewards)")
def values_minus_rewards(rewards, values, normalize=True, eps=1e-8):
    a = values.detach() - rewards
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_advantages", "population std (use torch's default unbiased std, as a.std())")
def population_std(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = (a - a.mean()) / (a.std(unbiased=False) + eps)
    return a


@wrong("compute_advantages", "divided by the std without subtracting the mean first")
def no_mean_subtraction(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = a / (a.std() + eps)
    return a


@wrong("compute_advantages", "subtracted the mean but did not divide by the std")
def mean_subtracted_no_std(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = a - a.mean()
    return a


@wrong("compute_advantages", "rewards alone (the value baseline V(s) was not subtracted)")
@tie_zeroed
def no_value_baseline(rewards, values, normalize=True, eps=1e-8):
    a = rewards
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_advantages", "missing detach")
@tie_zeroed
def values_not_detached(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_advantages", "NaN from a zero std: divide by (std + eps), with the eps argument")
def no_eps(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if normalize:
        a = (a - a.mean()) / a.std()
    return a


@wrong("compute_advantages", "in place")
@tie_zeroed
def rewards_in_place(rewards, values, normalize=True, eps=1e-8):
    rewards -= values.detach()
    if normalize:
        rewards -= rewards.mean()
        rewards /= rewards.std() + eps
    return rewards


@wrong("compute_advantages", "dtype")
@tie_zeroed
def float32_cast(rewards, values, normalize=True, eps=1e-8):
    a = (rewards - values.detach()).float()
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


# ppo_clip_loss: ppo.py, TASKS.md §2.2


@right("ppo_clip_loss")
def max_of_negatives(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = (new_logprobs - old_logprobs.detach()).exp()
    a = advantages.detach()
    return torch.max(-ratio * a, -torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * a).mean()


@right("ppo_clip_loss")
def where_form(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    clipped = torch.clip(ratio, 1.0 - clip_range, 1.0 + clip_range)
    obj = torch.where(ratio * a < clipped * a, ratio * a, clipped * a)
    return -obj.sum() / obj.numel()


@right("ppo_clip_loss")
def advantages_not_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@right("ppo_clip_loss")
def old_not_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs)
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@right("ppo_clip_loss")
def cleanrl_form_nothing_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = (new_logprobs - old_logprobs).exp()
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    return torch.max(pg_loss1, pg_loss2).mean()


@wrong("ppo_clip_loss", "wrong sign (the loss is MINUS the mean of the clipped objective)")
def objective_not_negated(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "max instead of min (PPO keeps the smaller, pessimistic objective)")
def max_instead_of_min(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.max(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "no clipping (the ratio must be clamped to [1 - clip_range, 1 + clip_range])")
def no_clip(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    return -(ratio * advantages.detach()).mean()


@wrong("ppo_clip_loss", "only the clipped term (take the min of the clipped and unclipped terms)")
def only_the_clipped_term(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    return -(ratio.clamp(1 - clip_range, 1 + clip_range) * advantages.detach()).mean()


@wrong("ppo_clip_loss", "sum instead of mean over the batch")
def sum_over_batch(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).sum()


@wrong("ppo_clip_loss", "ratio inverted (ratio = exp(new_logprobs - old_logprobs), not old - new)")
def inverted_ratio(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(old_logprobs.detach() - new_logprobs)
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "ratio without exp (ratio = exp(new - old); the log-probs are logs)")
def ratio_without_exp(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = new_logprobs - old_logprobs.detach()
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "clamp range is [-clip_range, clip_range] instead of [1 - clip_range, 1 + clip_range]")
def clamp_around_0(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(-clip_range, clip_range) * a).mean()


@wrong("ppo_clip_loss", "clip_range ignored (a fixed 0.2 is used instead of the clip_range argument)")
def clip_range_fixed_at_0_2(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(0.8, 1.2) * a).mean()


@wrong(
    "ppo_clip_loss",
    "min of the two ratios times A (take the min of the two products ratio * A and clamp(ratio, 1 - clip_range, 1 + clip_range) * A)",
)
def min_of_ratios(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -(torch.min(ratio, ratio.clamp(1 - clip_range, 1 + clip_range)) * a).mean()


@wrong(
    "ppo_clip_loss",
    "ratio = exp(new_logprobs) / exp(old_logprobs) is 0 / 0 for log-probs around -300 (compute exp(new_logprobs - old_logprobs))",
)
def exp_ratio_of_probs(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs) / torch.exp(old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong(
    "ppo_clip_loss",
    "the clipped ratio was detached (clamp the ratio itself: inside [1 - clip_range, 1 + clip_range] the clipped term passes gradient too)",
)
def clipped_ratio_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.detach().clamp(1 - clip_range, 1 + clip_range) * a).mean()


@wrong("ppo_clip_loss", "do not detach new_logprobs")
def new_logprobs_detached(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs.detach() - old_logprobs)
    return -torch.min(ratio * advantages, ratio.clamp(1 - clip_range, 1 + clip_range) * advantages).mean()


@wrong("ppo_clip_loss", "wrong output shape")
def no_mean(new_logprobs, old_logprobs, advantages, clip_range):
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    a = advantages.detach()
    return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)


# compute_group_advantages: grpo.py, TASKS.md §3.2


@right("compute_group_advantages")
def loop_over_groups(rewards, group_size, normalize=True, eps=1e-8):
    out = []
    for i in range(0, rewards.numel(), group_size):
        g = rewards[i : i + group_size]
        if bool((g == g[0]).all()):  # a tie: no reply is better than another
            out.append(torch.zeros_like(g))
            continue
        a = g - g.mean()
        if normalize:
            a = a / (g.std() + eps)
        out.append(a)
    return torch.cat(out)


@right("compute_group_advantages")
def repeat_interleave_stats(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.reshape(-1, group_size).double()  # statistics in float64: a float32 tie is then 0 to within ~1e-8
    mean = g.mean(1).repeat_interleave(group_size)
    a = rewards.double() - mean
    if normalize:
        a = a / (g.std(1).repeat_interleave(group_size) + eps)
    return a.to(rewards.dtype)


@right("compute_group_advantages")
def where_std_is_rounding(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    std = g.std(dim=1, keepdim=True)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (std + eps)
    tie = std <= 16 * torch.finfo(g.dtype).eps * g.abs().amax(dim=1, keepdim=True)  # a spread of a few ulps
    return torch.where(tie, torch.zeros_like(a), a).reshape(-1)


@wrong(
    "compute_group_advantages",
    "a tied group (all K rewards equal) got advantages that are not 0: rounding puts its float32 mean ~1e-7 off and its "
    "std ~1e-7, far above eps, and (r - mean) / (std + eps) makes that noise about +-0.9 (+-12 beside other groups); "
    "set a tied group's advantages to 0",
)
def tied_group_not_zero(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (g.std(dim=1, keepdim=True) + eps)
    return a.reshape(-1)


@wrong(
    "compute_group_advantages",
    "wrong grouping order: the K replies of one prompt are consecutive (reshape to (B, K) = (-1, group_size), not (group_size, -1))",
)
def wrong_grouping_order(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(group_size, -1)
    a = g - g.mean(dim=0, keepdim=True)
    if normalize:
        a = a / (g.std(dim=0, keepdim=True) + eps)
    return a.reshape(-1)


@wrong(
    "compute_group_advantages",
    "rewards.view(group_size, -1) is (K, B): each row holds B consecutive rewards, replies of different prompts (group with view(-1, group_size), i.e. (B, K), and reduce over dim=1)",
)
def swapped_view_reduced_over_rows(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(group_size, -1)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (g.std(dim=1, keepdim=True) + eps)
    return a.reshape(-1)


@wrong(
    "compute_group_advantages",
    "statistics over dim=0 of the (B, K) view, across prompts; a group's mean and std are over dim=1, its K replies",
)
def statistics_across_prompts(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=0, keepdim=True)
    if normalize:
        a = a / (g.std(dim=0, keepdim=True) + eps)
    return a.reshape(-1)


@wrong("compute_group_advantages", "normalize flag ignored")
@tie_zeroed
def group_always_normalizes(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = (g - g.mean(dim=1, keepdim=True)) / (g.std(dim=1, keepdim=True) + eps)
    return a.reshape(-1)


@wrong("compute_group_advantages", "normalize flag ignored")
def group_never_normalizes(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    return (g - g.mean(dim=1, keepdim=True)).reshape(-1)


@wrong("compute_group_advantages", "wrong sign (A = r - baseline)")
def mean_minus_rewards(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g.mean(dim=1, keepdim=True) - g
    if normalize:
        a = a / (g.std(dim=1, keepdim=True) + eps)
    return a.reshape(-1)


@wrong("compute_group_advantages", "baseline is the whole batch's mean instead of each group's mean")
def global_mean_baseline(rewards, group_size, normalize=True, eps=1e-8):
    a = rewards - rewards.mean()
    if normalize:
        a = a / (rewards.std() + eps)
    return a


@wrong(
    "compute_group_advantages",
    "normalized by the batch std instead of each group's own std (GRPO divides by the group's std)",
)
def batch_std(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = (g - g.mean(dim=1, keepdim=True)).reshape(-1)
    if normalize:
        a = a / (rewards.std() + eps)
    return a


@wrong("compute_group_advantages", "normalized the centred advantages over the whole batch instead of per group")
def task_book_flatten_then_batch_normalize(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = (g - g.mean(dim=1, keepdim=True)).reshape(-1)
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_group_advantages", "population std (use torch's default unbiased std)")
def group_population_std(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (g.std(dim=1, keepdim=True, unbiased=False) + eps)
    return a.reshape(-1)


@wrong("compute_group_advantages", "NaN from a zero std: a group whose rewards are all equal needs (group std + eps)")
def group_no_eps(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / g.std(dim=1, keepdim=True)
    return a.reshape(-1)


@wrong("compute_group_advantages", "wrong output shape")
def not_flattened(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (g.std(dim=1, keepdim=True) + eps)
    return a


@wrong("compute_group_advantages", "in place")
@tie_zeroed
def group_rewards_in_place(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    g -= g.mean(dim=1, keepdim=True).clone()
    if normalize:
        g /= g.std(dim=1, keepdim=True) + eps
    return rewards


# grpo_loss: grpo.py, TASKS.md §3.3


@right("grpo_loss")
def explicit_sum_over_n(logprobs, advantages):
    return -(logprobs * advantages.detach()).sum() / logprobs.numel()


@wrong("grpo_loss", "wrong sign (loss = -mean(A * logprobs))")
def grpo_objective_not_negated(logprobs, advantages):
    return (advantages.detach() * logprobs).mean()


@wrong("grpo_loss", "sum instead of mean over the batch")
def grpo_sum_over_batch(logprobs, advantages):
    return -(advantages.detach() * logprobs).sum()


@wrong("grpo_loss", "used exp(logprobs) (probabilities) instead of log-probs")
def probs(logprobs, advantages):
    return -(advantages.detach() * logprobs.exp()).mean()


@wrong("grpo_loss", "advantages left out (plain mean of log-probs)")
def advantages_left_out(logprobs, advantages):
    return -logprobs.mean()


@wrong("grpo_loss", "missing detach")
def grpo_advantages_not_detached(logprobs, advantages):
    return -(advantages * logprobs).mean()


@wrong("grpo_loss", "do not detach logprobs")
def logprobs_detached(logprobs, advantages):
    return -(advantages.detach() * logprobs.detach()).mean()


@wrong("grpo_loss", "wrong output shape")
def grpo_no_mean(logprobs, advantages):
    return -(advantages.detach() * logprobs)


# masked_mean: token_level.py, TASKS.md §7.2


@right("masked_mean")
def where_and_count(values, mask, dim=None):
    count = mask.sum(dim=dim).clamp(min=1)
    return torch.where(mask > 0, values, torch.zeros_like(values)).sum(dim=dim) / count


@right("masked_mean")
def clamp_min_on_float(values, mask, dim=None):
    return (values * mask).sum(dim) / torch.clamp(mask.sum(dim), min=1.0)


@wrong("masked_mean", "plain mean: the padding was averaged in too (divide by sum(mask), not by the number of columns)")
def plain_mean_over_padding(values, mask, dim=None):
    return (values * mask).mean() if dim is None else (values * mask).mean(dim=dim)


@wrong("masked_mean", "the mask was not applied to the sum (padding values were added)")
def mask_not_applied_to_the_sum(values, mask, dim=None):
    return values.sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)


@wrong("masked_mean", "mean of the per-row means (with dim=None, one mean over every real token of the batch)")
def mean_of_row_means(values, mask, dim=None):
    row = (values * mask).sum(1) / mask.sum(1).clamp(min=1)
    return row.mean() if dim is None else row


@wrong("masked_mean", "wrong output shape")
def dim_ignored(values, mask, dim=None):
    return (values * mask).sum() / mask.sum().clamp(min=1)


@wrong("masked_mean", "0 / 0 for a row with no real token: clamp the denominator sum(mask) to at least 1")
def no_clamp(values, mask, dim=None):
    return (values * mask).sum(dim=dim) / mask.sum(dim=dim)


@wrong("masked_mean", "in-place")
def values_in_place(values, mask, dim=None):
    values.mul_(mask)
    return values.sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)


@wrong(
    "masked_mean",
    "NaN gradient from a row with no real token: torch.where(count > 0, sum / count, 0) still backpropagates "
    "through 0 / 0; divide by sum(mask).clamp(min=1) instead",
)
def nan_gradient_on_an_all_masked_row(values, mask, dim=None):
    total, count = (values * mask).sum(dim=dim), mask.sum(dim=dim)
    return torch.where(count > 0, total / count, torch.zeros_like(total))


# per_token_kl: token_level.py, TASKS.md §7.3


@right("per_token_kl")
def log_of_ratio(logprobs, ref_logprobs, mask, estimator="k3"):
    r = torch.exp(ref_logprobs - logprobs)
    if estimator == "k1":
        return -torch.log(r) * mask
    if estimator == "k3":
        return (r - 1 - torch.log(r)) * mask
    raise ValueError(estimator)


@right("per_token_kl")
def expm1_and_where(logprobs, ref_logprobs, mask, estimator="k3"):
    if estimator not in ("k1", "k3"):
        raise ValueError(f"estimator={estimator!r}")
    d = logprobs - ref_logprobs
    kl = d if estimator == "k1" else torch.expm1(-d) + d
    return torch.where(mask > 0, kl, torch.zeros_like(kl))


@wrong("per_token_kl", "computed k3 although estimator='k1' was asked for")
def always_k3(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    return (torch.exp(-d) - 1 + d) * mask


@wrong("per_token_kl", "computed k1 although estimator='k3' was asked for")
def always_k1(logprobs, ref_logprobs, mask, estimator="k3"):
    return (logprobs - ref_logprobs) * mask


@wrong("per_token_kl", "masked positions must be 0 (multiply by the mask)")
def mask_ignored(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    return d if estimator == "k1" else torch.exp(-d) - 1 + d


@wrong("per_token_kl", "k2 = (log ratio)^2 / 2 instead of the estimator asked for")
def k2_whatever_the_estimator(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    return d**2 / 2 * mask


@wrong("per_token_kl", "KL sign: k1 = logprobs - ref_logprobs = log(pi / pi_ref), not ref - logprobs")
def k1_sign(logprobs, ref_logprobs, mask, estimator="k3"):
    d = ref_logprobs - logprobs
    kl = d if estimator == "k1" else torch.exp(d) - 1 - d
    return kl * mask


@wrong("per_token_kl", "k3 with r = pi / pi_ref; it is r = pi_ref / pi = exp(ref_logprobs - logprobs)")
def k3_with_r_pi_over_pi_ref(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    kl = d if estimator == "k1" else torch.exp(d) - 1 - d
    return kl * mask


@wrong("per_token_kl", "k3 sign: (r - 1) - log r is >= 0 at every token; this is its negative")
def k3_negative(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    kl = d if estimator == "k1" else 1 - torch.exp(-d) - d
    return kl * mask


@wrong("per_token_kl", "instead of raising ValueError")
def unknown_estimator_falls_back_to_k3(logprobs, ref_logprobs, mask, estimator="k3"):
    d = logprobs - ref_logprobs
    return (d if estimator == "k1" else torch.exp(-d) - 1 + d) * mask


# compute_gae: token_level.py, TASKS.md §8.2


@right("compute_gae")
def lists_and_stack(rewards, values, mask, gamma, lam):
    values = values.detach()
    n, t_max = rewards.shape
    adv = [None] * t_max
    last = torch.zeros_like(rewards[:, 0])
    for t in range(t_max - 1, -1, -1):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * nv - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        adv[t] = last
    advantages = torch.stack(adv, dim=1)
    return advantages, (advantages + values) * mask


@wrong("compute_gae", "returns = A (the value target is R_t = A_t + V_t)")
def returns_equal_advantages(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, adv


@wrong("compute_gae", "returns = discounted sum of rewards (the value target is R_t = A_t + V_t)")
def monte_carlo_returns(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(last)
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
        running = (rewards[:, t] + gamma * running) * mask[:, t]
        adv[:, t] = last
        returns[:, t] = running
    return adv, returns


@wrong("compute_gae", "returns on the padding: R_t = (A_t + V_t) * mask is 0 after a reply's last real token")
def padding_keeps_its_return(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, adv + values


@wrong(
    "compute_gae",
    "GAE run left to right: the previous token's V_{t-1} and A_{t-1} were used as the next ones; A_t needs V_{t+1} and A_{t+1}, so start at the last token and go backwards",
)
def left_to_right_previous_token_as_the_next(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in range(t_max):
        prev_v = values[:, t - 1] * mask[:, t - 1] if t > 0 else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * prev_v - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong(
    "compute_gae", "GAE ran into the padding: after a reply's last real token, V_{t+1} and A_{t+1} are 0 (use the mask)"
)
def no_mask_at_all(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last
        adv[:, t] = last
    return adv, adv + values


@wrong("compute_gae", "lam left out: A_t = delta_t + gamma * lam * A_{t+1}")
def lambda_missing(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong("compute_gae", "gamma and lam swapped or gamma left out of the A recursion")
def gamma_and_lam_swapped(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + lam * nv - values[:, t] + lam * gamma * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong("compute_gae", "no bootstrap: delta_t = r_t + gamma * V_{t+1} - V_t needs the next value")
def no_bootstrap(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        last = (rewards[:, t] - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong("compute_gae", "GAE run left to right (t = 0, 1, ...): A_t needs A_{t+1}, so go from the last token backwards")
def left_to_right(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in range(t_max):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * nv - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong(
    "compute_gae",
    "GAE ran into the padding: V_{t+1} and A_{t+1} after a reply's last real token must be 0 (multiply by the mask)",
)
def runs_into_padding(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * nv - values[:, t]
        last = delta + gamma * lam * last
        adv[:, t] = last
    return adv * mask, (adv + values) * mask


@wrong(
    "compute_gae",
    "GAE bootstrapped from the padding: after a reply's last real token V_{t+1} must be 0 (next_value = V[:, t] * mask[:, t])",
)
def next_value_not_masked(rewards, values, mask, gamma, lam):
    values = values.detach()
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = (delta + gamma * lam * next_advantage) * mask[:, t]
        next_value = values[:, t]
        advantages[:, t] = next_advantage
    return advantages, (advantages + values) * mask


@wrong(
    "compute_gae",
    "the padding's advantages leaked into the reply: A_{t+1} after a reply's last real token must be 0 (multiply next_advantage by mask[:, t] inside the loop; masking A at the end is too late)",
)
def advantages_masked_only_at_the_end(rewards, values, mask, gamma, lam):
    values = values.detach()
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = delta + gamma * lam * next_advantage
        next_value = values[:, t] * mask[:, t]
        advantages[:, t] = next_advantage
    advantages = advantages * mask
    return advantages, (advantages + values) * mask


@wrong(
    "compute_gae",
    "the padding's rewards leaked into the reply through A_{t+1}: masking the values is not enough (multiply next_advantage by mask[:, t] inside the loop)",
)
def only_values_masked(rewards, values, mask, gamma, lam):
    values = values.detach() * mask
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = delta + gamma * lam * next_advantage
        next_value = values[:, t]
        advantages[:, t] = next_advantage
    advantages = advantages * mask
    return advantages, (advantages + values) * mask


@wrong(
    "compute_gae",
    "delta_t used V_t in place of V_{t+1}: next_value was overwritten before delta was computed (compute delta first, then next_value = V[:, t] * mask[:, t])",
)
def next_value_overwritten_before_use(rewards, values, mask, gamma, lam):
    values = values.detach()
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        next_value = values[:, t] * mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = (delta + gamma * lam * next_advantage) * mask[:, t]
        advantages[:, t] = next_advantage
    return advantages, (advantages + values) * mask


@wrong("compute_gae", "delta_t used V_{t-1}, the previous token's value, in place of V_{t+1}")
def previous_value_as_the_next(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        prev_v = values[:, t - 1] * mask[:, t - 1] if t > 0 else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * prev_v - values[:, t] + gamma * lam * last) * mask[:, t]
        adv[:, t] = last
    return adv, (adv + values) * mask


@wrong(
    "compute_gae",
    "GAE run left to right: A_{t+1} was read before it was computed (still 0), so A_t = delta_t; start at the last token and go backwards",
)
def left_to_right_reads_the_next_advantage_too_early(rewards, values, mask, gamma, lam):
    values = values.detach()
    t_max = rewards.shape[1]
    advantages = torch.zeros_like(rewards)
    for t in range(t_max):
        next_value = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(rewards[:, 0])
        next_advantage = advantages[:, t + 1] if t + 1 < t_max else torch.zeros_like(rewards[:, 0])
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantages[:, t] = (delta + gamma * lam * next_advantage) * mask[:, t]
    return advantages, (advantages + values) * mask


@wrong("compute_gae", "missing detach")
def gae_values_not_detached(rewards, values, mask, gamma, lam):
    t_max = rewards.shape[1]
    adv = []
    last = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(t_max)):
        nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
        last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
        adv.insert(0, last)
    adv = torch.stack(adv, 1)
    return adv, (adv + values) * mask


@wrong("compute_gae", "changed its input `rewards` in place")
def rewards_masked_in_place(rewards, values, mask, gamma, lam):
    rewards.mul_(mask)  # the padding's rewards set to 0 in the caller's tensor
    return KEY.token_level.compute_gae(rewards, values, mask, gamma, lam)


# token_ppo_loss: token_level.py, TASKS.md §8.3


@right("token_ppo_loss")
def no_detach_own_mean(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    n = mask.sum().clamp(min=1)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.maximum((new_values - returns) ** 2, (vc - returns) ** 2)
    return (pg * mask).sum() / n, (vf * mask).sum() / n


@wrong("token_ppo_loss", "no ratio clipping (clamp the ratio to [1 - clip_range, 1 + clip_range])")
def no_ratio_clipping(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -ratio * advantages
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "wrong sign (the policy loss is MINUS the clipped objective)")
def policy_loss_without_the_minus(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "max instead of min in the clipped surrogate")
def token_max_instead_of_min(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.max(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "value loss keeps the smaller error (min); PPO keeps the larger one: max(unclipped, clipped)")
def value_min(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.min((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "value loss without clipping (clip new_values to old_values +- clip_range_value)")
def no_value_clip(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    return masked_mean(pg, mask), masked_mean((new_values - returns) ** 2, mask)


@wrong("token_ppo_loss", "value loss with a factor 1/2 (the book's value loss has none)")
def half_value_loss(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = 0.5 * torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


@wrong("token_ppo_loss", "mean over padding: average over real tokens only (masked_mean)")
def token_mean_over_padding(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return (pg * mask).mean(), (vf * mask).mean()


@wrong("token_ppo_loss", "mean of per-reply means; token_ppo_loss averages over every real token of the batch")
def per_reply_mean(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask, 1).mean(), masked_mean(vf, mask, 1).mean()


@wrong("token_ppo_loss", "sum instead of mean over tokens")
def token_sum(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return (pg * mask).sum(), (vf * mask).sum()


@wrong("token_ppo_loss", "the two losses in the wrong order: return (policy_loss, value_loss)")
def returned_in_the_other_order(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs - old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(vf, mask), masked_mean(pg, mask)


@wrong(
    "token_ppo_loss",
    "ratio = exp(new_logprobs) / exp(old_logprobs) is 0 / 0 for very unlikely tokens; compute exp(new_logprobs - old_logprobs)",
)
def token_ratio_of_probabilities(
    new_logprobs, old_logprobs, advantages, new_values, old_values, returns, mask, clip_range, clip_range_value
):
    ratio = torch.exp(new_logprobs) / torch.exp(old_logprobs)
    pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
    vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
    return masked_mean(pg, mask), masked_mean(vf, mask)


# grpo_clip_loss: token_level.py, TASKS.md §9.2


def _reduce(loss, mask, loss_type, max_tokens):
    """The per-token loss reduced as loss_type says: for the variants whose mistake lies before it."""
    return (
        masked_mean(loss, mask, dim=1).mean()
        if loss_type == "grpo"
        else masked_mean(loss, mask)
        if loss_type == "dapo"
        else (loss * mask).sum() / (mask.shape[0] * max_tokens)
    )


@right("grpo_clip_loss")
def no_detach_explicit_branches(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = (logprobs - old_logprobs).exp()
    a = advantages[:, None]
    d = ref_logprobs - logprobs
    loss = -torch.minimum(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * (d.exp() - d - 1)
    loss = loss * mask
    if loss_type == "grpo":
        return (loss.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    if loss_type == "dapo":
        return loss.sum() / mask.sum().clamp(min=1)
    if loss_type == "dr_grpo":
        return loss.sum() / (loss.shape[0] * max_tokens)
    raise ValueError(loss_type)


@wrong(
    "grpo_clip_loss",
    "ratio taken against the reference policy; the ratio is exp(logprobs - old_logprobs), the reference only enters the KL term",
)
def ratio_against_the_reference(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - ref_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "no ratio clipping")
def no_clipping(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -ratio * a + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "wrong sign (the loss is MINUS the clipped objective, plus beta * KL)")
def surrogate_without_the_minus(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "KL sign: the loss ADDS beta * KL")
def kl_sign(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) - beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "beta ignored (the KL term is beta * k3)")
def beta_ignored(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "k1 (logprobs - ref_logprobs) instead of k3 in the KL term")
def k1_instead_of_k3(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k1"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong("grpo_clip_loss", "mean over padding: only real tokens count")
def mean_over_padding_kl_not_masked(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    d = ref_logprobs - logprobs
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * (d.exp() - d - 1)
    return (
        loss.mean(dim=1).mean()
        if loss_type == "grpo"
        else loss.mean()
        if loss_type == "dapo"
        else loss.sum() / (mask.shape[0] * max_tokens)
    )


@wrong("grpo_clip_loss", "advantages broadcast along the token axis: A_i belongs to row i (use advantages[:, None])")
def advantages_on_the_token_axis(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach()
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return _reduce(loss, mask, loss_type, max_tokens)


@wrong(
    "grpo_clip_loss",
    "dapo's normalization (one mean over all tokens) used for loss_type='grpo' (mean per reply, then over replies)",
)
def dapo_normalization_for_grpo(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return (
        masked_mean(loss, mask) if loss_type in ("grpo", "dapo") else (loss * mask).sum() / (mask.shape[0] * max_tokens)
    )


@wrong(
    "grpo_clip_loss",
    "grpo's normalization (mean per reply, then over replies) used for loss_type='dapo' (one mean over all tokens)",
)
def grpo_normalization_for_dapo(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return (
        masked_mean(loss, mask, dim=1).mean()
        if loss_type in ("grpo", "dapo")
        else (loss * mask).sum() / (mask.shape[0] * max_tokens)
    )


@wrong("grpo_clip_loss", "dr_grpo divided by the T columns of the batch; divide by N * max_tokens")
def dr_grpo_by_columns(logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return (
        masked_mean(loss, mask, dim=1).mean()
        if loss_type == "grpo"
        else masked_mean(loss, mask)
        if loss_type == "dapo"
        else (loss * mask).sum() / mask.numel()
    )


@wrong(
    "grpo_clip_loss",
    "mean over padding: divide by the number of real tokens (masked_mean), not by the number of columns",
)
def grpo_clip_mean_over_padding(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(
        logprobs, ref_logprobs, mask, "k3"
    )
    return (
        loss.mean(dim=1).mean()
        if loss_type == "grpo"
        else loss.mean()
        if loss_type == "dapo"
        else loss.sum() / (mask.shape[0] * max_tokens)
    )


@wrong(
    "grpo_clip_loss",
    "ratio = exp(logprobs) / exp(old_logprobs) is 0 / 0 for very unlikely tokens; compute exp(logprobs - old_logprobs)",
)
def grpo_clip_ratio_of_probabilities(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs) / torch.exp(old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)
    return _reduce(loss + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3"), mask, loss_type, max_tokens)


@wrong(
    "grpo_clip_loss",
    "NaN gradient from a reply with no real token: torch.where(count > 0, sum / count, 0) still backpropagates "
    "through 0 / 0; divide each reply's sum by its token count clamped to at least 1 (masked_mean)",
)
def grpo_where_per_reply_mean(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    ratio = torch.exp(logprobs - old_logprobs)
    a = advantages.detach().unsqueeze(1)
    loss = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)
    loss = loss + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
    if loss_type != "grpo":
        return _reduce(loss, mask, loss_type, max_tokens)
    total, count = (loss * mask).sum(dim=1), mask.sum(dim=1)
    return torch.where(count > 0, total / count, torch.zeros_like(total)).mean()


@wrong("grpo_clip_loss", "instead of raising ValueError")
def unknown_loss_type_falls_back_to_grpo(
    logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, loss_type, max_tokens
):
    known = loss_type if loss_type in ("grpo", "dapo", "dr_grpo") else "grpo"
    return KEY.token_level.grpo_clip_loss(
        logprobs, old_logprobs, ref_logprobs, advantages, mask, clip_range, beta, known, max_tokens
    )


# sort_distance_reward: lecture.py, TASKS.md §10.1


@right("sort_distance_reward")
def lecture_style_int_count(prompt, response):
    ground_truth = sorted(prompt)
    return sum(1 for x, y in zip(response, ground_truth) if x == y)  # an int: a right answer too


@right("sort_distance_reward")
def with_tensors(prompt, response):
    target = torch.as_tensor(prompt).sort().values
    return float((torch.as_tensor(response) == target).sum())


@wrong(
    "sort_distance_reward",
    "compared with the prompt as given; compare with sorted(prompt) (a tensor's .sort() returns new tensors, it does not sort in place)",
)
def compared_with_the_prompt(prompt, response):
    return float(sum(int(x) == int(y) for x, y in zip(response, prompt)))


@wrong(
    "sort_distance_reward",
    "sorted the prompt with prompt.sort() and compared with it: a list is sorted in place (the caller's prompt "
    "changes), a tensor's .sort() returns new tensors and leaves it unsorted; compare with sorted(prompt)",
)
def sorts_the_prompt_in_place(prompt, response):
    target = prompt
    target.sort()  # a list is sorted in place; a tensor's .sort() returns new tensors and leaves it as it was
    return float(sum(int(x) == int(y) for x, y in zip(response, target)))


@wrong("sort_distance_reward", "sorted largest first; the right answer is sorted(prompt), smallest first")
def sorted_descending(prompt, response):
    target = sorted((int(x) for x in prompt), reverse=True)
    return float(sum(int(x) == y for x, y in zip(response, target)))


@wrong("sort_distance_reward", "sorted the response too; compare the response as written with sorted(prompt)")
def sorted_the_response_too(prompt, response):
    target = sorted(int(x) for x in prompt)
    return float(sum(x == y for x, y in zip(sorted(int(x) for x in response), target)))


@wrong("sort_distance_reward", "convert it with float(...) or .item()")
def returns_a_tensor(prompt, response):
    return (torch.as_tensor(response) == torch.as_tensor(prompt).sort().values).sum()


# sort_inclusion_ordering_reward: lecture.py, TASKS.md §10.1


@right("sort_inclusion_ordering_reward")
def lecture_style_generators(prompt, response):
    inclusion_reward = sum(1 for x in prompt if x in response)
    ordering_reward = sum(1 for x, y in zip(response, response[1:]) if x <= y)
    return inclusion_reward + ordering_reward


@right("sort_inclusion_ordering_reward")
def with_isin(prompt, response):
    prompt, response = torch.as_tensor(prompt), torch.as_tensor(response)
    return float(torch.isin(prompt, response).sum() + (response[:-1] <= response[1:]).sum())


@wrong(
    "sort_inclusion_ordering_reward",
    "inclusion counted over the response's entries; count the prompt's entries that occur somewhere in the response",
)
def inclusion_over_the_response(prompt, response):
    prompt, reply = [int(x) for x in prompt], [int(x) for x in response]
    return float(sum(x in prompt for x in reply) + sum(a <= b for a, b in zip(reply, reply[1:])))


@wrong(
    "sort_inclusion_ordering_reward",
    "inclusion counted over distinct numbers (a set); count every prompt entry, a number that occurs twice counts twice",
)
def inclusion_of_distinct_numbers(prompt, response):
    reply = [int(x) for x in response]
    inclusion = len({int(x) for x in prompt} & set(reply))
    return float(inclusion + sum(a <= b for a, b in zip(reply, reply[1:])))


@wrong(
    "sort_inclusion_ordering_reward",
    "inclusion matched copy for copy (a Counter); a prompt entry counts when its number occurs anywhere in the response",
)
def inclusion_matched_copy_for_copy(prompt, response):
    reply = [int(x) for x in response]
    inclusion = sum((Counter(int(x) for x in prompt) & Counter(reply)).values())
    return float(inclusion + sum(a <= b for a, b in zip(reply, reply[1:])))


@wrong(
    "sort_inclusion_ordering_reward",
    "strict < in the ordering term; equal neighbours are in order (response[i] <= response[i + 1])",
)
def strict_ordering(prompt, response):
    reply = [int(x) for x in response]
    return float(sum(int(x) in reply for x in prompt) + sum(a < b for a, b in zip(reply, reply[1:])))


@wrong(
    "sort_inclusion_ordering_reward",
    "ordering counted as the positions that match sorted(prompt) (that is sort_distance_reward); count the adjacent pairs in order",
)
def ordering_as_distance(prompt, response):
    reply = [int(x) for x in response]
    target = sorted(int(x) for x in prompt)
    return float(sum(int(x) in reply for x in prompt) + sum(a == b for a, b in zip(reply, target)))


@wrong(
    "sort_inclusion_ordering_reward",
    "ordering counted over every pair i < j; count only adjacent pairs (response[i], response[i + 1])",
)
def ordering_over_all_pairs(prompt, response):
    reply = [int(x) for x in response]
    ordering = sum(a <= b for i, a in enumerate(reply) for b in reply[i + 1 :])
    return float(sum(int(x) in reply for x in prompt) + ordering)


# compute_deltas: lecture.py, TASKS.md §10.2


@right("compute_deltas")
def std_mean_and_a_mask(rewards, mode):
    if mode not in ("rewards", "centered_rewards", "normalized_rewards", "max_rewards"):
        raise ValueError(mode)
    if mode == "rewards":
        return rewards.clone()
    std, mean = torch.std_mean(rewards, dim=-1, keepdim=True)
    if mode == "centered_rewards":
        return rewards - mean
    if mode == "normalized_rewards":
        return (rewards - mean) / (std + 1e-5)
    return rewards * (rewards == rewards.amax(dim=-1, keepdim=True))


@right("compute_deltas")
def match_statement(rewards, mode):
    match mode:
        case "rewards":
            return rewards
        case "centered_rewards" | "normalized_rewards":
            shifted = rewards - rewards[:, :1]  # exact statistics: a tied row is 0s, then 0 exactly
            centered = shifted - shifted.mean(-1)[:, None]
            if mode == "centered_rewards":
                return centered
            return centered / (shifted.std(-1)[:, None] + 1e-5)
        case "max_rewards":
            best = rewards.max(dim=1).values.unsqueeze(1)
            return torch.where(rewards < best, torch.zeros_like(rewards), rewards)
        case _:
            raise ValueError(f"unknown mode {mode}")


def _deltas(rewards, mode, mean, std, best):
    """The four modes from a mean, a std and a kept-maximum mask: for the variants whose mistake is in one of them.
    A tied row's centered and normalized deltas are 0, as the key's."""
    if mode == "rewards":
        return rewards
    tied = (rewards == rewards[..., :1]).all(dim=-1, keepdim=True)
    if mode == "centered_rewards":
        return (rewards - mean).masked_fill(tied, 0.0)
    if mode == "normalized_rewards":
        return ((rewards - mean) / (std + 1e-5)).masked_fill(tied, 0.0)
    if mode == "max_rewards":
        return torch.where(best, rewards, torch.zeros_like(rewards))
    raise ValueError(mode)


def _row_stats(rewards):
    return (
        rewards.mean(dim=-1, keepdim=True),
        rewards.std(dim=-1, keepdim=True),
        rewards == rewards.max(dim=-1, keepdim=True).values,
    )


@wrong(
    "compute_deltas",
    "a tied row (all rewards equal) got deltas that are not 0: rounding puts its float32 mean ~1e-6 off and its std "
    "~1e-6, which the 1e-5 does not swamp; set a tied row's deltas to 0",
)
def tied_row_not_zero(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "centered_rewards":
        return rewards - mean
    if mode == "normalized_rewards":
        return (rewards - mean) / (std + 1e-5)
    return _deltas(rewards, mode, mean, std, best)


@wrong(
    "compute_deltas",
    "NaN from a zero std: a prompt whose replies all got the same reward needs (std + 1e-5) in the denominator",
)
def normalized_without_the_epsilon(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "normalized_rewards":
        return (rewards - mean) / std
    return _deltas(rewards, mode, mean, std, best)


@wrong(
    "compute_deltas",
    "mean and std over dim 0, across prompts; a prompt's replies are compared with each other: reduce over the trials (dim=-1)",
)
def statistics_over_the_batch_dim(rewards, mode):
    _, _, best = _row_stats(rewards)
    return _deltas(rewards, mode, rewards.mean(dim=0, keepdim=True), rewards.std(dim=0, keepdim=True), best)


@wrong("compute_deltas", "std over dim 0, across prompts; the std is over the trials of one prompt (dim=-1)")
def std_over_the_batch_dim(rewards, mode):
    mean, _, best = _row_stats(rewards)
    return _deltas(rewards, mode, mean, rewards.std(dim=0, keepdim=True), best)


@wrong(
    "compute_deltas",
    "mean (and std) of the whole batch; each prompt's replies are compared with each other: reduce over dim=-1",
)
def statistics_of_the_whole_batch(rewards, mode):
    _, _, best = _row_stats(rewards)
    return _deltas(rewards, mode, rewards.mean(), rewards.std(), best)


@wrong("compute_deltas", "population std (unbiased=False); use torch's default (unbiased) std")
def deltas_population_std(rewards, mode):
    mean, _, best = _row_stats(rewards)
    return _deltas(rewards, mode, mean, rewards.std(dim=-1, keepdim=True, unbiased=False), best)


@wrong("compute_deltas", "normalized_rewards divided by the std without subtracting the mean first")
def normalized_not_centered(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "normalized_rewards":
        return rewards / (std + 1e-5)
    return _deltas(rewards, mode, mean, std, best)


@wrong("compute_deltas", "centered_rewards divided by the std as well; only normalized_rewards divides by it")
def centered_also_divides(rewards, mode):
    mean, std, best = _row_stats(rewards)
    return _deltas(rewards, "normalized_rewards" if mode == "centered_rewards" else mode, mean, std, best)


@wrong("compute_deltas", "max_rewards kept every reward at or above the row's mean; keep only the row's maximum")
def max_keeps_above_the_mean(rewards, mode):
    mean, std, _ = _row_stats(rewards)
    return _deltas(rewards, mode, mean, std, rewards >= mean)


@wrong("compute_deltas", "max_rewards returned the rewards unchanged; set every reward below its row's maximum to 0")
def max_keeps_every_reward(rewards, mode):
    mean, std, _ = _row_stats(rewards)
    return _deltas(rewards, mode, mean, std, torch.ones_like(rewards, dtype=torch.bool))


@wrong("compute_deltas", "max_rewards put 1 at the maximum; keep the reward itself there (0 elsewhere)")
def max_one_hot(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "max_rewards":
        return best.to(rewards.dtype)
    return _deltas(rewards, mode, mean, std, best)


@wrong(
    "compute_deltas",
    "only the first of tied maxima kept (argmax); every reply that reaches its row's maximum keeps its reward",
)
def max_keeps_only_the_first_tie(rewards, mode):
    mean, std, _ = _row_stats(rewards)
    first = torch.zeros_like(rewards, dtype=torch.bool).scatter(-1, rewards.argmax(dim=-1, keepdim=True), True)
    return _deltas(rewards, mode, mean, std, first)


@wrong("compute_deltas", "the maximum of the whole batch; keep each row's (each prompt's) own maximum")
def max_of_the_whole_batch(rewards, mode):
    mean, std, _ = _row_stats(rewards)
    return _deltas(rewards, mode, mean, std, rewards == rewards.max())


@wrong(
    "compute_deltas",
    "epsilon inside the square root: normalized_rewards divides by std + 1e-5, not by sqrt(var + 1e-5)",
)
def epsilon_inside_the_square_root(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode == "normalized_rewards":
        return (rewards - mean) / torch.sqrt(rewards.var(dim=-1, keepdim=True) + 1e-5)
    return _deltas(rewards, mode, mean, std, best)


@wrong("compute_deltas", "instead of raising ValueError")
def deltas_unknown_mode_falls_back(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode in ("centered_rewards", "normalized_rewards", "max_rewards"):
        return _deltas(rewards, mode, mean, std, best)
    return rewards


@wrong("compute_deltas", "in place")
@tie_zeroed
def deltas_in_place(rewards, mode):
    mean, std, best = _row_stats(rewards)
    if mode in ("centered_rewards", "normalized_rewards"):
        rewards -= mean
        if mode == "normalized_rewards":
            rewards /= std + 1e-5
        return rewards
    return _deltas(rewards, mode, mean, std, best)


# compute_loss: lecture.py, TASKS.md §10.3


def _loss(log_probs, deltas, mode, ratio, clip_range):
    """The three losses from a ratio: for the variants whose mistake is in the ratio."""
    d = deltas.detach().unsqueeze(-1)
    if mode == "naive":
        return -(log_probs * d).mean()
    if mode == "unclipped":
        return -(ratio * d).mean()
    if mode == "clipped":
        return -torch.minimum(ratio * d, ratio.clamp(1 - clip_range, 1 + clip_range) * d).mean()
    raise ValueError(mode)


def _old(log_probs, old_log_probs):
    return (log_probs if old_log_probs is None else old_log_probs).detach()


@right("compute_loss")
def clipped_with_where(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    if mode not in ("naive", "unclipped", "clipped"):
        raise ValueError(mode)
    d = deltas[..., None]
    if mode == "naive":
        return -(log_probs.mean(dim=-1) * deltas).mean()  # the mean over positions first: the same number
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    if mode == "unclipped":
        return -(ratio * d).mean()
    clipped = torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    return -torch.where(ratio * d < clipped * d, ratio * d, clipped * d).mean()


@right("compute_loss")
def lecture_einsum_nothing_detached(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    if mode == "naive":
        return -torch.einsum("btp,bt->btp", log_probs, deltas).mean()
    if old_log_probs is None:
        old_log_probs = log_probs.detach()
    ratios = torch.exp(log_probs - old_log_probs)  # a given old_log_probs is not detached: allowed
    if mode == "unclipped":
        return -torch.einsum("btp,bt->btp", ratios, deltas).mean()
    if mode == "clipped":
        unclipped = torch.einsum("btp,bt->btp", ratios, deltas)
        clipped = torch.einsum("btp,bt->btp", ratios.clamp(min=1 - clip_range, max=1 + clip_range), deltas)
        return -torch.minimum(unclipped, clipped).mean()
    raise ValueError(f"Unknown mode: {mode}")


@right("compute_loss")
def loss_as_max_of_negatives(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    d = deltas.detach().unsqueeze(-1)
    if mode == "naive":
        return (-log_probs * d).sum() / log_probs.numel()
    if mode not in ("unclipped", "clipped"):
        raise ValueError(mode)
    ratio = (log_probs - _old(log_probs, old_log_probs)).exp()
    if mode == "unclipped":
        return (-ratio * d).mean()
    return torch.max(-ratio * d, -ratio.clamp(1 - clip_range, 1 + clip_range) * d).mean()


@wrong(
    "compute_loss",
    "ratio written as log_probs / old_log_probs; the ratio is exp(log_probs - old_log_probs)",
)
def lecture_slip_ratio_of_log_probs(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    return _loss(log_probs, deltas, mode, log_probs / _old(log_probs, old_log_probs), clip_range)


@wrong(
    "compute_loss",
    "old log-probs not detached: with old_log_probs=None, old = log_probs.detach(); without the detach the ratio exp(log_probs - log_probs) is 1 with zero gradient",
)
def old_log_probs_not_detached(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    old = log_probs if old_log_probs is None else old_log_probs
    return _loss(log_probs, deltas, mode, torch.exp(log_probs - old), clip_range)


@wrong("compute_loss", "ratio inverted: it is exp(log_probs - old_log_probs), not exp(old_log_probs - log_probs)")
def loss_ratio_inverted(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    return _loss(log_probs, deltas, mode, torch.exp(_old(log_probs, old_log_probs) - log_probs), clip_range)


@wrong("compute_loss", "ratio without exp: log_probs - old_log_probs is the log of the ratio")
def loss_ratio_without_exp(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    return _loss(log_probs, deltas, mode, log_probs - _old(log_probs, old_log_probs), clip_range)


@wrong(
    "compute_loss",
    "ratio = exp(log_probs) / exp(old_log_probs) is 0 / 0 for very unlikely tokens; compute exp(log_probs - old_log_probs)",
)
def loss_ratio_of_probabilities(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs) / torch.exp(_old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode, ratio, clip_range)


@wrong("compute_loss", "clip_range ignored (the lecture's fixed 0.01 instead of the clip_range argument)")
def clip_range_fixed_at_the_lectures_0_01(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode, ratio, 0.01)


@wrong("compute_loss", "wrong sign (the loss is MINUS the mean of ratio * delta, or of log_probs * delta)")
def loss_not_negated(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return -_loss(log_probs, deltas, mode, ratio, clip_range)


@wrong("compute_loss", "max instead of min in the clipped loss (keep the smaller, pessimistic term)")
def loss_max_instead_of_min(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    if mode == "clipped":
        d = deltas.detach().unsqueeze(-1)
        return -torch.maximum(ratio * d, ratio.clamp(1 - clip_range, 1 + clip_range) * d).mean()
    return _loss(log_probs, deltas, mode, ratio, clip_range)


@wrong(
    "compute_loss",
    "only the clipped term; take the min of ratio * delta and clamp(ratio, 1 - clip_range, 1 + clip_range) * delta",
)
def loss_only_the_clipped_term(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    if mode == "clipped":
        return -(ratio.clamp(1 - clip_range, 1 + clip_range) * deltas.detach().unsqueeze(-1)).mean()
    return _loss(log_probs, deltas, mode, ratio, clip_range)


@wrong("compute_loss", "sum instead of mean over every [batch, trial, pos] entry")
def loss_sum(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode, ratio, clip_range) * log_probs.numel()


@wrong(
    "compute_loss",
    "summed over a reply's positions before the mean; the loss is the mean over every [batch, trial, pos] entry",
)
def summed_over_positions_first(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    d = deltas.detach()
    if mode == "naive":
        return -(log_probs.sum(dim=-1) * d).mean()
    if mode == "unclipped":
        return -(ratio.sum(dim=-1) * d).mean()
    if mode == "clipped":
        d = d.unsqueeze(-1)
        return -torch.minimum(ratio * d, ratio.clamp(1 - clip_range, 1 + clip_range) * d).sum(dim=-1).mean()
    raise ValueError(mode)


@wrong(
    "compute_loss",
    "deltas broadcast along the position axis (deltas[:, None] is [batch, 1, trial]); a reply's delta goes to each of its positions: deltas[:, :, None]",
)
def deltas_on_the_position_axis(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    d = deltas.detach()[:, None]
    if mode == "naive":
        return -(log_probs * d).mean()
    if mode == "unclipped":
        return -(ratio * d).mean()
    if mode == "clipped":
        return -torch.minimum(ratio * d, ratio.clamp(1 - clip_range, 1 + clip_range) * d).mean()
    raise ValueError(mode)


@wrong(
    "compute_loss",
    "the log-ratio was clipped to [-clip_range, clip_range] before exp(): the ratio's bounds became "
    "[exp(-clip_range), exp(clip_range)]; clamp the ratio itself to [1 - clip_range, 1 + clip_range]",
)
def clipped_the_log_ratio(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    if mode != "clipped":
        return _loss(log_probs, deltas, mode, torch.exp(log_probs - _old(log_probs, old_log_probs)), clip_range)
    log_ratio = log_probs - _old(log_probs, old_log_probs)
    d = deltas.detach().unsqueeze(-1)
    clipped = log_ratio.clamp(-clip_range, clip_range).exp()
    return -torch.minimum(log_ratio.exp() * d, clipped * d).mean()


@wrong(
    "compute_loss",
    "clip_range's default is the lecture's 0.01 (a call without clip_range clips the ratio to [0.99, 1.01]), not 0.2",
    defaults={"clip_range": 0.2},
)
def clip_range_default_0_2(log_probs, deltas, mode, old_log_probs=None, clip_range=0.2):
    return KEY.lecture.compute_loss(log_probs, deltas, mode, old_log_probs, clip_range)


@wrong("compute_loss", "instead of raising ValueError")
def loss_unknown_mode_falls_back(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode if mode in ("naive", "unclipped") else "clipped", ratio, clip_range)


@wrong("compute_loss", "do not detach log_probs")
def loss_log_probs_detached(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    log_probs = log_probs.detach()
    ratio = torch.exp(log_probs - _old(log_probs, old_log_probs))
    return _loss(log_probs, deltas, mode, ratio, clip_range)


# compute_kl_penalty: lecture.py, TASKS.md §10.4


@right("compute_kl_penalty")
def expm1_nothing_detached(log_probs, ref_log_probs):
    d = ref_log_probs - log_probs
    return (torch.expm1(d) - d).sum(dim=-1).mean()


@right("compute_kl_penalty")
def r_minus_log_r(log_probs, ref_log_probs):
    r = torch.exp(ref_log_probs.detach() - log_probs)
    return (r - torch.log(r) - 1).sum(-1).mean()


@wrong(
    "compute_kl_penalty",
    "k3 of the log-ratio log_probs - ref_log_probs; k3 = exp(d) - d - 1 with d = ref_log_probs - log_probs",
)
def k3_of_the_swapped_log_ratio(log_probs, ref_log_probs):
    d = log_probs - ref_log_probs.detach()
    return (d.exp() - d - 1).sum(dim=-1).mean()


@wrong(
    "compute_kl_penalty",
    "k3 with + d: exp(d) - d - 1 (d = ref_log_probs - log_probs) is >= 0 at every position; exp(d) + d - 1 goes negative",
)
def k3_middle_sign_swapped(log_probs, ref_log_probs):
    d = ref_log_probs.detach() - log_probs
    return (d.exp() + d - 1).sum(dim=-1).mean()


@wrong("compute_kl_penalty", "wrong sign: k3 = exp(d) - d - 1 is >= 0; this is its negative")
def k3_negated(log_probs, ref_log_probs):
    d = ref_log_probs.detach() - log_probs
    return (1 + d - d.exp()).sum(dim=-1).mean()


@wrong("compute_kl_penalty", "k1 (log_probs - ref_log_probs) instead of k3")
def k1_instead_of_k3_penalty(log_probs, ref_log_probs):
    return (log_probs - ref_log_probs.detach()).sum(dim=-1).mean()


@wrong(
    "compute_kl_penalty",
    "mean over a reply's positions; k3 is summed over the last dim (positions), then averaged over the rest",
)
def kl_mean_over_positions(log_probs, ref_log_probs):
    d = ref_log_probs.detach() - log_probs
    return (d.exp() - d - 1).mean()


@wrong(
    "compute_kl_penalty",
    "summed over every entry; sum over the last dim (positions) only, then average over the rest",
)
def kl_sum_over_everything(log_probs, ref_log_probs):
    d = ref_log_probs.detach() - log_probs
    return (d.exp() - d - 1).sum()


@wrong("compute_kl_penalty", "do not detach log_probs")
def kl_log_probs_detached(log_probs, ref_log_probs):
    d = ref_log_probs - log_probs.detach()
    return (d.exp() - d - 1).sum(dim=-1).mean()


# reply_logps and reference_logps: dpo.py, TASKS.md §12.2


def _token_logps(model, input_ids, attention_mask):
    """[batch, seq - 1]: log pi(x_t | x_<t) for t = 1 .. seq - 1 (the logits at t - 1 predict the token at t)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)


def _reply_mask(input_ids, attention_mask, prompt_lengths):
    """[batch, seq] bool: the reply's real tokens (after the prompt, attention_mask 1)."""
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)
    return (positions >= prompt_lengths[:, None]) & attention_mask.bool()


@right("reply_logps")
def cross_entropy_none(model, input_ids, attention_mask, prompt_lengths):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    labels = input_ids[:, 1:]
    nll = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), labels, reduction="none")
    mask = _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:]
    return -(nll * mask).sum(dim=-1)


@right("reply_logps")
def labels_minus_100(model, input_ids, attention_mask, prompt_lengths):
    labels = input_ids.masked_fill(~_reply_mask(input_ids, attention_mask, prompt_lengths), -100)[:, 1:]
    logits = model(input_ids, attention_mask=attention_mask).logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    return -nll.view(labels.shape).sum(-1)


@right("reply_logps")
def explicit_position_ids_and_a_multiplied_mask(model, input_ids, attention_mask, prompt_lengths):
    positions = torch.arange(input_ids.shape[1]).expand_as(input_ids)  # rows are flush left: the default ones
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions).logits
    logps = torch.log_softmax(logits, dim=-1)[:, :-1].gather(2, input_ids[:, 1:].unsqueeze(2)).squeeze(2)
    return (logps * _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:].to(logps.dtype)).sum(1)


@right("reply_logps")
def no_attention_mask_to_the_model_row_by_row(model, input_ids, attention_mask, prompt_lengths):
    # Right padding comes after every real token: a causal model's logits there are the same without the mask.
    logps = torch.log_softmax(model(input_ids).logits, dim=-1)
    out = []
    for i in range(input_ids.shape[0]):
        end = int(attention_mask[i].sum())
        t = torch.arange(int(prompt_lengths[i]), end)
        out.append(logps[i, t - 1, input_ids[i, t]].sum())
    return torch.stack(out)


@wrong("reply_logps", "mean over the reply's tokens; log pi(reply | prompt) is their sum")
def mean_over_reply_tokens(model, input_ids, attention_mask, prompt_lengths):
    mask = _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:]
    return (_token_logps(model, input_ids, attention_mask) * mask).sum(-1) / mask.sum(-1)


@wrong(
    "reply_logps",
    "padding counted: every position after the prompt was summed; count only those that attention_mask marks 1",
)
def padding_counted(model, input_ids, attention_mask, prompt_lengths):
    positions = torch.arange(1, input_ids.shape[1])
    mask = positions >= prompt_lengths[:, None]
    return (_token_logps(model, input_ids, attention_mask) * mask).sum(-1)


@wrong(
    "reply_logps",
    "real tokens told from padding by their id: GPT-2 pads with the end-of-text id, so the reply's own "
    "end-of-text token was dropped (or a real token with the pad id); tell padding by attention_mask == 0",
)
def end_of_text_dropped_as_padding(model, input_ids, attention_mask, prompt_lengths):
    positions = torch.arange(1, input_ids.shape[1])
    mask = (positions >= prompt_lengths[:, None]) & (input_ids[:, 1:] != model.config.pad_token_id)
    return (_token_logps(model, input_ids, attention_mask) * mask).sum(-1)


@wrong(
    "reply_logps",
    "logits not shifted: the token at position t was scored by logits[t]; the logits at t - 1 predict it",
)
def logits_not_shifted(model, input_ids, attention_mask, prompt_lengths):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    logps = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[..., None]).squeeze(-1)
    return (logps * _reply_mask(input_ids, attention_mask, prompt_lengths)).sum(-1)


@wrong(
    "reply_logps",
    "mask not shifted with the labels: with labels input_ids[:, 1:], take mask[:, 1:] too (mask[:, :-1] "
    "drops the reply's first token and counts the position after its last)",
)
def mask_not_shifted(model, input_ids, attention_mask, prompt_lengths):
    mask = _reply_mask(input_ids, attention_mask, prompt_lengths)[:, :-1]
    return (_token_logps(model, input_ids, attention_mask) * mask).sum(-1)


@wrong("reply_logps", "prompt tokens counted; sum over the reply's tokens only (positions t >= prompt_lengths)")
def prompt_counted(model, input_ids, attention_mask, prompt_lengths):
    return (_token_logps(model, input_ids, attention_mask) * attention_mask[:, 1:]).sum(-1)


@wrong("reply_logps", "raw logits summed; a token's log-probability is log_softmax(logits)[token]")
def raw_logits(model, input_ids, attention_mask, prompt_lengths):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    picked = logits.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return (picked * _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:]).sum(-1)


@wrong("reply_logps", "probabilities (softmax) summed; a token's log-probability is log_softmax(logits)[token]")
def probabilities(model, input_ids, attention_mask, prompt_lengths):
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1]
    picked = torch.softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return (picked * _reply_mask(input_ids, attention_mask, prompt_lengths)[:, 1:]).sum(-1)


@wrong("reply_logps", "switched `model` to train mode")
def switches_to_train_mode(model, input_ids, attention_mask, prompt_lengths):
    model.train()
    return KEY.dpo.reply_logps(model, input_ids, attention_mask, prompt_lengths)


@wrong("reply_logps", "switched `model` to eval mode")
def switches_to_eval_mode(model, input_ids, attention_mask, prompt_lengths):
    model.eval()
    return KEY.dpo.reply_logps(model, input_ids, attention_mask, prompt_lengths)


@wrong("reply_logps", "the result carries no gradient to the parameters of `model`")
def reply_under_no_grad(model, input_ids, attention_mask, prompt_lengths):
    with torch.no_grad():
        return KEY.dpo.reply_logps(model, input_ids, attention_mask, prompt_lengths)


@wrong("reply_logps", "in place")
def prompt_zeroed_in_the_mask_in_place(model, input_ids, attention_mask, prompt_lengths):
    logps = _token_logps(model, input_ids, attention_mask)
    for i, length in enumerate(prompt_lengths.tolist()):
        attention_mask[i, :length] = 0
    return (logps * attention_mask[:, 1:]).sum(-1)


@right("reference_logps")
def inference_mode(ref_model, input_ids, attention_mask, prompt_lengths):
    ref_model.eval()
    with torch.inference_mode():
        return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)


@right("reference_logps")
def parameters_frozen(ref_model, input_ids, attention_mask, prompt_lengths):
    ref_model.eval().requires_grad_(False)
    return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)


@right("reference_logps")
def result_detached(ref_model, input_ids, attention_mask, prompt_lengths):
    ref_model.eval()
    return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths).detach()


@wrong("reference_logps", "the reference is frozen")
def reference_not_frozen(ref_model, input_ids, attention_mask, prompt_lengths):
    ref_model.eval()
    return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)


@wrong("reference_logps", "in train mode, with its dropout on")
def reference_with_dropout_on(ref_model, input_ids, attention_mask, prompt_lengths):
    with torch.no_grad():
        return KEY.dpo.reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)


# dpo_loss: dpo.py, TASKS.md §12.3


def _dpo(chosen_logratios, rejected_logratios, beta):
    """The key's outputs from the two log-ratios: for the variants whose mistake is in a log-ratio."""
    losses = -torch.nn.functional.logsigmoid(beta * (chosen_logratios - rejected_logratios))
    return losses, beta * chosen_logratios.detach(), beta * rejected_logratios.detach()


@right("dpo_loss")
def softplus_rewards_not_detached(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    chosen_rewards = beta * (policy_chosen_logps - ref_chosen_logps)
    rejected_rewards = beta * (policy_rejected_logps - ref_rejected_logps)
    return torch.nn.functional.softplus(rejected_rewards - chosen_rewards), chosen_rewards, rejected_rewards


@right("dpo_loss")
def naive_log_of_sigmoid(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    # Accurate while |beta * margin| <= ~20, as in every graded case; logsigmoid stays finite beyond.
    logits = (policy_chosen_logps - policy_rejected_logps) - (ref_chosen_logps - ref_rejected_logps)  # TRL's form
    losses = -torch.log(torch.sigmoid(beta * logits))
    return losses, beta * (policy_chosen_logps - ref_chosen_logps), beta * (policy_rejected_logps - ref_rejected_logps)


@right("dpo_loss")
def binary_cross_entropy_with_logits(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    chosen = beta * (policy_chosen_logps - ref_chosen_logps.detach())
    rejected = beta * (policy_rejected_logps - ref_rejected_logps.detach())
    margin = chosen - rejected
    losses = torch.nn.functional.binary_cross_entropy_with_logits(margin, torch.ones_like(margin), reduction="none")
    return losses, chosen.detach(), rejected.detach()


@wrong(
    "dpo_loss",
    "beta on one side only: beta multiplies the whole margin, beta * (chosen log-ratio - rejected log-ratio)",
)
def beta_on_one_side(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    losses = -torch.nn.functional.logsigmoid(beta * chosen - rejected)
    return losses, beta * chosen.detach(), beta * rejected.detach()


@wrong("dpo_loss", "beta outside the log-sigmoid; it scales the margin inside: -logsigmoid(beta * margin)")
def beta_outside(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    losses = -beta * torch.nn.functional.logsigmoid(chosen - rejected)
    return losses, beta * chosen.detach(), beta * rejected.detach()


@wrong(
    "dpo_loss",
    "the margin's sign flipped: the loss is -logsigmoid(beta * (chosen log-ratio - rejected log-ratio)), "
    "small when the chosen reply gained more",
)
def margin_sign_flipped(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    losses = -torch.nn.functional.logsigmoid(beta * (rejected - chosen))
    return losses, beta * chosen.detach(), beta * rejected.detach()


@wrong(
    "dpo_loss",
    "policy and reference swapped: a log-ratio is policy minus reference, log pi(y|x) - log pi_ref(y|x)",
)
def policy_and_reference_swapped(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    return _dpo(ref_chosen_logps - policy_chosen_logps, ref_rejected_logps - policy_rejected_logps, beta)


@wrong(
    "dpo_loss",
    "the references crossed: the chosen reply's log-ratio subtracts ref_chosen_logps, the rejected one's ref_rejected_logps",
)
def references_crossed(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    return _dpo(policy_chosen_logps - ref_rejected_logps, policy_rejected_logps - ref_chosen_logps, beta)


@wrong("dpo_loss", "sigmoid instead of log-sigmoid: the loss is -logsigmoid(beta * margin)")
def sigmoid_instead_of_log_sigmoid(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    return -torch.sigmoid(beta * (chosen - rejected)), beta * chosen.detach(), beta * rejected.detach()


@wrong("dpo_loss", "one value per row (per pair, per reply), not their mean")
def mean_of_the_losses(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    losses, chosen, rejected = _dpo(
        policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps, beta
    )
    return losses.mean(), chosen, rejected


@wrong("dpo_loss", "rewards without beta: a reward is beta * (log pi - log pi_ref)")
def rewards_without_beta(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    chosen, rejected = policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps
    return _dpo(chosen, rejected, beta)[0], chosen.detach(), rejected.detach()


@wrong("dpo_loss", "rewards without the reference: a reward is beta * (log pi - log pi_ref), not beta * log pi")
def rewards_without_the_reference(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1
):
    losses = _dpo(policy_chosen_logps - ref_chosen_logps, policy_rejected_logps - ref_rejected_logps, beta)[0]
    return losses, beta * policy_chosen_logps.detach(), beta * policy_rejected_logps.detach()


@wrong(
    "dpo_loss",
    "the reference terms were dropped: the margin is (pi_c - ref_c) - (pi_r - ref_r), not pi_c - pi_r",
)
def reference_dropped(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    losses = -torch.nn.functional.logsigmoid(beta * (policy_chosen_logps - policy_rejected_logps))
    return losses, beta * policy_chosen_logps.detach(), beta * policy_rejected_logps.detach()


@wrong("dpo_loss", "do not detach policy_chosen_logps")
def losses_detached(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    return _dpo(
        (policy_chosen_logps - ref_chosen_logps).detach(), (policy_rejected_logps - ref_rejected_logps).detach(), beta
    )
