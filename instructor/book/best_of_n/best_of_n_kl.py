"""The grading book of best_of_n_kl (rlhf_practice/rl/best_of_n.py, TASKS.md §15.2): see :mod:`instructor.book`."""

from __future__ import annotations

import torch

from instructor.book.best_of_n._shared import F32, _ints
from instructor.cases import F64, _adder, _name, _perm, _show, _uniform, cases_of
from instructor.mistakes import right, wrong

# --- its cases

BOOK_KL_N = [1, 2, 4, 16, 1024]  # TASKS.md §15.2: 0, log 2 - 1/2, log 4 - 3/4, ...: best-of-1 is the policy itself


INTEGER_N = (
    "an integer n, a Python int or an integer tensor, gives a float64 result: convert it first, e.g. "
    "torch.as_tensor(n, dtype=torch.float64); a floating n keeps its own dtype"
)


@cases_of("best_of_n_kl")
def best_of_n_kl_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    plain = _adder(key, cases, "best_of_n_kl", fresh)

    def add(id: str, what: str, args: list, **extra) -> None:
        if not torch.as_tensor(dict(args)["n"]).is_floating_point():  # the answer's float64 is no input's dtype
            extra.setdefault("dtype_rule", INTEGER_N)
        plain(id, what, args, **extra)

    n, example = torch.tensor(BOOK_KL_N), "the §15.2 example"
    if fresh:  # n = 1 and four other counts, an int64 tensor as the book's
        n = torch.tensor([1, *_ints(g, 3, 3000, 4)])
        example = "a fresh variant of the §15.2 example"
    add(
        "book_example",
        f"best_of_n_kl on {example}, n = {_show(n)} (an int64 tensor: the result is float64)",
        [("n", n)],
        book="§15.2",
    )
    one = 3 if not fresh else _ints(g, 5, 500, 1)[0]
    add(
        "python_int",
        f"best_of_n_kl({one}) (a Python int: the result is a 0-dim float64 tensor)",
        [("n", one)],
    )
    add(
        "python_int_1_is_0",
        "best_of_n_kl(1) (best-of-1 is the policy itself: KL 0, a 0-dim float64 tensor)",
        [("n", 1)],
    )
    zero_dim = torch.tensor(8 if not fresh else _ints(g, 9, 2000, 1)[0])
    add(
        "zero_dim_int_tensor",
        f"best_of_n_kl(torch.tensor({zero_dim.item()})) (a 0-dim int64 tensor: a 0-dim float64 result)",
        [("n", zero_dim)],
    )
    shaped = torch.tensor([[1, 3], [10, 100]], dtype=torch.int32)
    if fresh:
        shaped = torch.tensor(_ints(g, 2, 400, 4), dtype=torch.int32)[_perm(g, 4)].view(2, 2)
    add(
        "int32_2x2",
        f"best_of_n_kl on an int32 tensor of shape (2, 2), n = {_show(shaped)} (the result is float64)",
        [("n", shaped)],
    )
    for dtype, values in ((F32, [[1.0, 2.0, 3.0], [32.0, 256.0, 1e6]]), (F64, [[1.0, 5.0], [50.0, 4096.0]])):
        n = torch.tensor(values, dtype=dtype)
        if fresh:
            n = torch.tensor(_ints(g, 2, 10**5, n.numel()), dtype=dtype)[_perm(g, n.numel())].view(n.shape)
        add(
            f"{_name(dtype)}_shaped",
            f"best_of_n_kl on a {dtype} tensor of shape {tuple(n.shape)}, n = {_show(n)} (the result keeps its dtype)",
            [("n", n)],
        )
    below = [0, -2] if not fresh else [0, -_ints(g, 1, 50, 1)[0]]
    for value in below:
        add(
            f"python_int_{value}_raises".replace("-", "minus_"),
            f"best_of_n_kl({value}) (fewer than one sample: raise ValueError)",
            [("n", value)],
            raises="ValueError",
        )
    with_zero = torch.tensor([4, 0, 2])
    if fresh:
        with_zero = torch.tensor([0, *_ints(g, 1, 60, 3)])[_perm(g, 4)]
    add(
        "tensor_with_a_0_raises",
        f"best_of_n_kl on n = {_show(with_zero)} (one n below 1: raise ValueError)",
        [("n", with_zero)],
        raises="ValueError",
    )
    half = torch.tensor([1.0, 0.5]) if not fresh else torch.cat([_uniform(g, 1, 9, 1), _uniform(g, 0.05, 0.95, 1)])
    add(
        "float_below_1_raises",
        f"best_of_n_kl on the float tensor n = {_show(half)} (one n below 1: raise ValueError)",
        [("n", half.to(F32))],
        raises="ValueError",
    )
    kept = torch.tensor([2.0, 7.0, 64.0], dtype=F64)
    if fresh:
        kept = torch.tensor(_ints(g, 2, 900, 3), dtype=F64)
    add("inputs_unmodified", "best_of_n_kl", [("n", kept)], unmodified=True)
    return cases


