"""The policy-gradient lecture (seed 004, CS336): GRPO built step by step on "sort n numbers".

Your tasks in this file (TASKS.md, task 10):

- ``sort_distance_reward``: the positions where a reply matches the sorted prompt.          (TASKS.md §10.1)
- ``sort_inclusion_ordering_reward``: partial credit, prompt numbers kept + sorted pairs.   (TASKS.md §10.1)
- ``compute_deltas``: the weight delta of each reply, in the lecture's four modes.           (TASKS.md §10.2)
- ``compute_loss``: the lecture's three losses: naive, unclipped and clipped.               (TASKS.md §10.3)
- ``compute_kl_penalty``: the k3 estimate of KL(pi || pi_ref).                              (TASKS.md §10.4)

``rlhf_practice/lecture.py`` shows how your functions are used (the lecture's model and training
loop; ``python scripts/experiments.py lecture`` runs its experiments). Shapes follow the lecture:
``batch`` = prompts, ``trial`` = replies sampled per prompt (the group), ``pos`` = positions of a
reply. Run ``pytest -m graded -k lecture`` to check your work.
"""

from __future__ import annotations

import torch


def sort_distance_reward(prompt: list[int] | torch.Tensor, response: list[int] | torch.Tensor) -> float:
    """The number of positions where ``response`` equals the sorted prompt:

        reward = #{ i : response[i] == sorted(prompt)[i] }

    Args:
        prompt: n integers (a list, or a 1-D integer tensor), in any order.
        response: n integers, the same length as ``prompt``.

    Returns:
        A float in [0, n]; n only for the sorted prompt itself. Inputs are not modified.
    """
    if len(prompt) != len(response):
        raise ValueError(f"prompt has {len(prompt)} numbers but response {len(response)}: they must be equal.")
    target = sorted(int(x) for x in prompt)
    return float(sum(int(x) == y for x, y in zip(response, target)))


def sort_inclusion_ordering_reward(prompt: list[int] | torch.Tensor, response: list[int] | torch.Tensor) -> float:
    """Partial credit: inclusion + ordering, where

        inclusion = #{ i : prompt[i] occurs somewhere in response }     (each prompt entry counted, duplicates too)
        ordering  = #{ i : response[i] <= response[i + 1] }             (adjacent pairs in order, ties allowed)

    Args:
        prompt: n integers (a list, or a 1-D integer tensor), in any order.
        response: n integers, the same length as ``prompt``.

    Returns:
        A float in [0, 2n - 1]; the sorted prompt gets the maximum. Inputs are not modified.
    """
    if len(prompt) != len(response):
        raise ValueError(f"prompt has {len(prompt)} numbers but response {len(response)}: they must be equal.")
    reply = [int(x) for x in response]
    inclusion = sum(int(x) in reply for x in prompt)
    ordering = sum(a <= b for a, b in zip(reply, reply[1:]))
    return float(inclusion + ordering)


