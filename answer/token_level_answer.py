"""Token-level RLHF: per-token KL to a frozen reference, GAE, token-level PPO and GRPO-clip.

Your tasks in this file (TASKS.md, tasks 7-9, the advanced track):

- ``masked_mean``: a mean over the real tokens only.                              (TASKS.md §7.2)
- ``per_token_kl``: the k1 and k3 estimators of KL(pi || pi_ref), per token.       (TASKS.md §7.3)
- ``compute_gae``: advantages and returns, right to left over each reply.         (TASKS.md §8.2)
- ``token_ppo_loss``: the clipped surrogate per token plus a clipped value loss.  (TASKS.md §8.3)
- ``grpo_clip_loss``: GRPO with ratio clipping, k3 KL and three normalizations.   (TASKS.md §9.2)

``token_level`` and ``token_ppo_step`` in ``train_ppo.py``, ``token_level_update`` and
``grpo_clip_step`` in ``train_grpo.py`` show how your functions are used (``--level token``).
Shapes: N = replies in the batch, T = reply length (columns). ``mask`` is the response mask, (N, T)
float: 1 on a reply's real tokens (up to and including its EOS), 0 on the padding after it; each row
is ones then zeros. Log-probs here are per token, not summed. Run ``pytest -m graded -k token_level``
to check your work.
"""

from __future__ import annotations

