"""Check that the graded tests catch plausible student mistakes and accept correct variants.

    python scripts/mutation_check.py

Each entry below replaces the body of one graded function in a copy of the answer key; the graded
tests of that function must fail for every "wrong" entry and pass for every "right" one. Prints one
line per entry and the failure message pytest gave, and exits 1 if any verdict is unexpected.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.course import MODULES, TASKS  # noqa: E402

# (function, verdict, name, body) -- body is indented by 4 spaces when inserted.
CATALOG = [
    # compute_advantages
    (
        "compute_advantages",
        "right",
        "no_grad block",
        """with torch.no_grad():
    a = rewards - values
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
    ),
    (
        "compute_advantages",
        "right",
        "std_mean",
        """a = rewards - values.detach()
if not normalize:
    return a
std, mean = torch.std_mean(a)
return (a - mean) / (std + eps)""",
    ),
    (
        "compute_advantages",
        "wrong",
        "missing detach",
        """a = rewards - values
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
    ),
    (
        "compute_advantages",
        "wrong",
        "normalize ignored",
        """a = rewards - values.detach()
return (a - a.mean()) / (a.std() + eps)""",
    ),
    ("compute_advantages", "wrong", "never normalizes", """return rewards - values.detach()"""),
    (
        "compute_advantages",
        "wrong",
        "no eps",
        """a = rewards - values.detach()
if normalize:
    a = (a - a.mean()) / a.std()
return a""",
    ),
    (
        "compute_advantages",
        "wrong",
        "wrong sign",
        """a = values.detach() - rewards
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
    ),
    (
        "compute_advantages",
        "wrong",
        "population std",
        """a = rewards - values.detach()
if normalize:
    a = (a - a.mean()) / (a.std(unbiased=False) + eps)
return a""",
    ),
    (
        "compute_advantages",
        "wrong",
        "in-place",
        """rewards -= values.detach()
if normalize:
    rewards -= rewards.mean()
    rewards /= rewards.std() + eps
return rewards""",
    ),
    (
        "compute_advantages",
        "wrong",
        "float32 cast",
        """a = (rewards - values.detach()).float()
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
    ),
    (
        "compute_advantages",
        "wrong",
        "no mean subtraction",
        """a = rewards - values.detach()
if normalize:
    a = a / (a.std() + eps)
return a""",
    ),
    # ppo_clip_loss
    (
        "ppo_clip_loss",
        "right",
        "max of negatives",
        """ratio = (new_logprobs - old_logprobs.detach()).exp()
a = advantages.detach()
return torch.max(-ratio * a, -torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "right",
        "where form",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
clipped = torch.clip(ratio, 1.0 - clip_range, 1.0 + clip_range)
obj = torch.where(ratio * a < clipped * a, ratio * a, clipped * a)
return -obj.sum() / obj.numel()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "max instead of min",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.max(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "wrong sign",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "no clip",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
return -(ratio * advantages.detach()).mean()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "sum",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).sum()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "fixed 0.2",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(0.8, 1.2) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "exp ratio of probs",
        """ratio = torch.exp(new_logprobs) / torch.exp(old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "inverted ratio",
        """ratio = torch.exp(old_logprobs.detach() - new_logprobs)
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "right",
        "advantages not detached (they carry no gradient in the pipeline)",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "right",
        "old not detached (it carries no gradient in the pipeline)",
        """ratio = torch.exp(new_logprobs - old_logprobs)
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "no mean",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a)""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "clipped ratio detached",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -torch.min(ratio * a, ratio.detach().clamp(1 - clip_range, 1 + clip_range) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "min of ratios",
        """ratio = torch.exp(new_logprobs - old_logprobs.detach())
a = advantages.detach()
return -(torch.min(ratio, ratio.clamp(1 - clip_range, 1 + clip_range)) * a).mean()""",
    ),
    (
        "ppo_clip_loss",
        "right",
        "CleanRL form, nothing detached",
        """ratio = (new_logprobs - old_logprobs).exp()
pg_loss1 = -advantages * ratio
pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
return torch.max(pg_loss1, pg_loss2).mean()""",
    ),
    (
        "ppo_clip_loss",
        "wrong",
        "new_logprobs detached",
        """ratio = torch.exp(new_logprobs.detach() - old_logprobs)
return -torch.min(ratio * advantages, ratio.clamp(1 - clip_range, 1 + clip_range) * advantages).mean()""",
    ),
    # compute_group_advantages
    (
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
    (
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
    (
        "compute_group_advantages",
        "wrong",
        "wrong grouping order",
        """g = rewards.view(group_size, -1)
a = g - g.mean(dim=0, keepdim=True)
if normalize:
    a = a / (g.std(dim=0, keepdim=True) + eps)
return a.reshape(-1)""",
    ),
    (
        "compute_group_advantages",
        "wrong",
        "batch std",
        """g = rewards.view(-1, group_size)
a = (g - g.mean(dim=1, keepdim=True)).reshape(-1)
if normalize:
    a = a / (rewards.std() + eps)
return a""",
    ),
    (
        "compute_group_advantages",
        "wrong",
        "task-book flatten then batch normalize",
        """g = rewards.view(-1, group_size)
a = (g - g.mean(dim=1, keepdim=True)).reshape(-1)
if normalize:
    a = (a - a.mean()) / (a.std() + eps)
return a""",
    ),
    (
        "compute_group_advantages",
        "wrong",
        "no eps",
        """g = rewards.view(-1, group_size)
a = g - g.mean(dim=1, keepdim=True)
if normalize:
    a = a / g.std(dim=1, keepdim=True)
return a.reshape(-1)""",
    ),
    (
        "compute_group_advantages",
        "wrong",
        "normalize ignored",
        """g = rewards.view(-1, group_size)
a = (g - g.mean(dim=1, keepdim=True)) / (g.std(dim=1, keepdim=True) + eps)
return a.reshape(-1)""",
    ),
    (
        "compute_group_advantages",
        "wrong",
        "not flattened",
        """g = rewards.view(-1, group_size)
a = g - g.mean(dim=1, keepdim=True)
if normalize:
    a = a / (g.std(dim=1, keepdim=True) + eps)
return a""",
    ),
    (
        "compute_group_advantages",
        "wrong",
        "global mean baseline",
        """a = rewards - rewards.mean()
if normalize:
    a = a / (rewards.std() + eps)
return a""",
    ),
    (
        "compute_group_advantages",
        "wrong",
        "population std",
        """g = rewards.view(-1, group_size)
a = g - g.mean(dim=1, keepdim=True)
if normalize:
    a = a / (g.std(dim=1, keepdim=True, unbiased=False) + eps)
return a.reshape(-1)""",
    ),
    (
        "compute_group_advantages",
        "wrong",
        "in-place",
        """g = rewards.view(-1, group_size)
g -= g.mean(dim=1, keepdim=True).clone()
return rewards""",
    ),
    (
        "compute_group_advantages",
        "wrong",
        "nan_to_num masks nan but divides by group std w/o eps when normalize False",
        """g = rewards.view(-1, group_size)
a = g - g.mean(dim=1, keepdim=True)
a = a / (g.std(dim=1, keepdim=True) + eps)
return a.reshape(-1)""",
    ),
    # grpo_loss
    ("grpo_loss", "right", "explicit sum / n", """return -(logprobs * advantages.detach()).sum() / logprobs.numel()"""),
    ("grpo_loss", "wrong", "wrong sign", """return (advantages.detach() * logprobs).mean()"""),
    ("grpo_loss", "wrong", "sum", """return -(advantages.detach() * logprobs).sum()"""),
    ("grpo_loss", "wrong", "missing detach", """return -(advantages * logprobs).mean()"""),
    ("grpo_loss", "wrong", "no mean", """return -(advantages.detach() * logprobs)"""),
    ("grpo_loss", "wrong", "probs", """return -(advantages.detach() * logprobs.exp()).mean()"""),
    ("grpo_loss", "wrong", "logprobs detached", """return -(advantages.detach() * logprobs.detach()).mean()"""),
    # masked_mean
    (
        "masked_mean",
        "right",
        "where + count",
        """count = mask.sum(dim=dim).clamp(min=1)
return torch.where(mask > 0, values, torch.zeros_like(values)).sum(dim=dim) / count""",
    ),
    (
        "masked_mean",
        "right",
        "clamp_min on float",
        """return (values * mask).sum(dim) / torch.clamp(mask.sum(dim), min=1.0)""",
    ),
    (
        "masked_mean",
        "wrong",
        "no clamp (all-masked row is NaN)",
        """return (values * mask).sum(dim=dim) / mask.sum(dim=dim)""",
    ),
    (
        "masked_mean",
        "wrong",
        "plain mean over padding",
        """return (values * mask).mean() if dim is None else (values * mask).mean(dim=dim)""",
    ),
    (
        "masked_mean",
        "wrong",
        "mean of row means",
        """row = (values * mask).sum(1) / mask.sum(1).clamp(min=1)
return row.mean() if dim is None else row""",
    ),
    (
        "masked_mean",
        "wrong",
        "mask not applied to the sum",
        """return values.sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)""",
    ),
    (
        "masked_mean",
        "wrong",
        "in-place",
        """values.mul_(mask)
return values.sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)""",
    ),
    # per_token_kl
    (
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
    (
        "per_token_kl",
        "right",
        "where",
        """d = logprobs - ref_logprobs
