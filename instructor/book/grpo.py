"""The grading book of rlhf_practice/rl/grpo.py: compute_group_advantages (TASKS.md §3.2) and grpo_loss (§3.3).

For each graded function, in the order of the course table (rlhf_practice.course.GRADED): the builder of its
cases (registered with :func:`instructor.cases.cases_of`) and its catalogued mistakes and right variants
(:func:`instructor.mistakes.wrong` and :func:`~instructor.mistakes.right`), so that a function's whole grading
story is in one place. Written once, read by :func:`instructor.cases.build_cases` and
:data:`instructor.mistakes.CATALOG`, which import this module only when they need its functions.
"""

from __future__ import annotations

import torch

from instructor.cases import (
    DTYPES,
    F64,
    TIE_TOLERANCE,
    _adder,
    _grad,
    _grads_of,
    _name,
    _perm,
    _show,
    _tie_value,
    _uniform,
    cases_of,
)
from instructor.mistakes import right, tie_zeroed, wrong

# ================ compute_group_advantages (TASKS.md §3.2) ==========================================================

# --- its cases


BOOK_GROUP_REWARDS = [1.0, 0.0, -1.0, 0.2, 0.4, 0.9]  # TASKS.md §3.1: B = 2 prompts x K = 3 replies


@cases_of("compute_group_advantages")
def group_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "compute_group_advantages", fresh)
    rewards, example = torch.tensor(BOOK_GROUP_REWARDS), "the 2 x 3 task-book example"
    if fresh:
        rewards = _uniform(g, -1, 1, 6, dtype=torch.float32)
        example = f"a fresh variant of the 2 x 3 task-book example (rewards = {_show(rewards)})"
    for normalize in (True, False):
        add(
            "book_example" + ("" if normalize else "_without_normalize"),
            f"compute_group_advantages on {example}" + ("" if normalize else " (normalize=False)"),
            [("rewards", rewards), ("group_size", 3)],
            kwargs={"normalize": normalize},
            book="§3.1",
        )
    rewards = torch.tensor([0.5, 0.5, 0.5, 0.5, 1.0, -1.0, 0.0, 0.0, -0.25, -0.25, -0.25, -0.25])
    if fresh:  # two groups of equal rewards at other values, one group of different ones, in another order
        groups = [_uniform(g, -1, 1, 1).expand(4), _uniform(g, -1, 1, 4), _uniform(g, -1, 1, 1).expand(4)]
        rewards = torch.cat([groups[i] for i in _perm(g, 3).tolist()]).float()
    for normalize in (True, False):
        add(
            f"equal_rewards_give_zero_normalize_{normalize}",
            f"compute_group_advantages with groups of equal rewards (normalize={normalize})",
            [("rewards", rewards), ("group_size", 4)],
            kwargs={"normalize": normalize},
        )
    for dtype in DTYPES:  # ties at values whose float32 mean is off by an ulp, beside a group that is not tied
        values, spread = [1.4, 0.4, 1 / 3], torch.tensor([0.0, 1.0, 0.5, 0.2, 0.9, 0.4, 0.7, 0.6])
        if fresh:
            values, spread = [_tie_value(g) for _ in range(3)], _uniform(g, -1, 1, 8)
        groups = [torch.full((8,), v, dtype=F64) for v in values] + [spread]
        rewards = torch.cat([groups[i] for i in (_perm(g, 4).tolist() if fresh else range(4))]).to(dtype)
        tied = ", ".join(f"{v:.4g}" for v in values)
        for normalize in (True, False):
            add(
                f"tied_groups_non_dyadic_{_name(dtype)}_normalize_{normalize}",
                f"compute_group_advantages on 4 groups of 8 ({dtype}), three tied (all 8 rewards {tied}) and one "
                f"not, normalize={normalize}: a tied group's advantages are 0 (to within 0.01)",
                [("rewards", rewards), ("group_size", 8)],
                kwargs={"normalize": normalize},
                atol=TIE_TOLERANCE,
            )
    rewards = torch.tensor(BOOK_GROUP_REWARDS)
    if fresh:
        rewards = _uniform(g, -1, 1, 6, dtype=torch.float32)
    add("inputs_unmodified", "compute_group_advantages", [("rewards", rewards), ("group_size", 3)], unmodified=True)
    for dtype in DTYPES:
        for num_prompts, group_size in ((1, 4), (2, 3), (3, 2), (8, 4), (5, 8)):
            for normalize in (True, False):
                rewards = (torch.rand(num_prompts * group_size, generator=g, dtype=F64) * 2 - 1).to(dtype)
                # Give groups different offsets so that group and batch statistics differ clearly.
                rewards = rewards + torch.arange(num_prompts, dtype=dtype).repeat_interleave(group_size) * 0.5
                add(
                    f"random_{_name(dtype)}_B{num_prompts}_K{group_size}_normalize_{normalize}",
                    f"compute_group_advantages on random {dtype} rewards, B={num_prompts}, group_size={group_size}, normalize={normalize}",
                    [("rewards", rewards), ("group_size", group_size)],
                    kwargs={"normalize": normalize},
                )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("compute_group_advantages")
