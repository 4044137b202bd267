"""The grading book of filter_groups (rlhf_practice/rl/after_grpo.py, TASKS.md §14.6): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.after_grpo._shared import (
    _own,
)
from instructor.cases import DTYPES, _adder, _name, _show, cases_of
from instructor.mistakes import right, wrong

# ================ filter_groups (TASKS.md §14.6) ====================================================================

# --- its cases

BOOK_CORRECT = [1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]  # TASKS.md §14.6: B = 4 prompts x K = 3


def _groups(g: torch.Generator, num_prompts: int, group_size: int) -> torch.Tensor:
    """0/1 outcomes of ``num_prompts`` groups: some all right, some all wrong, some with one odd reply, some mixed."""
    rows = []
    for i in range(num_prompts):
        kind = (i + int(torch.randint(0, 4, (), generator=g))) % 4
        row = torch.full((group_size,), float(kind == 0))
        if kind == 2:
            row = torch.zeros(group_size)
            row[int(torch.randint(0, group_size, (), generator=g))] = 1.0
        elif kind == 3:
            row = (torch.rand(group_size, generator=g) < 0.5).float()
        rows.append(row)
    return torch.cat(rows)


@cases_of("filter_groups")
def filter_groups_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "filter_groups", fresh)
    correct, example = torch.tensor(BOOK_CORRECT), "the 4 x 3 task-book example"
    if fresh:  # rolled, never the book's order: a hidden case never has a published case's inputs
        order = torch.arange(4).roll(int(torch.randint(1, 4, (), generator=g)))
        correct = correct.view(4, 3)[order].reshape(-1)
        example = f"the 4 x 3 task-book example with its groups in another order ({_show(correct)})"
    add(
        "book_example",
        f"filter_groups on {example}, group_size=3",
        [("correct", correct), ("group_size", 3)],
        book="§14.6",
    )
    add(
        "book_example_bool",
        f"filter_groups on {example} as a bool tensor, group_size=3",
        [("correct", correct.bool()), ("group_size", 3)],
    )
    add("inputs_unmodified", "filter_groups", [("correct", correct), ("group_size", 3)], unmodified=True)
    # B == K: a grouping of (K, B) returns the right shape, so only the values tell it
    square = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0])
    if fresh:
        square = square.view(3, 3)[torch.arange(3).roll(int(torch.randint(1, 3, (), generator=g)))].reshape(-1)
    add("square", f"filter_groups on 3 groups of 3 ({_show(square)})", [("correct", square), ("group_size", 3)])
    odd = (5, 3)  # the odd reply of each group
    if fresh:  # other positions than the published ones
        odd = tuple((o + int(torch.randint(1, 16, (), generator=g))) % 16 for o in odd)
    rare = torch.zeros(32)
    rare[[odd[0], 16 + odd[1]]] = 1.0
    rare[16:] = 1.0 - rare[16:]
    add(
        "one_odd_reply_in_16",
        "filter_groups on 2 groups of 16, each with one reply unlike the other 15 (one right among 15 wrong ones, "
        "one wrong among 15 right ones): both are kept",
        [("correct", rare), ("group_size", 16)],
    )
    single = torch.tensor([1.0, 0.0, 1.0])
    if fresh:  # 4 to 6 replies, not the published 3
        single = (torch.rand(int(torch.randint(4, 7, (), generator=g)), generator=g) < 0.5).float()
    add(
        "group_size_1",
        "filter_groups with group_size=1 (a group of one reply never differs: none is kept)",
        [("correct", single), ("group_size", 1)],
    )
    rng = g if fresh else _own(1406)
    for dtype in (*DTYPES, torch.bool):
        for num_prompts, group_size in ((3, 4), (5, 3), (8, 8)):
            correct = _groups(rng, num_prompts, group_size)
            add(
                f"random_{_name(dtype)}_B{num_prompts}_K{group_size}",
                f"filter_groups on random {dtype} outcomes, B={num_prompts}, group_size={group_size}",
                [("correct", correct.to(dtype)), ("group_size", group_size)],
            )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("filter_groups")
def filter_groups_by_count(correct, group_size):
    right_ones = correct.reshape(-1, group_size).float().sum(dim=1)
    return (right_ones > 0) & (right_ones < group_size)


@right("filter_groups")
def filter_groups_min_max(correct, group_size):
    g = correct.view(-1, group_size).to(torch.float64)
    return g.amax(dim=1) != g.amin(dim=1)


@wrong(
    "filter_groups",
    "inverted: keep the groups whose outcomes DIFFER (some right, some wrong); drop the tied ones",
)
def filter_groups_inverted(correct, group_size):
    g = correct.view(-1, group_size)
    return (g == g[:, :1]).all(dim=1)


@wrong(
    "filter_groups",
    "kept every group with a right reply: a group whose K replies are ALL right is tied too (dropped as the all-wrong "
    "ones are)",
)
def filter_groups_any_correct(correct, group_size):
    return correct.view(-1, group_size).bool().any(dim=1)


@wrong(
    "filter_groups",
    "wrong grouping: the K replies of one prompt are consecutive (reshape to (B, K) = view(-1, group_size) and "
    "reduce over dim=1, not view(group_size, -1) or dim=0)",
)
def filter_groups_view_k_by_b(correct, group_size):
    g = correct.view(group_size, -1)
    return (g != g[:1]).any(dim=0)


@wrong(
    "filter_groups",
    "a tolerance misjudged groups with one odd reply: a group of 16 with a single right (or wrong) reply differs and "
    "is kept; compare the outcomes exactly",
)
def filter_groups_mean_tolerance(correct, group_size):
    mean = correct.view(-1, group_size).double().mean(dim=1)
    return (mean > 0.1) & (mean < 0.9)


@wrong(
    "filter_groups",
    "a std threshold misjudged groups with one odd reply (their std is only ~0.25 over 16); a group differs when "
    "any outcome differs from the others: compare the outcomes exactly",
)
def filter_groups_std_threshold(correct, group_size):
    return correct.view(-1, group_size).double().std(dim=1) > 0.3


@wrong("filter_groups", "wrong output shape")
def filter_groups_per_reply(correct, group_size):
    g = correct.view(-1, group_size)
    return (g != g[:, :1]).any(dim=1, keepdim=True).expand_as(g).reshape(-1)
