"""PPO with sequence-level log-probs: advantages, the clipped policy loss, and one update pass.

Your tasks in this file (TASKS.md, tasks 1 and 2):

- ``compute_advantages``: A = R - V(s), optionally normalized.        (TASKS.md §1.2)
- ``ppo_clip_loss``: the clipped surrogate loss of PPO.                (TASKS.md §2.2)

``ppo_step`` is given: read it to see how your two functions are used. Shapes: N = responses in the
batch. Every log-prob here is *sequence-level*: the sum of the log-probs of one reply's tokens.
Run ``pytest -m graded -k "compute_advantages or ppo_clip_loss"`` to check your work.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlhf_practice.config import PPOConfig
from rlhf_practice.modeling import Generation, PolicyValueModel
from rlhf_practice.tracking import check_finite, mean_metrics


def compute_advantages(
    rewards: torch.Tensor, values: torch.Tensor, normalize: bool = True, eps: float = 1e-8
) -> torch.Tensor:
    """Advantages A = R - V(s): how much better each reply did than the value head expected.

    Args:
        rewards: (N,) float, the reward of each reply.
        values: (N,) float, the value head's estimate V(s) for each reply's prompt. It may carry
            gradient: detach it, so that no gradient ever reaches ``values`` through the advantages.
        normalize: if True, standardize over all N elements:
            A = (A - A.mean()) / (A.std() + eps), with torch's default (unbiased) std.
        eps: added to the std so that equal advantages give 0, never NaN.

    Returns:
        (N,) advantages, same shape, dtype and device as ``rewards``. Inputs are not modified.
    """
    advantages = rewards - values.detach()
    if normalize:
        advantages = (advantages - advantages.mean()) / (advantages.std() + eps)
    return advantages


def ppo_clip_loss(
    new_logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, clip_range: float
) -> torch.Tensor:
    """The PPO clipped surrogate loss (to minimize).

        ratio = exp(new_logprobs - old_logprobs)
        loss  = -mean( min( ratio * A, clamp(ratio, 1 - clip_range, 1 + clip_range) * A ) )

    Args:
        new_logprobs: (N,) log pi_theta(reply | prompt) under the current policy; carries gradient.
        old_logprobs: (N,) the same under the policy that sampled the replies; a constant.
        advantages: (N,) A for each reply; a constant.
        clip_range: epsilon, in (0, 1); the ratio is kept within [1 - epsilon, 1 + epsilon].

    Returns:
        A 0-dim tensor whose gradient with respect to ``new_logprobs`` is right (value and sign).
        ``old_logprobs`` and ``advantages`` carry no gradient in the training loop, so detaching them
        here is allowed but not required. Log-probs are sums over a reply (values like -300 are
        normal), so compute the ratio from the difference of log-probs: exp(-300) / exp(-301) would
        be 0 / 0.
    """
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    advantages = advantages.detach()
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages
    return -torch.min(unclipped, clipped).mean()


def ppo_step(
    policy: PolicyValueModel,
    optimizer: torch.optim.Optimizer,
    generation: Generation,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    config: PPOConfig,
) -> dict[str, torch.Tensor]:
    """One pass (epoch) of PPO updates over a batch of N sampled replies.

    ``old_logprobs``, ``advantages`` and ``returns`` (the value targets R) are (N,) constants
    computed once per batch. The batch is split into ``config.ppo_num_minibatches`` minibatches;
    each gets one optimizer step on

        loss/total_with_kl = loss/policy + value_loss_coef * loss/value + kl_coef * kl/approx

    Returns the metrics of the pass (0-dim tensors), averaged over its minibatches.
    """
    stats = []
    for idx in torch.randperm(len(returns), device=returns.device).chunk(config.ppo_num_minibatches):
        scores = policy.evaluate_sequences(generation[idx], config.mixed_precision)
        new_logprobs = scores.logprobs
        policy_loss = ppo_clip_loss(new_logprobs, old_logprobs[idx], advantages[idx], config.ppo_clip_range)
        value_loss = F.mse_loss(scores.values, returns[idx])
        log_ratio = new_logprobs - old_logprobs[idx]
        approx_kl = (-log_ratio).mean()  # the task book's KL estimate: mean(old - new)
        total_no_kl = policy_loss + config.value_loss_coef * value_loss
        total_with_kl = total_no_kl + config.kl_coef * approx_kl
        check_finite("loss/total_with_kl", total_with_kl)

        optimizer.zero_grad(set_to_none=True)
        total_with_kl.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
        optimizer.step()

        with torch.no_grad():
            ratio = log_ratio.exp()
            stats.append(
                {
                    "loss/policy": policy_loss,
                    "loss/value": value_loss,
                    "loss/total_no_kl": total_no_kl,
                    "loss/total_with_kl": total_with_kl,
                    "kl/approx": approx_kl,
                    "kl/k3": ((ratio - 1) - log_ratio).mean(),  # always >= 0, lower variance
                    "ppo/clip_frac": ((ratio - 1).abs() > config.ppo_clip_range).float().mean(),
                    "ppo/ratio_mean": ratio.mean(),
                    "policy/entropy": scores.entropy,
                }
            )
    return mean_metrics(stats)