def loop_over_groups(rewards, group_size, normalize=True, eps=1e-8):
    out = []
    for i in range(0, rewards.numel(), group_size):
        g = rewards[i : i + group_size]
        if bool((g == g[0]).all()):  # a tie: no reply is better than another
            out.append(torch.zeros_like(g))
            continue
        a = g - g.mean()
        if normalize:
            a = a / (g.std() + eps)
        out.append(a)
    return torch.cat(out)


@right("compute_group_advantages")
def repeat_interleave_stats(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.reshape(-1, group_size).double()  # statistics in float64: a float32 tie is then 0 to within ~1e-8
    mean = g.mean(1).repeat_interleave(group_size)
    a = rewards.double() - mean
    if normalize:
        a = a / (g.std(1).repeat_interleave(group_size) + eps)
    return a.to(rewards.dtype)


@right("compute_group_advantages")
def where_std_is_rounding(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    std = g.std(dim=1, keepdim=True)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (std + eps)
    tie = std <= 16 * torch.finfo(g.dtype).eps * g.abs().amax(dim=1, keepdim=True)  # a spread of a few ulps
    return torch.where(tie, torch.zeros_like(a), a).reshape(-1)


@wrong(
    "compute_group_advantages",
    "a tied group (all K rewards equal) got advantages that are not 0: rounding puts its float32 mean ~1e-7 off and its "
    "std ~1e-7, far above eps, and (r - mean) / (std + eps) makes that noise about +-0.9 (+-12 beside other groups); "
    "set a tied group's advantages to 0",
)
def tied_group_not_zero(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (g.std(dim=1, keepdim=True) + eps)
    return a.reshape(-1)


@wrong(
    "compute_group_advantages",
    "wrong grouping order: the K replies of one prompt are consecutive (reshape to (B, K) = (-1, group_size), not (group_size, -1))",
)
def wrong_grouping_order(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(group_size, -1)
    a = g - g.mean(dim=0, keepdim=True)
    if normalize:
        a = a / (g.std(dim=0, keepdim=True) + eps)
    return a.reshape(-1)


@wrong(
    "compute_group_advantages",
    "rewards.view(group_size, -1) is (K, B): each row holds B consecutive rewards, replies of different prompts (group with view(-1, group_size), i.e. (B, K), and reduce over dim=1)",
)
def swapped_view_reduced_over_rows(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(group_size, -1)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (g.std(dim=1, keepdim=True) + eps)
    return a.reshape(-1)


@wrong(
    "compute_group_advantages",
    "statistics over dim=0 of the (B, K) view, across prompts; a group's mean and std are over dim=1, its K replies",
)
def statistics_across_prompts(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=0, keepdim=True)
    if normalize:
        a = a / (g.std(dim=0, keepdim=True) + eps)
    return a.reshape(-1)


@wrong("compute_group_advantages", "normalize flag ignored")
@tie_zeroed
def group_always_normalizes(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = (g - g.mean(dim=1, keepdim=True)) / (g.std(dim=1, keepdim=True) + eps)
    return a.reshape(-1)


@wrong("compute_group_advantages", "normalize flag ignored")
def group_never_normalizes(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    return (g - g.mean(dim=1, keepdim=True)).reshape(-1)


@wrong("compute_group_advantages", "wrong sign (A = r - baseline)")
def mean_minus_rewards(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g.mean(dim=1, keepdim=True) - g
    if normalize:
        a = a / (g.std(dim=1, keepdim=True) + eps)
    return a.reshape(-1)


@wrong("compute_group_advantages", "baseline is the whole batch's mean instead of each group's mean")
def global_mean_baseline(rewards, group_size, normalize=True, eps=1e-8):
    a = rewards - rewards.mean()
    if normalize:
        a = a / (rewards.std() + eps)
    return a


@wrong(
    "compute_group_advantages",
    "normalized by the batch std instead of each group's own std (GRPO divides by the group's std)",
)
def batch_std(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = (g - g.mean(dim=1, keepdim=True)).reshape(-1)
    if normalize:
        a = a / (rewards.std() + eps)
    return a


@wrong("compute_group_advantages", "normalized the centred advantages over the whole batch instead of per group")
def task_book_flatten_then_batch_normalize(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = (g - g.mean(dim=1, keepdim=True)).reshape(-1)
    if normalize:
        a = (a - a.mean()) / (a.std() + eps)
    return a


@wrong("compute_group_advantages", "population std (use torch's default unbiased std)")
def group_population_std(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (g.std(dim=1, keepdim=True, unbiased=False) + eps)
    return a.reshape(-1)


@wrong("compute_group_advantages", "NaN from a zero std: a group whose rewards are all equal needs (group std + eps)")
def group_no_eps(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / g.std(dim=1, keepdim=True)
    return a.reshape(-1)


@wrong("compute_group_advantages", "wrong output shape")
def not_flattened(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    a = g - g.mean(dim=1, keepdim=True)
    if normalize:
        a = a / (g.std(dim=1, keepdim=True) + eps)
    return a


@wrong("compute_group_advantages", "in place")
@tie_zeroed
def group_rewards_in_place(rewards, group_size, normalize=True, eps=1e-8):
    g = rewards.view(-1, group_size)
    g -= g.mean(dim=1, keepdim=True).clone()
    if normalize:
        g /= g.std(dim=1, keepdim=True) + eps
    return rewards


# ================ grpo_loss (TASKS.md §3.3) =========================================================================

# --- its cases


@cases_of("grpo_loss")
def grpo_loss_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "grpo_loss", fresh)
    args = [
        ("logprobs", torch.tensor([-2.0, -3.0, -1.0, -4.0])),
        ("advantages", torch.tensor([1.0, -1.0, 0.5, -0.5])),
    ]
    call, expected = "grpo_loss(logprobs=[-2, -3, -1, -4], advantages=[1, -1, 0.5, -0.5])", " (= -2.5 / 4)"
    grad = torch.tensor([-0.25, 0.25, -0.125, 0.125])  # d loss / d logprobs = -A / N
    if fresh:
        lp, adv = _uniform(g, -5, -0.5, 4, dtype=torch.float32), _uniform(g, -1.5, 1.5, 4, dtype=torch.float32)
        args = [("logprobs", lp), ("advantages", adv)]
        call, expected = f"grpo_loss(logprobs={_show(lp)}, advantages={_show(adv)})", ""
        grad = _grads_of(key.grpo.grpo_loss, args, ["logprobs"])["logprobs"]
    add("hand_computed", call + expected, args)
    add(
        "gradients",
        call,
        args,
        grads={
            "logprobs": _grad(grad),
            "advantages": _grad(torch.zeros(4), "missing detach: use advantages.detach()"),
        },
    )
    logprobs = torch.tensor([-250.0, -310.0, -120.0])
    if fresh:
        logprobs = _uniform(g, -350, -100, 3, dtype=torch.float32)
    add(
        "zero_advantages_give_zero",
        "grpo_loss with all advantages 0",
        [("logprobs", logprobs), ("advantages", torch.zeros(3))],
    )
    if fresh:
        f32 = torch.float32
        args = [("logprobs", _uniform(g, -5, -0.5, 4, dtype=f32)), ("advantages", _uniform(g, -1, 1, 4, dtype=f32))]
    add("inputs_unmodified", "grpo_loss", args, unmodified=True)
    for dtype in DTYPES:
        for n in (2, 12, 256):
            logprobs = (torch.rand(n, generator=g, dtype=F64) * -300).to(dtype)
            advantages = torch.randn(n, generator=g, dtype=F64).to(dtype)
            add(
                f"random_{_name(dtype)}_n{n}",
                f"grpo_loss on random {dtype} inputs, N={n}",
                [("logprobs", logprobs), ("advantages", advantages)],
            )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("grpo_loss")
def explicit_sum_over_n(logprobs, advantages):
    return -(logprobs * advantages.detach()).sum() / logprobs.numel()


@wrong("grpo_loss", "wrong sign (loss = -mean(A * logprobs))")
def grpo_objective_not_negated(logprobs, advantages):
    return (advantages.detach() * logprobs).mean()


@wrong("grpo_loss", "sum instead of mean over the batch")
def grpo_sum_over_batch(logprobs, advantages):
    return -(advantages.detach() * logprobs).sum()


@wrong("grpo_loss", "used exp(logprobs) (probabilities) instead of log-probs")
def probs(logprobs, advantages):
    return -(advantages.detach() * logprobs.exp()).mean()


@wrong("grpo_loss", "advantages left out (plain mean of log-probs)")
def advantages_left_out(logprobs, advantages):
    return -logprobs.mean()


@wrong("grpo_loss", "missing detach")
def grpo_advantages_not_detached(logprobs, advantages):
    return -(advantages * logprobs).mean()


@wrong("grpo_loss", "do not detach logprobs")
def logprobs_detached(logprobs, advantages):
    return -(advantages.detach() * logprobs.detach()).mean()


@wrong("grpo_loss", "wrong output shape")
def grpo_no_mean(logprobs, advantages):
    return -(advantages.detach() * logprobs)
