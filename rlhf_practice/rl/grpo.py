"""GRPO: group-relative advantages and the REINFORCE-style loss.

Your tasks in this file (TASKS.md, task 3):

- ``compute_group_advantages``: compare each reply with the other replies to its prompt.  (TASKS.md §3.2)
- ``grpo_loss``: the policy-gradient loss weighted by those advantages.                    (TASKS.md §3.3)

``grpo_step`` in ``train_grpo.py`` shows how your functions are used. Shapes: B = prompts,
K = group_size = replies per prompt, N = B * K. The K replies of one prompt are consecutive, in the
order ``prompts.repeat_interleave(group_size, dim=0)`` produces: rows 0..K-1 answer prompt 0,
rows K..2K-1 answer prompt 1, and so on. Log-probs are sequence-level (summed over a reply).
Run ``pytest -m graded -k "compute_group_advantages or grpo_loss"`` to check your work.
"""

from __future__ import annotations

import torch


def compute_group_advantages(
    rewards: torch.Tensor, group_size: int, normalize: bool = True, eps: float = 1e-8
) -> torch.Tensor:
    """Group-relative advantages: each reply's reward compared with its own group's mean.

    Reshape ``rewards`` (N,) to (B, K) -- row i holds the K replies to prompt i -- and compute

        baseline_i = mean_k r[i, k]
        A[i, k]    = r[i, k] - baseline_i
        if normalize: A[i, k] = A[i, k] / (std_k r[i, k] + eps)

    where std is the group's own std (torch's default, unbiased), not the whole batch's. Flatten
    back to (N,), in the same order as ``rewards``.

    A tied group (all K rewards equal) says nothing about which reply is better: its advantages are
    exactly 0, whatever the reward's value and dtype. Rounding alone does not give that: in float32
    the mean of eight rewards of 1.4 is off by ~1e-7 and their std is ~1e-7, far above eps, so the
    formula above gives each of them +0.87. Set a tied group's advantages to 0 yourself (TASKS.md §3.2).

    Args:
        rewards: (N,) float with N = B * K; the K replies of one prompt are consecutive.
        group_size: K, the replies per prompt (>= 2).
        normalize: divide by the group's std + eps (DeepSeekMath's GRPO); if False, only centre.
        eps: added to the group's std, so that dividing by it never gives NaN or inf.

    Returns:
        (N,) advantages, same dtype and device as ``rewards``. Inputs are not modified.
    """
    # TODO(student): implement this function. Read TASKS.md §3.2 first.
    raise NotImplementedError("compute_group_advantages is not implemented yet: see TASKS.md §3.2.")


def grpo_loss(logprobs: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """The GRPO policy loss (to minimize): loss = -mean(A * log pi_theta(reply | prompt)).

    Args:
        logprobs: (N,) sequence-level log-probs under the current policy; carries gradient.
        advantages: (N,) group advantages; a constant: no gradient may reach it (detach it).

    Returns:
        A 0-dim tensor: the mean over all N replies (not the sum).
    """
    # TODO(student): implement this function. Read TASKS.md §3.3 first.
    raise NotImplementedError("grpo_loss is not implemented yet: see TASKS.md §3.3.")
