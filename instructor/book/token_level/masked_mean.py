"""The grading book of masked_mean (rlhf_practice/rl/token_level.py, TASKS.md §7.2): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.token_level._inputs import _junk, _mask, _random_mask
from instructor.cases import DTYPES, F64, _adder, _grad, _grads_of, _name, _perm, _show, _uniform, cases_of
from instructor.mistakes import right, wrong

# ================ masked_mean (TASKS.md §7.2) =======================================================================

# --- its cases


MEAN_BOOK_VALUES = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 50.0, 50.0]]  # TASKS.md §7.2
MEAN_BOOK_MASK = [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]]


def _fresh_mask(g: torch.Generator, full: int, num_tokens: int, dtype=F64) -> torch.Tensor:
    """Rows of a fresh variant of a book mask: one full row, then rows of 1 .. num_tokens - 1 tokens, in a
    drawn order."""
    lengths = [num_tokens] + torch.randint(1, num_tokens, (full - 1,), generator=g).tolist()
    return _mask([lengths[i] for i in _perm(g, full).tolist()], num_tokens, dtype)


@cases_of("masked_mean")
def masked_mean_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "masked_mean", fresh)
    values, mask = torch.tensor(MEAN_BOOK_VALUES, dtype=F64), torch.tensor(MEAN_BOOK_MASK, dtype=F64)
    example = f"the §7.2 example (values = {MEAN_BOOK_VALUES}"
    if fresh:
        mask = _fresh_mask(g, 2, 4)
        values = _junk(_uniform(g, -5, 5, 2, 4), mask, _uniform(g, 20, 80, 1).item())
        example = f"a fresh variant of the §7.2 example (values = {_show(values)}, mask = {_show(mask)}"
    book = [("values", values), ("mask", mask)]
    for dim in (None, 1):
        args = [("values", values), ("mask", mask), ("dim", dim)]
        add(
            f"book_example_dim_{dim}",
            f"masked_mean on {example}, dim={dim})",
            args,
            grads={"values": _grad(_grads_of(key.token_level.masked_mean, args, ["values"])["values"])},
            book="§7.2",
        )
    values, mask = torch.tensor([[1.0, 7.0], [3.0, 4.0]], dtype=F64), _mask([1, 0], 2)
    if fresh:  # 2-4 rows of 2-4 tokens; the row with no real token somewhere else
        rows, num_tokens = (int(n) for n in torch.randint(2, 5, (2,), generator=g))
        lengths = torch.randint(1, num_tokens + 1, (rows,), generator=g)
        lengths[int(torch.randint(0, rows, (), generator=g))] = 0
        values, mask = _uniform(g, -5, 5, rows, num_tokens), _mask(lengths.tolist(), num_tokens)
    add(
        "all_masked_row_gives_zero",
        f"masked_mean(values={_show(values)}, mask={_show(mask)}, dim=1) (a row has no real token)"
        if fresh
        else "masked_mean(values=[[1, 7], [3, 4]], mask=[[1, 0], [0, 0]], dim=1) (the second row has no real token)",
        [("values", values), ("mask", mask), ("dim", 1)],
    )
    values, mask = torch.tensor(MEAN_BOOK_VALUES), torch.tensor(MEAN_BOOK_MASK)
    if fresh:
        mask = _fresh_mask(g, 2, 4, torch.float32)
        values = _junk(_uniform(g, -5, 5, 2, 4, dtype=torch.float32), mask)
    add("inputs_unmodified", "masked_mean", [("values", values), ("mask", mask), ("dim", None)], unmodified=True)
    for dtype in DTYPES:
        for rows, num_tokens in ((3, 5), (16, 12)):
            for dim in (None, 1):
                mask = _random_mask(g, rows, num_tokens, dtype)
                values = _junk(torch.randn(rows, num_tokens, generator=g, dtype=F64).to(dtype), mask)
                add(
                    f"random_{_name(dtype)}_{rows}x{num_tokens}_dim_{dim}",
                    f"masked_mean on random {dtype} values of shape ({rows}, {num_tokens}), dim={dim}",
                    [("values", values), ("mask", mask), ("dim", dim)],
                )
    # After the random draws, so that the committed random cases stay as they were recorded.
    add("default_dim", f"masked_mean on {example}) without dim (its default, None: one mean)", book)
    values, mask = torch.tensor([[1.0, 7.0, 2.0], [3.0, 4.0, 5.0], [2.0, -1.0, 6.0]], dtype=F64), _mask([2, 0, 3], 3)
    if fresh:  # the row with no real token in a drawn position, real tokens in the others
        lengths = torch.randint(1, 4, (3,), generator=g)
        lengths[int(torch.randint(0, 3, (), generator=g))] = 0
        mask = _mask(lengths.tolist(), 3)
        values = _junk(_uniform(g, -5, 5, 3, 3), mask, _uniform(g, 20, 80, 1).item())
    args = [("values", values), ("mask", mask), ("dim", 1)]
    add(
        "all_masked_row_gradient",
        f"masked_mean(values={_show(values)}, mask={_show(mask)}, dim=1): the gradient w.r.t. values, finite "
        "(0) on the row with no real token",
        args,
        grads={"values": _grad(_grads_of(key.token_level.masked_mean, args, ["values"])["values"])},
    )
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


@right("masked_mean")
def where_and_count(values, mask, dim=None):
    count = mask.sum(dim=dim).clamp(min=1)
    return torch.where(mask > 0, values, torch.zeros_like(values)).sum(dim=dim) / count


@right("masked_mean")
def clamp_min_on_float(values, mask, dim=None):
    return (values * mask).sum(dim) / torch.clamp(mask.sum(dim), min=1.0)


@wrong("masked_mean", "plain mean: the padding was averaged in too (divide by sum(mask), not by the number of columns)")
def plain_mean_over_padding(values, mask, dim=None):
    return (values * mask).mean() if dim is None else (values * mask).mean(dim=dim)


@wrong("masked_mean", "the mask was not applied to the sum (padding values were added)")
def mask_not_applied_to_the_sum(values, mask, dim=None):
    return values.sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)


@wrong("masked_mean", "mean of the per-row means (with dim=None, one mean over every real token of the batch)")
def mean_of_row_means(values, mask, dim=None):
    row = (values * mask).sum(1) / mask.sum(1).clamp(min=1)
    return row.mean() if dim is None else row


@wrong("masked_mean", "wrong output shape")
def dim_ignored(values, mask, dim=None):
    return (values * mask).sum() / mask.sum().clamp(min=1)


@wrong("masked_mean", "0 / 0 for a row with no real token: clamp the denominator sum(mask) to at least 1")
def no_clamp(values, mask, dim=None):
    return (values * mask).sum(dim=dim) / mask.sum(dim=dim)


@wrong("masked_mean", "in-place")
def values_in_place(values, mask, dim=None):
    values.mul_(mask)
    return values.sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)


@wrong(
    "masked_mean",
    "NaN gradient from a row with no real token: torch.where(count > 0, sum / count, 0) still backpropagates "
    "through 0 / 0; divide by sum(mask).clamp(min=1) instead",
)
def nan_gradient_on_an_all_masked_row(values, mask, dim=None):
    total, count = (values * mask).sum(dim=dim), mask.sum(dim=dim)
    return torch.where(count > 0, total / count, torch.zeros_like(total))