kl = d if estimator == "k1" else torch.expm1(-d) + d
return torch.where(mask > 0, kl, torch.zeros_like(kl))""",
    ),
    (
        "per_token_kl",
        "wrong",
        "k1 sign",
        """d = ref_logprobs - logprobs
kl = d if estimator == "k1" else torch.exp(d) - 1 - d
return kl * mask""",
    ),
    (
        "per_token_kl",
        "wrong",
        "k3 with r = pi / pi_ref",
        """d = logprobs - ref_logprobs
kl = d if estimator == "k1" else torch.exp(d) - 1 - d
return kl * mask""",
    ),
    (
        "per_token_kl",
        "wrong",
        "k3 negative",
        """d = logprobs - ref_logprobs
kl = d if estimator == "k1" else 1 - torch.exp(-d) - d
return kl * mask""",
    ),
    (
        "per_token_kl",
        "wrong",
        "mask ignored",
        """d = logprobs - ref_logprobs
return d if estimator == "k1" else torch.exp(-d) - 1 + d""",
    ),
    (
        "per_token_kl",
        "wrong",
        "estimator ignored (always k3)",
        """d = logprobs - ref_logprobs
return (torch.exp(-d) - 1 + d) * mask""",
    ),
    (
        "per_token_kl",
        "wrong",
        "k2",
        """d = logprobs - ref_logprobs
