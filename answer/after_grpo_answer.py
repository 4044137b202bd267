"""After GRPO: the baselines, ratios and filters that later systems chose instead of GRPO's.

Your tasks in this file (TASKS.md, task 14):

- ``compute_rloo_advantages``: each reply against the mean of the *other* replies (RLOO).     (TASKS.md §14.2)
- ``clip_higher_loss``: GRPO-clip with a lower and an upper clip range of its own (DAPO).    (TASKS.md §14.3)
- ``gspo_loss``: one ratio per reply, the geometric mean of its token ratios (GSPO).         (TASKS.md §14.4)
- ``cispo_loss``: the importance weight clipped and stopped, never the token (CISPO).        (TASKS.md §14.5)
- ``filter_groups``: which groups to keep, by whether their outcomes differ (DAPO).          (TASKS.md §14.6)

``token_level_update``, ``grpo_clip_step`` and ``sample_groups`` in ``train_grpo.py`` show how your
functions are used (``--level token`` with ``--advantage rloo``, ``--grpo_clip_range_high``,
``--importance_sampling_level sequence``, ``--loss_type cispo``, ``--dynamic_sampling``). Shapes as in
token_level.py: N = replies in the batch, T = reply length (columns), B = prompts, K = group_size,
N = B * K with the K replies of one prompt consecutive. ``mask`` is the response mask, (N, T) float:
1 on a reply's real tokens, 0 on the padding after them. Log-probs are per token. Each loss adds
beta times the k3 estimate of KL(pi || pi_ref) at every real token, as ``grpo_clip_loss`` does:
k3_it = exp(ref_logprobs_it - logprobs_it) - 1 - (ref_logprobs_it - logprobs_it).
Run ``pytest -m graded -k after_grpo`` to check your work.
"""

from __future__ import annotations

import torch


def compute_rloo_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """REINFORCE leave-one-out (Ahmadian et al. 2024): each reply's baseline is the mean reward of
    the *other* K - 1 replies to its prompt, so the baseline never contains the reply it judges:

        baseline[i, k] = (sum_j r[i, j] - r[i, k]) / (K - 1)
        A[i, k]        = r[i, k] - baseline[i, k]            (= K / (K - 1) * (r[i, k] - mean_j r[i, j]))

    No division by a std. A tied group (all K rewards equal) gets advantages of exactly 0, whatever
    the reward's value and dtype, as in ``compute_group_advantages`` (TASKS.md §3.2): rounding alone
    leaves ~1e-7 in float32.

    Args:
        rewards: (N,) float with N = B * K; the K replies of one prompt are consecutive.
        group_size: K >= 2; K < 2 raises ValueError (one reply has no others to compare with).

    Returns:
        (N,) advantages, same dtype and device as ``rewards``, in the order of ``rewards``.
        Inputs are not modified.
    """
    if group_size < 2:
        raise ValueError(f"group_size={group_size}: RLOO needs at least 2 replies per prompt (K - 1 others).")
    grouped = rewards.view(-1, group_size)  # (B, K)
    baseline = (grouped.sum(dim=1, keepdim=True) - grouped) / (group_size - 1)
    advantages = grouped - baseline
    tied = (grouped == grouped[:, :1]).all(dim=1, keepdim=True)  # (B, 1)
    return advantages.masked_fill(tied, 0.0).reshape(-1)


def clip_higher_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_range_low: float,
    clip_range_high: float,
    beta: float,
    loss_type: str,
    max_tokens: int,
) -> torch.Tensor:
    """``grpo_clip_loss`` (TASKS.md §9.2) with the clip's two sides set apart (DAPO's clip-higher,
    Yu et al. 2025): a token the policy makes more likely may grow its ratio up to 1 + clip_range_high,
    so an unlikely token that turned out well can gain probability, which keeps the entropy up.

        ratio_it = exp(logprobs_it - old_logprobs_it)
        l_it     = -min(ratio_it * A_i, clamp(ratio_it, 1 - clip_range_low, 1 + clip_range_high) * A_i)
                   + beta * k3_it

    then one number by ``loss_type``, exactly as ``grpo_clip_loss``:

        "grpo":    mean_i ( sum_t l_it m_it / max(sum_t m_it, 1) )
        "dapo":    sum_it l_it m_it / max(sum_it m_it, 1)
        "dr_grpo": sum_it l_it m_it / (N * max_tokens)

    With clip_range_low == clip_range_high == epsilon it is ``grpo_clip_loss`` with clip_range epsilon.

    Args:
        logprobs: (N, T) per-token log-probs under the current policy; carries gradient.
        old_logprobs: (N, T) under the policy that sampled the replies; a constant.
        ref_logprobs: (N, T) under the frozen reference policy (only in the KL term); a constant.
        advantages: (N,) one advantage per reply; a constant.
        mask: (N, T) response mask.
        clip_range_low: epsilon_low in (0, 1): the ratio's floor is 1 - clip_range_low.
        clip_range_high: epsilon_high > 0: the ratio's ceiling is 1 + clip_range_high (DAPO: 0.28).
        beta: weight of the KL term (0 = none).
        loss_type: "grpo", "dapo" or "dr_grpo"; anything else raises ValueError.
        max_tokens: the constant of "dr_grpo" (the run's max_new_tokens).

    Returns:
        A 0-dim loss; gradient reaches ``logprobs`` only. Inputs are not modified.
    """
    ratio = torch.exp(logprobs - old_logprobs.detach())
    advantages = advantages.detach().unsqueeze(1)  # (N, 1)
    clipped = torch.clamp(ratio, 1 - clip_range_low, 1 + clip_range_high)
    surrogate = torch.min(ratio * advantages, clipped * advantages)
    log_ratio = logprobs - ref_logprobs.detach()
    k3 = (torch.exp(-log_ratio) - 1 + log_ratio) * mask
    per_token = -surrogate + beta * k3
    if loss_type == "grpo":
        return ((per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)).mean()
    if loss_type == "dapo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1)
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / (mask.shape[0] * max_tokens)
    raise ValueError(f'loss_type={loss_type!r} is unknown; use "grpo", "dapo" or "dr_grpo".')


