"""The one catalog of student mistakes, and of right answers written differently.

This is the only place a mistake is written. Each :class:`Variant` is the body of one graded function
as a student might write it (the code after the docstring, with the function's own parameter names),
and its verdict: a "wrong" variant must fail the graded cases with a message that contains
``diagnosis``, a "right" one must pass them all. :mod:`instructor.mutations` runs every variant
in-process, in place of the key's function (the rest of the key module stays, so a variant may call
``masked_mean``).

The graded cases record what each wrong variant returns on their inputs (:mod:`instructor.cases`),
so a student's function that returns the same is told the variant's ``diagnosis``: the whole
sentence the student reads after "This matches a common mistake:". A diagnosis the generic checks
already give (NaN, shape, dtype, gradient, in-place) is a few words of their message instead.

Order is precedence: when two wrong variants return the same on a case, only the first is recorded
there, and a result that matches two recorded mistakes is named by the first. So each function's
wrong variants go from the most specific to the most general; for a function returning a tuple,
mistakes in a later part (e.g. only the returns of ``compute_gae``) come first.

To catalogue a new mistake: add a Variant below, then ``python -m instructor fixtures`` and
``python -m instructor mutations``.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Variant:
    function: str  # the graded function it replaces
    verdict: str  # "wrong" or "right"
    name: str  # a few words, unique per function
    body: str  # the code after the docstring, not indented
    diagnosis: str = ""  # wrong only: words the failure message must contain


CATALOG: tuple[Variant, ...] = (
    Variant(
        "compute_advantages",
        "right",
        "no_grad block",
        """with torch.no_grad():
    a = rewards - values
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
    ),
    Variant(
        "compute_advantages",
        "right",
        "std_mean",
        """a = rewards - values.detach()
if not normalize:
    return a
std, mean = torch.std_mean(a)
return (a - mean) / (std + eps)""",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "normalize ignored",
        """a = rewards - values.detach()
return (a - a.mean()) / (a.std() + eps)""",
        "normalize flag ignored (with normalize=False return rewards - values unchanged)",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "never normalizes",
        """return rewards - values.detach()""",
        "normalize flag ignored (with normalize=False return rewards - values unchanged)",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "wrong sign",
        """a = values.detach() - rewards
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
        "wrong sign (A = rewards - values, not values - rewards)",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "population std",
        """a = rewards - values.detach()
if normalize:
    a = (a - a.mean()) / (a.std(unbiased=False) + eps)
return a""",
        "population std (use torch's default unbiased std, as a.std())",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "no mean subtraction",
        """a = rewards - values.detach()
if normalize:
    a = a / (a.std() + eps)
return a""",
        "divided by the std without subtracting the mean first",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "mean subtracted, no std",
        """a = rewards - values.detach()
if normalize:
    a = a - a.mean()
return a""",
        "subtracted the mean but did not divide by the std",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "no value baseline",
        """a = rewards
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
        "rewards alone (the value baseline V(s) was not subtracted)",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "missing detach",
        """a = rewards - values
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
        "missing detach",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "no eps",
        """a = rewards - values.detach()
if normalize:
    a = (a - a.mean()) / a.std()
return a""",
        "NaN",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "in-place",
        """rewards -= values.detach()
if normalize:
    rewards -= rewards.mean()
    rewards /= rewards.std() + eps
return rewards""",
        "in place",
    ),
    Variant(
        "compute_advantages",
        "wrong",
        "float32 cast",
        """a = (rewards - values.detach()).float()
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
        "dtype",
    ),
    Variant(
        "ppo_clip_loss",
        "right",
        "max of negatives",
        """ratio = (new_logprobs - old_logprobs.detach()).exp()
a = advantages.detach()
return torch.max(-ratio * a, -torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    Variant(
        "ppo_clip_loss",
        "right",
        "where form",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
clipped = torch.clip(ratio, 1.0 - clip_range, 1.0 + clip_range)
obj = torch.where(ratio * a < clipped * a, ratio * a, clipped * a)
return -obj.sum() / obj.numel()""",
    ),
    Variant(
        "ppo_clip_loss",
        "right",
        "advantages not detached (they carry no gradient in the pipeline)",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    Variant(
        "ppo_clip_loss",
        "right",
        "old not detached (it carries no gradient in the pipeline)",
        """ratio = torch.exp(new_logprobs - old_logprobs)
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    Variant(
        "ppo_clip_loss",
        "right",
        "CleanRL form, nothing detached",
        """ratio = (new_logprobs - old_logprobs).exp()
pg_loss1 = -advantages * ratio
pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
return torch.max(pg_loss1, pg_loss2).mean()""",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "wrong sign",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
        "wrong sign (the loss is MINUS the mean of the clipped objective)",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "max instead of min",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.max(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
        "max instead of min (PPO keeps the smaller, pessimistic objective)",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "no clip",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
return -(ratio * advantages.detach()).mean()""",
        "no clipping (the ratio must be clamped to [1 - clip_range, 1 + clip_range])",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "only the clipped term",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
return -(ratio.clamp(1 - clip_range, 1 + clip_range) * advantages.detach()).mean()""",
        "only the clipped term (take the min of the clipped and unclipped terms)",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "sum",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).sum()""",
        "sum instead of mean over the batch",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "inverted ratio",
        """ratio = torch.exp(old_logprobs.detach() - new_logprobs)
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
        "ratio inverted (ratio = exp(new_logprobs - old_logprobs), not old - new)",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "ratio without exp",
        """ratio = new_logprobs - old_logprobs.detach()
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
        "ratio without exp (ratio = exp(new - old); the log-probs are logs)",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "clamp around 0",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(-clip_range, clip_range) * a).mean()""",
        "clamp range is [-clip_range, clip_range] instead of [1 - clip_range, 1 + clip_range]",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "fixed 0.2",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(0.8, 1.2) * a).mean()""",
        "clip_range ignored (a fixed 0.2 is used instead of the clip_range argument)",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "min of ratios",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -(torch.min(ratio, ratio.clamp(1 - clip_range, 1 + clip_range)) * a).mean()""",
        "min of the two ratios times A (take the min of the two products ratio * A and clamp(ratio, 1 - clip_range, 1 + clip_range) * A)",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "exp ratio of probs",
        """ratio = torch.exp(new_logprobs) / torch.exp(old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
        "exp(new) / exp(old)",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "clipped ratio detached",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.detach().clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
        "the clipped ratio was detached (clamp the ratio itself: inside [1 - clip_range, 1 + clip_range] the clipped term passes gradient too)",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "new_logprobs detached",
        """ratio = torch.exp(new_logprobs.detach() - old_logprobs)
return -torch.min(ratio * advantages, ratio.clamp(1 - clip_range, 1 + clip_range) * advantages).mean()""",
        "do not detach new_logprobs",
    ),
    Variant(
        "ppo_clip_loss",
        "wrong",
        "no mean",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)""",
        "wrong output shape",
    ),
    Variant(
        "compute_group_advantages",
        "right",
        "loop over groups",
        """out = []
for i in range(0, rewards.numel(), group_size):
    g = rewards[i : i + group_size]
    a = g - g.mean()
    if normalize:
        a = a / (g.std() + eps)
    out.append(a)
return torch.cat(out)""",
    ),
    Variant(
        "compute_group_advantages",
        "right",
        "repeat_interleave stats",
        """g = rewards.reshape(-1, group_size)
mean = g.mean(1).repeat_interleave(group_size)
a = rewards - mean
if normalize:
    a = a / (g.std(1).repeat_interleave(group_size) + eps)
return a""",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "wrong grouping order",
        """g = rewards.view(group_size, -1)
a = g - g.mean(dim=0, keepdim=True)
if normalize:
    a = a / (g.std(dim=0, keepdim=True) + eps)
return a.reshape(-1)""",
        "wrong grouping order: the K replies of one prompt are consecutive (reshape to (B, K) = (-1, group_size), not (group_size, -1))",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "normalize ignored",
        """g = rewards.view(-1, group_size)
a = (g - g.mean(dim=1, keepdim=True)) / (g.std(dim=1, keepdim=True) + eps)
return a.reshape(-1)""",
        "normalize flag ignored",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "never normalizes",
        """g = rewards.view(-1, group_size)
return (g - g.mean(dim=1, keepdim=True)).reshape(-1)""",
        "normalize flag ignored",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "wrong sign",
        """g = rewards.view(-1, group_size)
a = g.mean(dim=1, keepdim=True) - g
if normalize:
    a = a / (g.std(dim=1, keepdim=True) + eps)
return a.reshape(-1)""",
        "wrong sign (A = r - baseline)",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "global mean baseline",
        """a = rewards - rewards.mean()
if normalize:
    a = a / (rewards.std() + eps)
return a""",
        "baseline is the whole batch's mean instead of each group's mean",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "batch std",
        """g = rewards.view(-1, group_size)
a = (g - g.mean(dim=1, keepdim=True)).reshape(-1)
if normalize:
    a = a / (rewards.std() + eps)
return a""",
        "normalized by the batch std instead of each group's own std (GRPO divides by the group's std)",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "task-book flatten then batch normalize",
        """g = rewards.view(-1, group_size)
a = (g - g.mean(dim=1, keepdim=True)).reshape(-1)
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
        "normalized the centred advantages over the whole batch instead of per group",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "population std",
        """g = rewards.view(-1, group_size)
a = g - g.mean(dim=1, keepdim=True)
if normalize:
    a = a / (g.std(dim=1, keepdim=True, unbiased=False) + eps)
return a.reshape(-1)""",
        "population std (use torch's default unbiased std)",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "no eps",
        """g = rewards.view(-1, group_size)
a = g - g.mean(dim=1, keepdim=True)
if normalize:
    a = a / g.std(dim=1, keepdim=True)
return a.reshape(-1)""",
        "NaN",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "not flattened",
        """g = rewards.view(-1, group_size)
a = g - g.mean(dim=1, keepdim=True)
if normalize:
    a = a / (g.std(dim=1, keepdim=True) + eps)
return a""",
        "wrong output shape",
    ),
    Variant(
        "compute_group_advantages",
        "wrong",
        "in-place",
        """g = rewards.view(-1, group_size)
g -= g.mean(dim=1, keepdim=True).clone()
if normalize:
    g /= g.std(dim=1, keepdim=True) + eps
return rewards""",
        "in place",
    ),
    Variant(
        "grpo_loss",
        "right",
        "explicit sum / n",
        """return -(logprobs * advantages.detach()).sum() / logprobs.numel()""",
    ),
    Variant(
        "grpo_loss",
        "wrong",
        "wrong sign",
        """return (advantages.detach() * logprobs).mean()""",
        "wrong sign (loss = -mean(A * logprobs))",
    ),
    Variant(
        "grpo_loss",
        "wrong",
        "sum",
        """return -(advantages.detach() * logprobs).sum()""",
        "sum instead of mean over the batch",
    ),
    Variant(
        "grpo_loss",
        "wrong",
        "probs",
        """return -(advantages.detach() * logprobs.exp()).mean()""",
        "used exp(logprobs) (probabilities) instead of log-probs",
    ),
    Variant(
        "grpo_loss",
        "wrong",
        "advantages left out",
        """return -logprobs.mean()""",
        "advantages left out (plain mean of log-probs)",
    ),
    Variant(
        "grpo_loss",
        "wrong",
        "missing detach",
        """return -(advantages * logprobs).mean()""",
        "missing detach",
    ),
    Variant(
        "grpo_loss",
        "wrong",
        "logprobs detached",
        """return -(advantages.detach() * logprobs.detach()).mean()""",
        "do not detach logprobs",
    ),
    Variant(
        "grpo_loss",
        "wrong",
        "no mean",
        """return -(advantages.detach() * logprobs)""",
        "wrong output shape",
    ),
    Variant(
        "masked_mean",
        "right",
        "where + count",
        """count = mask.sum(dim=dim).clamp(min=1)
return torch.where(mask > 0, values, torch.zeros_like(values)).sum(dim=dim) / count""",
    ),
    Variant(
        "masked_mean",
        "right",
        "clamp_min on float",
        """return (values * mask).sum(dim) / torch.clamp(mask.sum(dim), min=1.0)""",
    ),
    Variant(
        "masked_mean",
        "wrong",
        "plain mean over padding",
        """return (values * mask).mean() if dim is None else (values * mask).mean(dim=dim)""",
        "plain mean: the padding was averaged in too (divide by sum(mask), not by the number of columns)",
    ),
    Variant(
        "masked_mean",
        "wrong",
        "mask not applied to the sum",
        """return values.sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)""",
        "the mask was not applied to the sum (padding values were added)",
    ),
    Variant(
        "masked_mean",
        "wrong",
        "mean of row means",
        """row = (values * mask).sum(1) / mask.sum(1).clamp(min=1)
return row.mean() if dim is None else row""",
        "mean of the per-row means (with dim=None, one mean over every real token of the batch)",
    ),
    Variant(
        "masked_mean",
        "wrong",
        "dim ignored",
        """return (values * mask).sum() / mask.sum().clamp(min=1)""",
        "wrong output shape",
    ),
    Variant(
        "masked_mean",
        "wrong",
        "no clamp (all-masked row is NaN)",
        """return (values * mask).sum(dim=dim) / mask.sum(dim=dim)""",
        "clamp the denominator",
    ),
    Variant(
        "masked_mean",
        "wrong",
        "in-place",
        """values.mul_(mask)
return values.sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)""",
        "in-place",
    ),
    Variant(
        "per_token_kl",
        "right",
        "log of ratio",
        """r = torch.exp(ref_logprobs - logprobs)
if estimator == "k1":
    return -torch.log(r) * mask
if estimator == "k3":
    return (r - 1 - torch.log(r)) * mask
raise ValueError(estimator)""",
    ),
    Variant(
        "per_token_kl",
        "right",
        "where",
        """d = logprobs - ref_logprobs
kl = d if estimator == "k1" else torch.expm1(-d) + d
return torch.where(mask > 0, kl, torch.zeros_like(kl))""",
    ),
    Variant(
        "per_token_kl",
        "wrong",
        "estimator ignored (always k3)",
        """d = logprobs - ref_logprobs
return (torch.exp(-d) - 1 + d) * mask""",
        "computed k3 although estimator='k1' was asked for",
    ),
    Variant(
        "per_token_kl",
        "wrong",
        "estimator ignored (always k1)",
        """return (logprobs - ref_logprobs) * mask""",
        "computed k1 although estimator='k3' was asked for",
    ),
    Variant(
        "per_token_kl",
        "wrong",
        "mask ignored",
        """d = logprobs - ref_logprobs
return d if estimator == "k1" else torch.exp(-d) - 1 + d""",
        "masked positions must be 0 (multiply by the mask)",
    ),
    Variant(
        "per_token_kl",
        "wrong",
        "k2 whatever the estimator",
        """d = logprobs - ref_logprobs
return d**2 / 2 * mask""",
        "k2 = (log ratio)^2 / 2 instead of the estimator asked for",
    ),
    Variant(
        "per_token_kl",
        "wrong",
        "k1 sign",
        """d = ref_logprobs - logprobs
kl = d if estimator == "k1" else torch.exp(d) - 1 - d
return kl * mask""",
        "KL sign: k1 = logprobs - ref_logprobs = log(pi / pi_ref), not ref - logprobs",
    ),
    Variant(
        "per_token_kl",
        "wrong",
        "k3 with r = pi / pi_ref",
        """d = logprobs - ref_logprobs
kl = d if estimator == "k1" else torch.exp(d) - 1 - d
return kl * mask""",
        "k3 with r = pi / pi_ref; it is r = pi_ref / pi = exp(ref_logprobs - logprobs)",
    ),
    Variant(
        "per_token_kl",
        "wrong",
        "k3 negative",
        """d = logprobs - ref_logprobs
kl = d if estimator == "k1" else 1 - torch.exp(-d) - d
return kl * mask""",
        "k3 sign: (r - 1) - log r is >= 0 at every token; this is its negative",
    ),
    Variant(
        "compute_gae",
        "right",
        "lists and stack",
        """values = values.detach()
n, t_max = rewards.shape
adv = [None] * t_max
last = torch.zeros_like(rewards[:, 0])
for t in range(t_max - 1, -1, -1):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    delta = rewards[:, t] + gamma * nv - values[:, t]
    last = (delta + gamma * lam * last) * mask[:, t]
    adv[t] = last
advantages = torch.stack(adv, dim=1)
return advantages, (advantages + values) * mask""",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "returns = advantages",
        """values = values.detach()
t_max = rewards.shape[1]
adv = torch.zeros_like(rewards)
last = torch.zeros_like(rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
    adv[:, t] = last
return adv, adv""",
        "returns = A (the value target is R_t = A_t + V_t)",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "Monte Carlo returns",
        """values = values.detach()
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
return adv, returns""",
        "returns = discounted sum of rewards (the value target is R_t = A_t + V_t)",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "padding keeps its return",
        """values = values.detach()
t_max = rewards.shape[1]
adv = torch.zeros_like(rewards)
last = torch.zeros_like(rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
    adv[:, t] = last
return adv, adv + values""",
        "returns on the padding: R_t = (A_t + V_t) * mask is 0 after a reply's last real token",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "left to right, previous token as the next",
        """values = values.detach()
t_max = rewards.shape[1]
adv = torch.zeros_like(rewards)
last = torch.zeros_like(rewards[:, 0])
for t in range(t_max):
    prev_v = values[:, t - 1] * mask[:, t - 1] if t > 0 else torch.zeros_like(last)
    last = (rewards[:, t] + gamma * prev_v - values[:, t] + gamma * lam * last) * mask[:, t]
    adv[:, t] = last
return adv, (adv + values) * mask""",
        "GAE run left to right: A_t needs A_{t+1}, so start at the last token and go backwards",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "no mask at all",
        """values = values.detach()
t_max = rewards.shape[1]
adv = torch.zeros_like(rewards)
last = torch.zeros_like(rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last
    adv[:, t] = last
return adv, adv + values""",
        "GAE ran into the padding: after a reply's last real token, V_{t+1} and A_{t+1} are 0 (use the mask)",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "lambda missing",
        """values = values.detach()
t_max = rewards.shape[1]
adv = torch.zeros_like(rewards)
last = torch.zeros_like(rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * last) * mask[:, t]
    adv[:, t] = last
return adv, (adv + values) * mask""",
        "lam left out: A_t = delta_t + gamma * lam * A_{t+1}",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "gamma and lam swapped",
        """values = values.detach()
t_max = rewards.shape[1]
adv = torch.zeros_like(rewards)
last = torch.zeros_like(rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = (rewards[:, t] + lam * nv - values[:, t] + lam * gamma * last) * mask[:, t]
    adv[:, t] = last
return adv, (adv + values) * mask""",
        "gamma and lam swapped or gamma left out of the A recursion",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "no bootstrap",
        """values = values.detach()
t_max = rewards.shape[1]
adv = torch.zeros_like(rewards)
last = torch.zeros_like(rewards[:, 0])
for t in reversed(range(t_max)):
    last = (rewards[:, t] - values[:, t] + gamma * lam * last) * mask[:, t]
    adv[:, t] = last
return adv, (adv + values) * mask""",
        "no bootstrap: delta_t = r_t + gamma * V_{t+1} - V_t needs the next value",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "left to right",
        """values = values.detach()
t_max = rewards.shape[1]
adv = torch.zeros_like(rewards)
last = torch.zeros_like(rewards[:, 0])
for t in range(t_max):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    delta = rewards[:, t] + gamma * nv - values[:, t]
    last = (delta + gamma * lam * last) * mask[:, t]
    adv[:, t] = last
return adv, (adv + values) * mask""",
        "GAE run left to right (t = 0, 1, ...): A_t needs A_{t+1}, so go from the last token backwards",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "runs into padding",
        """values = values.detach()
t_max = rewards.shape[1]
adv = torch.zeros_like(rewards)
last = torch.zeros_like(rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    delta = rewards[:, t] + gamma * nv - values[:, t]
    last = delta + gamma * lam * last
    adv[:, t] = last
return adv * mask, (adv + values) * mask""",
        "GAE ran into the padding: V_{t+1} and A_{t+1} after a reply's last real token must be 0 (multiply by the mask)",
    ),
    Variant(
        "compute_gae",
        "wrong",
        "missing detach",
        """t_max = rewards.shape[1]
adv = []
last = torch.zeros_like(rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = (rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
    adv.insert(0, last)
adv = torch.stack(adv, 1)
return adv, (adv + values) * mask""",
        "missing detach",
    ),
    Variant(
        "token_ppo_loss",
        "right",
        "no detach, own mean",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
n = mask.sum().clamp(min=1)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.maximum((new_values - returns) ** 2, (vc - returns) ** 2)
return (pg * mask).sum() / n, (vf * mask).sum() / n""",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "no ratio clipping",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -ratio * advantages
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(pg, mask), masked_mean(vf, mask)""",
        "no ratio clipping (clamp the ratio to [1 - clip_range, 1 + clip_range])",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "policy loss without the minus",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(pg, mask), masked_mean(vf, mask)""",
        "wrong sign (the policy loss is MINUS the clipped objective)",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "max instead of min",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.max(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(pg, mask), masked_mean(vf, mask)""",
        "max instead of min in the clipped surrogate",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "value min",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.min((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(pg, mask), masked_mean(vf, mask)""",
        "value loss keeps the smaller error (min); PPO keeps the larger one: max(unclipped, clipped)",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "no value clip",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
return masked_mean(pg, mask), masked_mean((new_values - returns) ** 2, mask)""",
        "value loss without clipping (clip new_values to old_values +- clip_range_value)",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "half value loss",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = 0.5 * torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(pg, mask), masked_mean(vf, mask)""",
        "value loss with a factor 1/2 (the book's value loss has none)",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "mean over padding",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return (pg * mask).mean(), (vf * mask).mean()""",
        "mean over padding: average over real tokens only (masked_mean)",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "per-reply mean",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(pg, mask, 1).mean(), masked_mean(vf, mask, 1).mean()""",
        "mean of per-reply means; token_ppo_loss averages over every real token of the batch",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "sum",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return (pg * mask).sum(), (vf * mask).sum()""",
        "sum instead of mean over tokens",
    ),
    Variant(
        "token_ppo_loss",
        "wrong",
        "returned in the other order",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(vf, mask), masked_mean(pg, mask)""",
        "the two losses in the wrong order: return (policy_loss, value_loss)",
    ),
    Variant(
        "grpo_clip_loss",
        "right",
        "no detach, explicit branches",
        """ratio = (logprobs - old_logprobs).exp()
a = advantages[:, None]
d = ref_logprobs - logprobs
l = -torch.minimum(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * (d.exp() - d - 1)
l = l * mask
if loss_type == "grpo":
    return (l.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
if loss_type == "dapo":
    return l.sum() / mask.sum().clamp(min=1)
if loss_type == "dr_grpo":
    return l.sum() / (l.shape[0] * max_tokens)
raise ValueError(loss_type)""",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "ratio against the reference",
        """ratio = torch.exp(logprobs - ref_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
        "ratio taken against the reference policy; the ratio is exp(logprobs - old_logprobs), the reference only enters the KL term",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "no clipping",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -ratio * a + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
        "no ratio clipping",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "surrogate without the minus",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
        "wrong sign (the loss is MINUS the clipped objective, plus beta * KL)",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "KL sign",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) - beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
        "KL sign: the loss ADDS beta * KL",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "beta ignored",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
        "beta ignored (the KL term is beta * k3)",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "k1 instead of k3",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k1")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
        "k1 (logprobs - ref_logprobs) instead of k3 in the KL term",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "mean over padding, KL not masked",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
d = ref_logprobs - logprobs
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * (d.exp() - d - 1)
return l.mean(dim=1).mean() if loss_type == "grpo" else l.mean() if loss_type == "dapo" else l.sum() / (mask.shape[0] * max_tokens)""",
        "mean over padding: only real tokens count",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "advantages on the token axis",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach()
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
        "advantages broadcast along the token axis: A_i belongs to row i (use advantages[:, None])",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "dapo's normalization for grpo",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask) if loss_type in ("grpo", "dapo") else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
        "dapo's normalization (one mean over all tokens) used for loss_type='grpo' (mean per reply, then over replies)",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "grpo's normalization for dapo",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type in ("grpo", "dapo") else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
        "grpo's normalization (mean per reply, then over replies) used for loss_type='dapo' (one mean over all tokens)",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "dr_grpo by columns",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / mask.numel()""",
        "dr_grpo divided by the T columns of the batch; divide by N * max_tokens",
    ),
    Variant(
        "grpo_clip_loss",
        "wrong",
        "mean over padding",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return l.mean(dim=1).mean() if loss_type == "grpo" else l.mean() if loss_type == "dapo" else l.sum() / (mask.shape[0] * max_tokens)""",
        "mean over padding: divide by the number of real tokens (masked_mean), not by the number of columns",
    ),
)


@cache
def compile_variant(variant: Variant) -> Callable:
    """The variant as a function: the key's signature and module globals, the variant's body."""
    from rlhf_practice.course import load_impl, module_of

    module_name = module_of(variant.function)
    module = load_impl("answer").module(module_name)
    key = getattr(module, variant.function)
    source = f"def {variant.function}{inspect.signature(key)}:\n" + textwrap.indent(variant.body, "    ") + "\n"
    namespace = dict(vars(module))
    exec(compile(source, f"<variant {variant.function}: {variant.name}>", "exec"), namespace)  # noqa: S102
    return namespace[variant.function]


def wrong_variants(function: str) -> list[Variant]:
    return [v for v in CATALOG if v.function == function and v.verdict == "wrong"]
