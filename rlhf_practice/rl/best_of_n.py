"""Best-of-n and reward-model ensembles: how far a policy can chase a learned reward before the gold falls.

Your tasks in this file (TASKS.md, task 15):

- ``best_of_n_kl``: how far best-of-n moves from the policy it samples, in nats.            (TASKS.md §15.2)
- ``best_of_n_estimate``: the expected score of best-of-n for every n, from one pool.       (TASKS.md §15.3)
- ``ensemble_reward``: k reward models' scores combined into one (mean, min, uwo).          (TASKS.md §15.5)

``scripts/experiments.py best_of_n`` shows how your functions are used: one pool of N replies per prompt
from the starting policy, scored by reward models (the proxies) and by the rule reward (the gold), then
proxy and gold of best-of-n against sqrt(KL) for n = 1 ... N. ``train_ppo.py --reward_model a,b,c
--reward_ensemble min`` (folders joined by commas) trains against an ensemble through ``ensemble_reward``.
Shapes: B = prompts, N = replies in each prompt's pool, k = reward models. Run ``pytest -m graded -k best_of_n`` to check your work.
"""

from __future__ import annotations

import torch


def best_of_n_kl(n: int | torch.Tensor) -> torch.Tensor:
    """The KL divergence of best-of-n from the policy it samples from, in nats (Stiennon et al. 2020,
    Gao et al. 2023): draw n replies, keep the one the reward model scores highest.

        KL(pi_bon || pi) = log n - (n - 1) / n

    0 at n = 1: best-of-1 is the policy itself. It is exact when the reward has a continuous distribution
    under pi (no reply's reward has a probability of its own). A policy over finitely many replies (the tiny
    model's, whose replies often repeat) has atoms, and then the formula is a strict upper bound even if every
    reply's reward differs (Beirami et al. 2024): uniform over 2 replies, n = 2 keeps the better one with
    probability 3/4, so KL = 3/4 log(3/2) + 1/4 log(1/2) = 0.131 against log 2 - 1/2 = 0.193. The course
    still plots best-of-n against sqrt of this KL, as Gao et al. 2023 do: one x-axis for every reward model.

    Args:
        n: the number of samples, an int or a tensor of them (any shape); every n must be >= 1, else
            ValueError.

    Returns:
        a tensor of n's shape (0-dim for an int): float64 for an int or an integer tensor, n's own dtype
        for a floating tensor. ``n`` is not modified.
    """
    # TODO(student): implement this function. Read TASKS.md §15.2 first.
    raise NotImplementedError("best_of_n_kl is not implemented yet: see TASKS.md §15.2.")


def best_of_n_estimate(proxy_scores: torch.Tensor, scores: torch.Tensor, max_n: int | None = None) -> torch.Tensor:
    """The expected score of best-of-n for every n = 1 ... max_n, estimated without bias from one pool of N
    replies per prompt (Nakano et al. 2021; Gao et al. 2023, appendix).

    Best-of-n draws n of the pool's N replies at random, without replacement, and keeps the one with the
    highest proxy score. Sort a prompt's pool by proxy score, smallest first: the i-th (i = 1 ... N) is the
    one kept exactly when it is drawn and the other n - 1 drawn come from the i - 1 below it, so

        P(the i-th is kept) = C(i - 1, n - 1) / C(N, n)          (0 for i < n)
        estimate[b, n - 1]  = sum_i P(the i-th is kept) * scores[b, the i-th]

    Compute the weights in log space (torch.lgamma), in float64 whatever the scores' dtype: 1024! overflows
    float64 (N! / (n! (N - n)!) gives inf / inf = NaN), C(1024, 512) is about 4.5e306, and log-weights in
    float32 put the estimate up to 1e-3 off at N = 1024. Ties in the proxy are broken at random, so tied
    replies share the same chance of being kept: replace each reply's score by the mean score of the replies
    of its own prompt's pool whose proxy score equals its own, before weighting (a tie never reaches across
    prompts). The estimate then does not depend on the order of the pool.

    Args:
        proxy_scores: (B, N) float: the score that picks the winner (a reward model's).
        scores: (B, N) float: the score to report of each reply (the gold reward, or the proxy itself).
        max_n: the largest n; None means N. Below 1 or above N raises ValueError (a pool of N replies says
            nothing about best-of-(N + 1)).

    Returns:
        (B, max_n), ``scores``' dtype: column n - 1 is the expected score of best-of-n on each prompt
        (column 0 is the mean of the pool, column N - 1 the score of the proxy's top reply). No gradient is
        needed. The inputs are not modified.
    """
    # TODO(student): implement this function. Read TASKS.md §15.3 first.
    raise NotImplementedError("best_of_n_estimate is not implemented yet: see TASKS.md §15.3.")


def ensemble_reward(scores: torch.Tensor, mode: str, uncertainty_coef: float = 0.5) -> torch.Tensor:
    """One reward from k reward models' scores of the same replies (Coste et al. 2023):

        "mean": the mean over the k models
        "min":  the smallest of the k (worst-case optimisation, WCO)
        "uwo":  mean - uncertainty_coef * variance over the k models (uncertainty-weighted optimisation);
                the variance is the unbiased one (torch.var's default, divided by k - 1), as every std of
                the course is

    The models disagree most where none of them was trained (far from the starting policy's replies), so
    "min" and "uwo" pay the policy less there than the mean does.

    Args:
        scores: (k, B) float: row j holds model j's (normalised) scores of the B replies.
        mode: "mean", "min" or "uwo"; anything else raises ValueError.
        uncertainty_coef: lambda >= 0 of "uwo" (unused by the other modes).

    Returns:
        (B,) float, ``scores``' dtype, with gradient to ``scores`` where it has one. "uwo" with k < 2
        raises ValueError (one model has no variance). The input is not modified.
    """
    # TODO(student): implement this function. Read TASKS.md §15.5 first.
    raise NotImplementedError("ensemble_reward is not implemented yet: see TASKS.md §15.5.")