def compute_deltas(rewards: torch.Tensor, mode: str) -> torch.Tensor:
    """The weight delta of each reply in the policy gradient, one row per prompt:

        "rewards":            delta = r                                   (as is)
        "centered_rewards":   delta = r - mean_trial(r)                   (the group's mean as baseline)
        "normalized_rewards": delta = (r - mean_trial(r)) / (std_trial(r) + 1e-5)
        "max_rewards":        delta = r where r is its row's maximum, 0 elsewhere

    Means and stds are over the trials of one prompt (the last dim); std is torch's default (unbiased).

    Args:
        rewards: [batch, trial] float: the reward of each of the ``trial`` replies to each prompt.
        mode: one of the four above; any other value raises ValueError naming the modes.

    Returns:
        [batch, trial] deltas, same dtype and device. A row of equal rewards (a tie) gives exactly 0s
        in the centered and normalized modes, never NaN, whatever the reward: rounding alone does not
        (in float32 a row of eight 12.4s has a mean off by ~1e-6 and a std of ~1e-6, which the 1e-5
        does not swamp), so set a tied row to 0 yourself (TASKS.md §10.2). Inputs are not modified.
    """
    if mode == "rewards":
        return rewards
    if mode in ("centered_rewards", "normalized_rewards"):
        deltas = rewards - rewards.mean(dim=-1, keepdim=True)
        if mode == "normalized_rewards":
            deltas = deltas / (rewards.std(dim=-1, keepdim=True) + 1e-5)
        tied = (rewards == rewards[..., :1]).all(dim=-1, keepdim=True)  # every trial got the first one's reward
        return deltas.masked_fill(tied, 0.0)
    if mode == "max_rewards":
        best = rewards.max(dim=-1, keepdim=True).values
        return torch.where(rewards == best, rewards, torch.zeros_like(rewards))
    raise ValueError(
        f"unknown mode {mode!r}: use 'rewards', 'centered_rewards', 'normalized_rewards' or 'max_rewards'."
    )


def compute_loss(
    log_probs: torch.Tensor,
    deltas: torch.Tensor,
    mode: str,
    old_log_probs: torch.Tensor | None = None,
    clip_range: float = 0.01,
) -> torch.Tensor:
    """The lecture's policy-gradient losses (to minimize); every reply position gets its reply's delta:

        "naive":     loss = -mean(log_probs * delta)
        "unclipped": ratio = exp(log_probs - old_log_probs);  loss = -mean(ratio * delta)
        "clipped":   loss = -mean(min(ratio * delta, clamp(ratio, 1 - clip_range, 1 + clip_range) * delta))

    The mean is over every [batch, trial, pos] entry.

    Args:
        log_probs: [batch, trial, pos] log-probs of the sampled tokens under the current model; carries gradient.
        deltas: [batch, trial] from ``compute_deltas``; a constant.
        mode: "naive", "unclipped" or "clipped"; any other value raises ValueError naming the modes.
        old_log_probs: [batch, trial, pos] log-probs under the model that sampled the replies, a
            constant. None means on-policy: old = log_probs.detach() (ratio 1, gradient still flows).
            Ignored by "naive".
        clip_range: epsilon of the clipped loss (the lecture's 0.01).

    Returns:
        A 0-dim tensor. Inputs are not modified.
    """
    if mode not in ("naive", "unclipped", "clipped"):
        raise ValueError(f"unknown mode {mode!r}: use 'naive', 'unclipped' or 'clipped'.")
    deltas = deltas.detach().unsqueeze(-1)  # [batch, trial, 1]: one delta for every position of a reply
    if mode == "naive":
        return -(log_probs * deltas).mean()
    if old_log_probs is None:
        old_log_probs = log_probs
    ratio = torch.exp(log_probs - old_log_probs.detach())
    if mode == "unclipped":
        return -(ratio * deltas).mean()
    clipped = ratio.clamp(1 - clip_range, 1 + clip_range)
    return -torch.minimum(ratio * deltas, clipped * deltas).mean()


def compute_kl_penalty(log_probs: torch.Tensor, ref_log_probs: torch.Tensor) -> torch.Tensor:
    """The k3 estimate of KL(pi || pi_ref) from tokens sampled from pi:

        k3 = exp(ref_log_probs - log_probs) - (ref_log_probs - log_probs) - 1      (>= 0 entry by entry)

    summed over the last dim (a reply's positions), then averaged over the rest.

    Args:
        log_probs: [..., pos] log-probs of the sampled tokens under the current model; carries gradient.
        ref_log_probs: same shape, under the reference model; a constant.

    Returns:
        A 0-dim tensor, >= 0; 0 exactly when the two agree everywhere. Inputs are not modified.
    """
    log_ratio = ref_log_probs.detach() - log_probs
    return (log_ratio.exp() - log_ratio - 1).sum(dim=-1).mean()