# --- its catalogued mistakes and right variants, in the order of precedence of their diagnoses


def _as_float(n):
    """n as a tensor in the dtype of its result: float64 for an int or an integer tensor, else its own."""
    n = torch.as_tensor(n)
    return n if n.is_floating_point() else n.to(torch.float64)


@right("best_of_n_kl")
def kl_log_n_minus_1_plus_1_over_n(n):
    n = _as_float(n)
    if (n < 1).any():
        raise ValueError("n must be at least 1")
    return torch.log(n) - 1 + 1 / n


@right("best_of_n_kl")
def kl_in_float64_then_cast(n):
    t = torch.as_tensor(n)
    out_dtype = t.dtype if t.is_floating_point() else torch.float64
    x = t.to(torch.float64)
    if not bool((x >= 1).all()):
        raise ValueError(f"n >= 1 needed, got {x.min().item()}")
    return (x.log() - (x - 1) / x).to(out_dtype)


@wrong(
    "best_of_n_kl",
    "log n alone: best-of-n's KL is log n - (n - 1)/n (log n is only its upper bound; the (n - 1)/n makes "
    "best-of-1 exactly 0)",
)
def kl_log_n(n):
    n = _as_float(n)
    if (n < 1).any():
        raise ValueError(n)
    return torch.log(n)


@wrong("best_of_n_kl", "the fraction upside down: it is log n - (n - 1)/n, not log n - n/(n - 1)")
def kl_fraction_upside_down(n):
    n = _as_float(n)
    if (n < 1).any():
        raise ValueError(n)
    return torch.log(n) - n / (n - 1)


@wrong("best_of_n_kl", "log n - (n + 1)/n; the fraction is (n - 1)/n, so that best-of-1 gets KL 0")
def kl_n_plus_1(n):
    n = _as_float(n)
    if (n < 1).any():
        raise ValueError(n)
    return torch.log(n) - (n + 1) / n


@wrong("best_of_n_kl", "the sign flipped: the KL is log n - (n - 1)/n, which is >= 0")
def kl_sign_flipped(n):
    n = _as_float(n)
    if (n < 1).any():
        raise ValueError(n)
    return (n - 1) / n - torch.log(n)


@wrong("best_of_n_kl", "in bits (log2); the KL is in nats: the natural log, torch.log")
def kl_in_bits(n):
    n = _as_float(n)
    if (n < 1).any():
        raise ValueError(n)
    return torch.log2(n) - (n - 1) / n


@wrong("best_of_n_kl", "raised ValueError")
def kl_refuses_n_1(n):
    n = _as_float(n)
    if (n <= 1).any():
        raise ValueError("best-of-n needs n > 1")
    return torch.log(n) - (n - 1) / n


@wrong("best_of_n_kl", "instead of raising ValueError")
def kl_below_1_not_refused(n):
    n = _as_float(n)
    return torch.log(n) - (n - 1) / n


@wrong("best_of_n_kl", "returned dtype torch.float32, expected torch.float64")
def kl_float32_for_ints(n):
    n = torch.as_tensor(n)
    if (n < 1).any():
        raise ValueError(n)
    return torch.log(n) - (n - 1) / n  # an integer n: float32, torch's default dtype


@wrong("best_of_n_kl", "returned dtype torch.int64, expected torch.float64")
def kl_into_the_int_tensor(n):
    n = torch.as_tensor(n)
    if (n < 1).any():
        raise ValueError(n)
    out = torch.empty_like(n)
    out.copy_(torch.log(n.double()) - (n - 1) / n.double())  # truncated to n's integer dtype
    return out


@wrong("best_of_n_kl", "returned float, expected a torch.Tensor")
def kl_python_float_for_an_int(n):
    if isinstance(n, int):
        if n < 1:
            raise ValueError(n)
        import math

        return math.log(n) - (n - 1) / n
    n = _as_float(n)
    if (n < 1).any():
        raise ValueError(n)
    return torch.log(n) - (n - 1) / n


@wrong("best_of_n_kl", "returned dtype torch.float64, expected torch.float32")
def kl_always_float64(n):
    n = torch.as_tensor(n).to(torch.float64)
    if (n < 1).any():
        raise ValueError(n)
    return torch.log(n) - (n - 1) / n