import torch


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` over the positions where ``mask`` is 1:

        masked_mean = sum(values * mask, dim) / max(sum(mask, dim), 1)

    Args:
        values: (N, T) float (any shape works, as long as ``mask`` has the same one).
        mask: same shape, 1.0 for real tokens and 0.0 for padding.
        dim: None: one mean over every real token of the batch (a 0-dim tensor); 1: one mean per
            row, (N,). The denominator is clamped to at least 1, so an all-masked row gives 0, not NaN.

    Returns:
        The mean, in the dtype of ``values``; gradient flows to ``values``. Inputs are not modified.
    """
    return (values * mask).sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)


def per_token_kl(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor, estimator: str = "k3"
) -> torch.Tensor:
    """Per-token estimate of KL(pi_theta || pi_ref) at each sampled reply token.

    With log_ratio = logprobs - ref_logprobs = log(pi_theta / pi_ref) and r = pi_ref / pi_theta:

        k1 = log_ratio                       (unbiased, but one token's value may be < 0)
        k3 = (r - 1) - log r                 (also unbiased, and >= 0 at every token)

    Args:
        logprobs: (N, T) log pi_theta of each reply token; may carry gradient (GRPO-clip's loss).
        ref_logprobs: (N, T) the same under the frozen reference policy; a constant.
        mask: (N, T) response mask; masked positions get KL 0.
        estimator: "k1" or "k3"; anything else raises ValueError.

    Returns:
        (N, T) KL per token, 0 where ``mask`` is 0. Inputs are not modified.
    """
    log_ratio = logprobs - ref_logprobs
    if estimator == "k1":
        kl = log_ratio
    elif estimator == "k3":
        kl = torch.exp(-log_ratio) - 1 + log_ratio  # r = exp(-log_ratio); (r - 1) - log r
    else:
        raise ValueError(f'estimator={estimator!r} is unknown; use "k1" or "k3".')
    return kl * mask


def compute_gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation over each reply's tokens, from the last real token back.

        delta_t = r_t + gamma * V_{t+1} - V_t           (V_{t+1} = 0 after the last real token)
        A_t     = delta_t + gamma * lam * A_{t+1}       (A_{t+1} = 0 after the last real token)
        R_t     = A_t + V_t                             (the value target, "returns")

    Padding after a reply's last real token neither contributes (its reward and value are not
    used) nor receives (its advantage and return are 0).

    Args:
        rewards: (N, T) reward r_t of each token (the KL penalty, plus the score on the last one).
        values: (N, T) V(s_t) from the value head when the replies were sampled. It may carry
            gradient: detach it; no gradient may reach ``values`` through A or R.
        mask: (N, T) response mask, each row ones then zeros.
        gamma: discount factor in [0, 1]; lam: the GAE lambda in [0, 1].

    Returns:
        (advantages, returns), both (N, T), dtype of ``rewards``, 0 where ``mask`` is 0.
    """
    values = values.detach()
    num_tokens = rewards.shape[1]
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(num_tokens)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = (delta + gamma * lam * next_advantage) * mask[:, t]
        next_value = values[:, t] * mask[:, t]
        advantages[:, t] = next_advantage
    returns = (advantages + values) * mask
    return advantages, returns


def token_ppo_loss(
    new_logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    new_values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float,
    clip_range_value: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's two losses, per token, averaged over every real token of the batch (masked_mean).

        ratio_t     = exp(new_logprobs_t - old_logprobs_t)
        policy_loss = masked_mean( -min(ratio_t * A_t, clamp(ratio_t, 1 - clip_range, 1 + clip_range) * A_t) )
        V_clipped_t = old_values_t + clamp(new_values_t - old_values_t, -clip_range_value, clip_range_value)
        value_loss  = masked_mean( max((new_values_t - R_t)^2, (V_clipped_t - R_t)^2) )

    Args:
        new_logprobs: (N, T) per-token log-probs under the current policy; carries gradient.
        old_logprobs: (N, T) the same under the policy that sampled the replies; a constant.
        advantages: (N, T) A_t from compute_gae; a constant.
        new_values: (N, T) V(s_t) under the current value head; carries gradient.
        old_values: (N, T) V(s_t) when the replies were sampled; a constant.
        returns: (N, T) R_t from compute_gae; a constant.
        mask: (N, T) response mask: padding counts in neither loss.
        clip_range: epsilon of the ratio clip, in (0, 1).
        clip_range_value: how far the new value may move from the old one before its error stops
            counting (the larger squared error is kept, so clipping never makes the loss smaller).

    Returns:
        (policy_loss, value_loss): two 0-dim tensors. Gradient reaches ``new_logprobs`` only
        through policy_loss and ``new_values`` only through value_loss. Inputs are not modified.
    """
    ratio = torch.exp(new_logprobs - old_logprobs.detach())
    advantages = advantages.detach()
    surrogate = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    policy_loss = masked_mean(-surrogate, mask)

    old_values, returns = old_values.detach(), returns.detach()
    values_clipped = old_values + torch.clamp(new_values - old_values, -clip_range_value, clip_range_value)
    value_error = torch.max((new_values - returns) ** 2, (values_clipped - returns) ** 2)
    value_loss = masked_mean(value_error, mask)
    return policy_loss, value_loss


def grpo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float,
    beta: float,
    loss_type: str,
    max_tokens: int,
) -> torch.Tensor:
    """GRPO with ratio clipping against the old policy and a k3 KL penalty to the reference.

    Per token (the sequence advantage A_i of reply i is shared by all its tokens):

        ratio_it = exp(logprobs_it - old_logprobs_it)
        l_it     = -min(ratio_it * A_i, clamp(ratio_it, 1 - clip_range, 1 + clip_range) * A_i)
                   + beta * k3_it            (k3 of per_token_kl(logprobs, ref_logprobs, mask, "k3"))

    then one number, by ``loss_type`` (m = mask, N replies):

        "grpo":    mean_i ( sum_t l_it m_it / max(sum_t m_it, 1) )   each reply's token mean, then over replies
        "dapo":    sum_it l_it m_it / max(sum_it m_it, 1)             one mean over every real token
        "dr_grpo": sum_it l_it m_it / (N * max_tokens)                a constant: no length normalization

    Args:
        logprobs: (N, T) per-token log-probs under the current policy; carries gradient.
        old_logprobs: (N, T) under the policy that sampled the replies (the ratio's denominator).
        ref_logprobs: (N, T) under the frozen reference policy (only in the KL term).
        advantages: (N,) one group advantage per reply; a constant.
        mask: (N, T) response mask.
        clip_range: epsilon of the ratio clip, in (0, 1).
        beta: weight of the KL term (0 = no KL penalty).
        loss_type: "grpo", "dapo" or "dr_grpo"; anything else raises ValueError.
        max_tokens: the constant of "dr_grpo" (the run's max_new_tokens); unused by the other two.

    Returns:
        A 0-dim loss. Gradient reaches ``logprobs`` (surrogate and KL); ``old_logprobs``,
        ``ref_logprobs`` and ``advantages`` are constants. Inputs are not modified.
    """
    ratio = torch.exp(logprobs - old_logprobs.detach())
    advantages = advantages.detach().unsqueeze(1)  # (N, 1): broadcast over the reply's tokens
    surrogate = torch.min(ratio * advantages, torch.clamp(ratio, 1 - clip_range, 1 + clip_range) * advantages)
    per_token = -surrogate + beta * per_token_kl(logprobs, ref_logprobs.detach(), mask, "k3")
    if loss_type == "grpo":
        return masked_mean(per_token, mask, dim=1).mean()
    if loss_type == "dapo":
        return masked_mean(per_token, mask)
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / (mask.shape[0] * max_tokens)
    raise ValueError(f'loss_type={loss_type!r} is unknown; use "grpo", "dapo" or "dr_grpo".')