def gspo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_range_low: float,
    clip_range_high: float,
    beta: float,
) -> torch.Tensor:
    """Group sequence policy optimization (Zheng et al. 2025): one importance ratio per reply, the
    geometric mean of its token ratios, clipped as a whole; the reward is given per reply, so the
    correction for having sampled it from the old policy is made per reply too.

        s_i  = exp( sum_t (logprobs_it - old_logprobs_it) m_it / max(sum_t m_it, 1) )
        l_i  = -min(s_i * A_i, clamp(s_i, 1 - clip_range_low, 1 + clip_range_high) * A_i)
        loss = mean_i ( l_i + beta * sum_t k3_it m_it / max(sum_t m_it, 1) )

    The mean over the reply's real tokens (not the sum) keeps s_i near 1 whatever the length, so
    GSPO's ranges are small (the paper: 3e-4 and 4e-4). s_i carries gradient: it is the ratio itself.

    Args:
        logprobs: (N, T) per-token log-probs under the current policy; carries gradient.
        old_logprobs: (N, T) under the policy that sampled the replies; a constant.
        ref_logprobs: (N, T) under the frozen reference policy (only in the KL term); a constant.
        advantages: (N,) one advantage per reply; a constant.
        mask: (N, T) response mask: padding counts neither in s_i nor in the KL.
        clip_range_low: s_i's floor is 1 - clip_range_low, in (0, 1).
        clip_range_high: s_i's ceiling is 1 + clip_range_high, > 0.
        beta: weight of the KL term (0 = none).

    Returns:
        A 0-dim loss; gradient reaches ``logprobs`` only. Inputs are not modified.
    """
    lengths = mask.sum(dim=1).clamp(min=1)  # (N,)
    ratio = torch.exp(((logprobs - old_logprobs.detach()) * mask).sum(dim=1) / lengths)  # (N,): s_i
    advantages = advantages.detach()
    clipped = torch.clamp(ratio, 1 - clip_range_low, 1 + clip_range_high)
    per_reply = -torch.min(ratio * advantages, clipped * advantages)
    log_ratio = logprobs - ref_logprobs.detach()
    k3 = (torch.exp(-log_ratio) - 1 + log_ratio) * mask
    return (per_reply + beta * k3.sum(dim=1) / lengths).mean()


def cispo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_range_high: float,
    beta: float,
) -> torch.Tensor:
    """Clipped importance-sampling policy optimization (MiniMax-M1, 2025): clip the importance weight,
    not the token. PPO's min() gives a token whose ratio left the range no gradient at all; CISPO
    caps the weight and stops its gradient, so every token keeps its REINFORCE gradient, scaled:

        w_it = stop_gradient( min(exp(logprobs_it - old_logprobs_it), 1 + clip_range_high) )
        l_it = -w_it * A_i * logprobs_it + beta * k3_it
        loss = sum_it l_it m_it / max(sum_it m_it, 1)         (one mean over every real token, as "dapo")

    The weight has no floor (MiniMax-M1 sets the lower range so wide that it never binds). The loss's
    value is not a surrogate objective; its gradient is what counts: -w_it * A_i * grad log pi_it.

    Args:
        logprobs: (N, T) per-token log-probs under the current policy; carries gradient.
        old_logprobs: (N, T) under the policy that sampled the replies; a constant.
        ref_logprobs: (N, T) under the frozen reference policy (only in the KL term); a constant.
        advantages: (N,) one advantage per reply; a constant.
        mask: (N, T) response mask.
        clip_range_high: the weight's cap is 1 + clip_range_high, > 0.
        beta: weight of the KL term (0 = none).

    Returns:
        A 0-dim loss; gradient reaches ``logprobs`` only through log pi and the KL, never through w.
        Inputs are not modified.
    """
    ratio = torch.exp(logprobs - old_logprobs.detach())
    weight = torch.clamp(ratio, max=1 + clip_range_high).detach()
    log_ratio = logprobs - ref_logprobs.detach()
    k3 = (torch.exp(-log_ratio) - 1 + log_ratio) * mask
    per_token = -weight * advantages.detach().unsqueeze(1) * logprobs + beta * k3
    return (per_token * mask).sum() / mask.sum().clamp(min=1)


def filter_groups(correct: torch.Tensor, group_size: int) -> torch.Tensor:
    """DAPO's dynamic sampling (Yu et al. 2025): which groups are worth a gradient. A group whose K
    replies are all right, or all wrong, teaches nothing that its outcome can tell: keep only the
    groups whose outcomes differ.

        keep[i] = not all k of correct[i, k] are equal        (correct reshaped to (B, K))

    The loop passes the task's verifiable outcome (1 = the reply is exactly right), not the shaped
    reward: an add group whose replies all got the format right and the sum wrong ties on outcome
    even when partial credit differs.

    Args:
        correct: (N,) with N = B * K, bool or 0/1 float; the K replies of one prompt are consecutive.
        group_size: K >= 1.

    Returns:
        (B,) bool, True for each group to keep, in prompt order. Inputs are not modified.
    """
    grouped = correct.view(-1, group_size)  # (B, K)
    return (grouped != grouped[:, :1]).any(dim=1)