return (d if estimator == "k1" else d**2 / 2) * mask""",
    ),
    # compute_gae
    (
        "compute_gae",
        "right",
        "lists and stack",
        """values = values.detach()
n, t_max = token_rewards.shape
adv = [None] * t_max
last = torch.zeros_like(token_rewards[:, 0])
for t in range(t_max - 1, -1, -1):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    delta = token_rewards[:, t] + gamma * nv - values[:, t]
    last = (delta + gamma * lam * last) * mask[:, t]
    adv[t] = last
advantages = torch.stack(adv, dim=1)
return advantages, (advantages + values) * mask""",
    ),
    (
        "compute_gae",
        "wrong",
        "left to right",
        """values = values.detach()
t_max = token_rewards.shape[1]
adv = torch.zeros_like(token_rewards)
last = torch.zeros_like(token_rewards[:, 0])
for t in range(t_max):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    delta = token_rewards[:, t] + gamma * nv - values[:, t]
    last = (delta + gamma * lam * last) * mask[:, t]
    adv[:, t] = last
return adv, (adv + values) * mask""",
    ),
    (
        "compute_gae",
        "wrong",
        "runs into padding",
        """values = values.detach()
t_max = token_rewards.shape[1]
adv = torch.zeros_like(token_rewards)
last = torch.zeros_like(token_rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    delta = token_rewards[:, t] + gamma * nv - values[:, t]
    last = delta + gamma * lam * last
    adv[:, t] = last
return adv * mask, (adv + values) * mask""",
    ),
    (
        "compute_gae",
        "wrong",
        "lambda missing",
        """values = values.detach()
t_max = token_rewards.shape[1]
adv = torch.zeros_like(token_rewards)
last = torch.zeros_like(token_rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = (token_rewards[:, t] + gamma * nv - values[:, t] + gamma * last) * mask[:, t]
    adv[:, t] = last
return adv, (adv + values) * mask""",
    ),
    (
        "compute_gae",
        "wrong",
        "returns = advantages",
        """values = values.detach()
t_max = token_rewards.shape[1]
adv = torch.zeros_like(token_rewards)
last = torch.zeros_like(token_rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = (token_rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
    adv[:, t] = last
return adv, adv""",
    ),
    (
        "compute_gae",
        "wrong",
        "missing detach",
        """t_max = token_rewards.shape[1]
adv = []
last = torch.zeros_like(token_rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = (token_rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
    adv.insert(0, last)
adv = torch.stack(adv, 1)
return adv, (adv + values) * mask""",
    ),
    (
        "compute_gae",
        "wrong",
        "padding keeps its return",
        """values = values.detach()
t_max = token_rewards.shape[1]
adv = torch.zeros_like(token_rewards)
last = torch.zeros_like(token_rewards[:, 0])
for t in reversed(range(t_max)):
    nv = values[:, t + 1] * mask[:, t + 1] if t + 1 < t_max else torch.zeros_like(last)
    last = (token_rewards[:, t] + gamma * nv - values[:, t] + gamma * lam * last) * mask[:, t]
    adv[:, t] = last
return adv, adv + values""",
    ),
    # token_ppo_loss
    (
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
    (
        "token_ppo_loss",
        "wrong",
        "value min",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.min((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(pg, mask), masked_mean(vf, mask)""",
    ),
    (
        "token_ppo_loss",
        "wrong",
        "half value loss",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = 0.5 * torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(pg, mask), masked_mean(vf, mask)""",
    ),
    (
        "token_ppo_loss",
        "wrong",
        "mean over padding",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return (pg * mask).mean(), (vf * mask).mean()""",
    ),
    (
        "token_ppo_loss",
        "wrong",
        "no value clip",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
return masked_mean(pg, mask), masked_mean((new_values - returns) ** 2, mask)""",
    ),
    (
        "token_ppo_loss",
        "wrong",
        "returned in the other order",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(vf, mask), masked_mean(pg, mask)""",
    ),
    (
        "token_ppo_loss",
        "wrong",
        "per-reply mean",
        """ratio = torch.exp(new_logprobs - old_logprobs)
pg = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
vc = old_values + (new_values - old_values).clamp(-clip_range_value, clip_range_value)
vf = torch.max((new_values - returns) ** 2, (vc - returns) ** 2)
return masked_mean(pg, mask, 1).mean(), masked_mean(vf, mask, 1).mean()""",
    ),
    # grpo_clip_loss
    (
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
    (
        "grpo_clip_loss",
        "wrong",
        "ratio against the reference",
        """ratio = torch.exp(logprobs - ref_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
    ),
    (
        "grpo_clip_loss",
        "wrong",
        "dapo and grpo swapped",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask) if loss_type == "grpo" else masked_mean(l, mask, dim=1).mean() if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
    ),
    (
        "grpo_clip_loss",
        "wrong",
        "KL sign",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) - beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
    ),
    (
        "grpo_clip_loss",
        "wrong",
        "dr_grpo by columns",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / mask.numel()""",
    ),
    (
        "grpo_clip_loss",
        "wrong",
        "advantages on the token axis",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach()
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
    ),
    (
        "grpo_clip_loss",
        "wrong",
        "k1 instead of k3",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k1")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
    ),
    (
        "grpo_clip_loss",
        "wrong",
        "mean over padding",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -torch.min(ratio * a, ratio.clamp(1 - clip_range, 1 + clip_range) * a) + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return l.mean(dim=1).mean() if loss_type == "grpo" else l.mean() if loss_type == "dapo" else l.sum() / (mask.shape[0] * max_tokens)""",
    ),
    (
        "grpo_clip_loss",
        "wrong",
        "no clipping",
        """ratio = torch.exp(logprobs - old_logprobs)
a = advantages.detach().unsqueeze(1)
l = -ratio * a + beta * per_token_kl(logprobs, ref_logprobs, mask, "k3")
return masked_mean(l, mask, dim=1).mean() if loss_type == "grpo" else masked_mean(l, mask) if loss_type == "dapo" else (l * mask).sum() / (mask.shape[0] * max_tokens)""",
    ),
]

FILES = {task.function: task for task in TASKS}  # the course table: function -> its files


def mutate(source: str, function: str, body: str) -> str:
    """Replace the code after ``function``'s docstring with ``body``."""
    start = source.index(f"def {function}(")
    doc_end = source.index('"""', source.index('"""', start) + 3) + 3
    next_def = re.compile(r"^def ", re.M).search(source, doc_end)
    end = next_def.start() if next_def else len(source)
    indented = "\n".join("    " + line if line else "" for line in body.splitlines())
    return source[:doc_end] + "\n" + indented + "\n\n\n" + source[end:]


def main() -> None:
    unexpected = 0
    for function, verdict, name, body in CATALOG:
        with tempfile.TemporaryDirectory() as tmp:
            for module in MODULES:
                source = (ROOT / "answer" / f"{module}_answer.py").read_text()
                if FILES[function].module == module:
                    source = mutate(source, function, body)
                (Path(tmp) / f"{module}.py").write_text(source)
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-m",
                    "graded",
                    f"--impl={tmp}",
                    "-k",
                    function,
                    "-q",
                    "-x",
                    "-p",
                    "no:cacheprovider",
                    "--no-header",
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
        failed = proc.returncode != 0
        ok = failed == (verdict == "wrong")
        unexpected += not ok
        reason = next((line for line in proc.stdout.splitlines() if line.startswith(("E ", "FAILED", "ERROR"))), "")
        message = next((line.strip() for line in proc.stdout.splitlines() if "TASKS.md" in line), reason)
        print(
            f"{'ok ' if ok else 'BAD'} {verdict:5s} {function}: {name}\n      {message[:300] if failed else 'passed'}"
        )
    print(f"{len(CATALOG) - unexpected}/{len(CATALOG)} verdicts as expected")
    sys.exit(1 if unexpected else 0)


if __name__ == "__main__":
    main()
