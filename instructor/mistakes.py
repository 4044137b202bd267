"""The one catalog of student mistakes, and of right answers written differently.

This is the only place a mistake is written. Each variant is a graded function as a student might
write it: a plain function with the graded function's parameters (names, order and defaults, checked
against the answer key's when it is registered), marked with its verdict. ``@wrong(function,
diagnosis)``: the variant must fail the graded cases with a message that contains ``diagnosis``;
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

import inspect
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


def _register(function: str, verdict: str, diagnosis: str = "") -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        key = getattr(KEY.module(module_of(function)), function)
        if _parameters(fn) != _parameters(key):
            raise TypeError(
                f"variant {fn.__name__}{inspect.signature(fn)}: give it the parameters of the key's "
                f"{function}{inspect.signature(key)} (names, order and defaults)"
            )
        if any(v.name == fn.__name__ for v in CATALOG):
            raise ValueError(f"two variants are named {fn.__name__}")
        CATALOG.append(Variant(function, verdict, fn.__name__, fn, diagnosis))
        return fn

    return register


def wrong(function: str, diagnosis: str) -> Callable[[Callable], Callable]:
    """Catalogue a mistake in ``function``: the graded cases must fail it, naming ``diagnosis``."""
    return _register(function, "wrong", diagnosis)


def right(function: str) -> Callable[[Callable], Callable]:
    """Catalogue a right answer to ``function`` written differently: it must pass every graded case."""
    return _register(function, "right")


def wrong_variants(function: str) -> list[Variant]:
    return [v for v in CATALOG if v.function == function and v.verdict == "wrong"]


# compute_advantages: ppo.py, TASKS.md §1.2


@right("compute_advantages")
def no_grad_block(rewards, values, normalize=True, eps=1e-8):
    with torch.no_grad():
        a = rewards - values
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@right("compute_advantages")
def std_mean(rewards, values, normalize=True, eps=1e-8):
    a = rewards - values.detach()
    if not normalize:
        return a
    std, mean = torch.std_mean(a)
    return (a - mean) / (std + eps)


@wrong("compute_advantages", "normalize flag ignored (with normalize=False return rewards - values unchanged)")
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
def no_value_baseline(rewards, values, normalize=True, eps=1e-8):
    a = rewards
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_advantages", "missing detach")
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
def rewards_in_place(rewards, values, normalize=True, eps=1e-8):
    rewards -= values.detach()
    if normalize:
        rewards -= rewards.mean()
        rewards /= rewards.std() + eps
    return rewards


@wrong("compute_advantages", "dtype")
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
        a = g - g.mean()
        if normalize:
            a = a / (g.std() + eps)
        out.append(a)
    return torch.cat(out)


@right("compute_group_advantages")
def repeat_interleave_stats(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.reshape(-1, group_size)
    mean = g.mean(1).repeat_interleave(group_size)
    a = rewards - mean
    if normalize:
        a = a / (g.std(1).repeat_interleave(group_size) + eps)
    return a


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
