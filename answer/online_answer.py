"""Online RLHF: ask the annotator about what the policy writes now, and watch the reward model without a gold.

Your tasks in this file (TASKS.md, task 16):

- ``select_pairs``: which fresh pairs of the current policy's replies get the annotator's labels.  (TASKS.md §16.2)
- ``proxy_agreement``: how often the reward model orders a labelled pair as the annotator does.  (TASKS.md §16.3)

``train_ppo.py --reward_model DIR --online.refresh_every K`` shows how your functions are used
(rlhf_practice/online_labels.py): every K steps it samples C fresh pairs from the policy, scores them with the reward
model(s), keeps the M pairs ``select_pairs`` picks, asks the annotator (the task's rule reward) to order them,
logs ``proxy_agreement`` on them as ``online/proxy_accuracy`` -- before the reward model learns from them -- and
then trains the reward model on every labelled pair so far. Shapes: k = reward models, C = candidate pairs,
M = labels, N = labelled pairs. Run ``pytest -m graded -k online`` to check your work.
"""

from __future__ import annotations

import torch


def select_pairs(scores_a: torch.Tensor, scores_b: torch.Tensor, num_labels: int, selection: str) -> torch.Tensor:
    """Which of C candidate pairs (a_i, b_i) to send to the annotator: each label costs, so spend them where they teach.

        "random":       the first M pairs. The candidates are independent samples of the policy, so the first M
                        are as random as any M; drawing random numbers here would only make runs unrepeatable.
        "uncertain":    the M pairs on which the proxy is least sure: the smallest |mean_k a_i - mean_k b_i|,
                        the score difference of the models' mean (its Bradley-Terry probability nearest 1/2).
        "disagreement": the M pairs whose Bradley-Terry probabilities sigmoid(a_i - b_i) vary most over the k
                        models (their variance over the models, dim 0); needs k >= 2.

    Where two pairs have the same key (the same difference, the same variance), the one with the lower index is
    picked first. Either way the result lists the picked indices in increasing order.

    Args:
        scores_a: (k, C) float32 or float64: row j holds reward model j's (normalised) scores of the C pairs' first replies.
        scores_b: (k, C) float: the same models' scores of the C pairs' second replies.
        num_labels: M, the labels to spend: 1 <= M <= C, else ValueError.
        selection: "random", "uncertain" or "disagreement"; anything else raises ValueError, and so does
            "disagreement" with k < 2 (one model cannot disagree with itself).

    Returns:
        (M,) int64 on the scores' device: the picked pairs' indices, increasing. The inputs are not modified.
    """
    candidates = scores_a.shape[1]
    if not 1 <= num_labels <= candidates:
        raise ValueError(f"select_pairs: num_labels must be in [1, {candidates}] (the candidates), got {num_labels}.")
    if selection == "random":
        return torch.arange(num_labels, device=scores_a.device)
    if selection == "uncertain":
        key = (scores_a.mean(dim=0) - scores_b.mean(dim=0)).abs()  # smallest first
    elif selection == "disagreement":
        if scores_a.shape[0] < 2:
            raise ValueError(f"select_pairs: 'disagreement' needs k >= 2 models, got {scores_a.shape[0]}.")
        key = -torch.sigmoid(scores_a - scores_b).var(dim=0)  # the largest variance first
    else:
        raise ValueError(f"select_pairs: unknown selection {selection!r}; use 'random', 'uncertain' or 'disagreement'.")
    picked = torch.sort(key, stable=True).indices[:num_labels]
    return picked.sort().values


def proxy_agreement(
    proxy_a: torch.Tensor, proxy_b: torch.Tensor, gold_a: torch.Tensor, gold_b: torch.Tensor
) -> torch.Tensor:
    """The detector of over-optimization that needs no gold beyond the labels already bought: how often the proxy
    (the reward the policy trains on) orders a labelled pair as the annotator did.

    A pair counts when the annotator prefers one of its replies (gold_a != gold_b: a tie says nothing about the
    order). On a counted pair the proxy agrees when it strictly prefers the same reply:

        sign(proxy_a - proxy_b) == sign(gold_a - gold_b)

    so a proxy tie agrees with nobody. Where the policy writes what the proxy was trained on this is the proxy's
    held-out accuracy; where the policy found the proxy's mistakes it falls toward chance (1/2) and below.

    Args:
        proxy_a, proxy_b: (N,) float32 or float64: the proxy's scores of each pair's two replies (they may
            require grad: scores straight from a reward model in training).
        gold_a, gold_b: (N,) float32, float64 or int64: the annotator's scores of the same replies (int64 ones
            below 2**62 in size, so that gold_a - gold_b cannot wrap). N >= 1.

    Returns:
        0-dim tensor of the proxy's dtype: agreeing pairs / counted pairs; NaN when no pair counts (every pair is
        a tie: there is nothing to measure). The result is only logged, never differentiated: whether it
        keeps a graph does not matter. The inputs are not modified.
    """
    counted = gold_a != gold_b
    agree = torch.sign(proxy_a - proxy_b) == torch.sign(gold_a - gold_b).to(proxy_a.dtype)
    return (agree & counted).sum().to(proxy_a.dtype) / counted.sum().to(proxy_a.dtype)
