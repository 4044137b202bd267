"""The grading book of compute_rloo_advantages (rlhf_practice/rl/after_grpo.py, TASKS.md §14.2): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.after_grpo._shared import (
    _own,
)
from instructor.cases import DTYPES, F64, _adder, _name, _perm, _show, _uniform, cases_of
from instructor.mistakes import KEY, right, tie_zeroed, wrong

# ================ compute_rloo_advantages (TASKS.md §14.2) ==========================================================

# --- its cases


BOOK_RLOO_REWARDS = [1.0, 0.0, -1.0, 0.2, 0.4, 0.9]  # TASKS.md §14.2: the §3.1 example, B = 2 prompts x K = 3 replies
TIE_VALUES = (100.3, 1000.1)  # tied at these, the float32 leave-one-out baseline is off by ~1e-5 over 8 replies


def _tie_reward(g: torch.Generator) -> float:
    """A reward whose tied float32 group of 8 gets leave-one-out advantages clearly off 0 (> 2e-6) if not zeroed."""
    while True:
        value = _uniform(g, 100, 1000, 1).item()
        group = torch.full((1, 8), value, dtype=torch.float32)
        if ((group - (group.sum(dim=1, keepdim=True) - group) / 7).abs() > 2e-6).any():
            return value


@cases_of("compute_rloo_advantages")
def rloo_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_rloo_advantages", fresh)
    rewards, example = torch.tensor(BOOK_RLOO_REWARDS), "the 2 x 3 task-book example"
    if fresh:
        rewards = _uniform(g, -1, 1, 6, dtype=torch.float32)
        example = f"a fresh variant of the 2 x 3 task-book example (rewards = {_show(rewards)})"
    add(
        "book_example",
        f"compute_rloo_advantages on {example}, group_size=3",
        [("rewards", rewards), ("group_size", 3)],
        book="§14.2",
    )
    add("inputs_unmodified", "compute_rloo_advantages", [("rewards", rewards), ("group_size", 3)], unmodified=True)
    for group_size in (1, 0):
        add(
            f"group_size_{group_size}_raises",
            f"compute_rloo_advantages with group_size={group_size} (fewer than 2 replies: no other reply to compare "
            "with; raise ValueError)",
            [("rewards", rewards), ("group_size", group_size)],
            raises="ValueError",
        )
    for dtype in DTYPES:  # ties far from 0 (float32's leave-one-out baseline is then ~1e-5 off), beside a spread group
        values, spread = list(TIE_VALUES), torch.tensor([0.0, 1.0, 0.5, 0.2, 0.9, 0.4, 0.7, 0.6], dtype=F64)
        if fresh:
            values, spread = [_tie_reward(g) for _ in range(2)], _uniform(g, -1, 1, 8) + 0.001
        groups = [torch.full((8,), v, dtype=F64) for v in values] + [spread]
        order = _perm(g, 3).tolist() if fresh else [0, 2, 1]
        rewards = torch.cat([groups[i] for i in order]).to(dtype)
        tied = " and ".join(f"{v:.5g}" for v in values)
        add(
            f"tied_groups_exactly_zero_{_name(dtype)}",
            f"compute_rloo_advantages on 3 groups of 8 ({dtype}), two tied (all 8 rewards {tied}) and one not: a "
            "tied group's advantages are exactly 0",
            [("rewards", rewards), ("group_size", 8)],
            atol=0.0,
        )
    # every random case: B != K, groups at different offsets (group and batch statistics differ clearly)
    rng = g if fresh else _own(1402)
    for dtype in DTYPES:
        for num_prompts, group_size in ((1, 2), (2, 3), (3, 2), (4, 5), (5, 8)):
            rewards = torch.rand(num_prompts * group_size, generator=rng, dtype=F64) * 2 - 1
            rewards = rewards + torch.arange(num_prompts, dtype=F64).repeat_interleave(group_size) * 0.5
            add(
                f"random_{_name(dtype)}_B{num_prompts}_K{group_size}",
                f"compute_rloo_advantages on random {dtype} rewards, B={num_prompts}, group_size={group_size}",
                [("rewards", rewards.to(dtype)), ("group_size", group_size)],
            )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("compute_rloo_advantages")
def rloo_scaled_centred_rewards(rewards, group_size):
    if group_size < 2:
        raise ValueError("group_size must be at least 2")
    g = rewards.view(-1, group_size)
    a = group_size / (group_size - 1) * (g - g.mean(dim=1, keepdim=True))
    return torch.where((g == g[:, :1]).all(dim=1, keepdim=True), torch.zeros_like(a), a).reshape(-1)


@right("compute_rloo_advantages")
def rloo_loop_over_replies(rewards, group_size):
    if group_size < 2:
        raise ValueError(group_size)
    out = torch.empty_like(rewards)
    for start in range(0, rewards.numel(), group_size):
        group = rewards[start : start + group_size]
        for k in range(group_size):
            others = torch.cat([group[:k], group[k + 1 :]])
            out[start + k] = 0.0 if bool((group == group[0]).all()) else group[k] - others.mean()
    return out


@wrong(
    "compute_rloo_advantages",
    "a tied group (all K rewards equal) got advantages that are not exactly 0: in float32 the leave-one-out baseline "
    "is a few ulps off the reward; set a tied group's advantages to 0",
)
def rloo_tied_group_not_zero(rewards, group_size):
    if group_size < 2:
        raise ValueError(group_size)
    g = rewards.view(-1, group_size)
    return (g - (g.sum(dim=1, keepdim=True) - g) / (group_size - 1)).reshape(-1)


@wrong(
    "compute_rloo_advantages",
    "the baseline includes the reply itself (r minus the group's mean, GRPO without the std); RLOO's baseline is the "
    "mean of the OTHER K - 1 replies, which makes A = K / (K - 1) * (r - mean)",
)
@tie_zeroed
def rloo_baseline_includes_the_reply(rewards, group_size):
    if group_size < 2:
        raise ValueError(group_size)
    g = rewards.view(-1, group_size)
    return (g - g.mean(dim=1, keepdim=True)).reshape(-1)


@wrong(
    "compute_rloo_advantages",
    "the sum of the other replies divided by K; their mean divides by the K - 1 of them",
)
@tie_zeroed
def rloo_divides_by_k(rewards, group_size):
    if group_size < 2:
        raise ValueError(group_size)
    g = rewards.view(-1, group_size)
    return (g - (g.sum(dim=1, keepdim=True) - g) / group_size).reshape(-1)


@wrong(
    "compute_rloo_advantages",
    "divided by the group's std: RLOO's advantage is r minus the others' mean, not normalized",
)
@tie_zeroed
def rloo_std_normalized(rewards, group_size):
    if group_size < 2:
        raise ValueError(group_size)
    g = rewards.view(-1, group_size)
    a = g - (g.sum(dim=1, keepdim=True) - g) / (group_size - 1)
    return (a / (g.std(dim=1, keepdim=True) + 1e-8)).reshape(-1)


@wrong(
    "compute_rloo_advantages",
    "wrong grouping: the K replies of one prompt are consecutive (reshape to (B, K) = view(-1, group_size) and "
    "reduce over dim=1, not view(group_size, -1) or dim=0)",
)
@tie_zeroed
def rloo_view_k_by_b(rewards, group_size):
    if group_size < 2:
        raise ValueError(group_size)
    g = rewards.view(group_size, -1)
    return (g - (g.sum(dim=0, keepdim=True) - g) / (group_size - 1)).reshape(-1)


@wrong(
    "compute_rloo_advantages",
    "sums over dim=0 of the (B, K) view, across prompts; a group's sum is over dim=1, its K replies",
)
@tie_zeroed
def rloo_sum_over_dim_0(rewards, group_size):
    if group_size < 2:
        raise ValueError(group_size)
    g = rewards.view(-1, group_size)
    return (g - (g.sum(dim=0, keepdim=True) - g) / (group_size - 1)).reshape(-1)


@wrong(
    "compute_rloo_advantages",
    "the baseline is the mean of the other replies of the whole batch; it is the mean of the other replies to the "
    "same prompt (its group)",
)
@tie_zeroed
def rloo_batch_mean(rewards, group_size):
    if group_size < 2:
        raise ValueError(group_size)
    n = rewards.numel()
    return rewards - (rewards.sum() - rewards) / max(n - 1, 1)


@wrong("compute_rloo_advantages", "instead of raising ValueError")
def rloo_group_size_1_not_refused(rewards, group_size):
    g = rewards.view(-1, max(group_size, 1))
    a = g - (g.sum(dim=1, keepdim=True) - g) / max(group_size - 1, 1)
    return a.masked_fill((g == g[:, :1]).all(dim=1, keepdim=True), 0.0).reshape(-1)


@wrong("compute_rloo_advantages", "instead of raising ValueError")
def rloo_group_size_1_divides_by_zero(rewards, group_size):
    if group_size >= 2:
        return KEY.after_grpo.compute_rloo_advantages(rewards, group_size)
    g = rewards.view(-1, max(group_size, 1))
    return (g - (g.sum(dim=1, keepdim=True) - g) / (group_size - 1)).reshape(-1)  # 0 / 0 for K = 1
