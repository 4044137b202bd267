"""PPO with sequence-level log-probs: advantages and the clipped policy loss.

Your tasks in this file (TASKS.md, tasks 1 and 2):

- ``compute_advantages``: A = R - V(s), optionally normalized.        (TASKS.md §1.2)
- ``ppo_clip_loss``: the clipped surrogate loss of PPO.                (TASKS.md §2.2)

``ppo_step`` in ``train_ppo.py`` shows how your two functions are used. Shapes: N = responses in the
batch. Every log-prob here is *sequence-level*: the sum of the log-probs of one reply's tokens.
Run ``pytest -m graded -k "compute_advantages or ppo_clip_loss"`` to check your work.
"""

from __future__ import annotations

import torch


def compute_advantages(
    rewards: torch.Tensor, values: torch.Tensor, normalize: bool = True, eps: float = 1e-8
) -> torch.Tensor:
    """Advantages A = R - V(s): how much better each reply did than the value head expected.

    Args:
        rewards: (N,) float, the reward of each reply (any shape works: everything below is over all elements).
        values: same shape, float, the value head's estimate V(s) for each reply's prompt. It may carry
            gradient: detach it, so that no gradient ever reaches ``values`` through the advantages.
        normalize: if True, standardize over all N elements:
            A = (A - A.mean()) / (A.std() + eps), with torch's default (unbiased) std. If all N
            advantages are equal, the result is exactly 0: rounding alone does not give that (in
            float32 the mean of eight 1.4s is off by ~1e-7 and their std is ~1e-7, far above eps).
        eps: added to the std, so that dividing by it never gives NaN or inf.

    Returns:
        (N,) advantages, same shape, dtype and device as ``rewards``. Inputs are not modified.
    """
    advantages = rewards - values.detach()
    if normalize:
        all_equal = (advantages == advantages.flatten()[0]).all()
        advantages = (advantages - advantages.mean()) / (advantages.std() + eps)
        advantages = advantages.masked_fill(all_equal, 0.0)
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
