"""Input strategies and checks that the property laws of several student files share."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from hypothesis import strategies as st

from properties import close, fmt, got

# --- input strategies -------------------------------------------------------------------------------

DTYPES = st.sampled_from([torch.float32, torch.float64])
# Rewards for a tie: values whose float32 mean over a group is an ulp off (1.4 over 8, 12.4 over 3 or 6, ...), so
# that rounding alone does not make the tie's advantages 0, then any value.
TIE_VALUES = st.sampled_from([1.4, 12.4, 0.6, 100.3, 0.4, 1 / 3]) | st.floats(-20, 20, allow_nan=False)


def floats(lo: float = -3.0, hi: float = 3.0) -> st.SearchStrategy:
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def tensor(shape: tuple[int, ...], lo: float = -3.0, hi: float = 3.0) -> st.SearchStrategy:
    n = math.prod(shape)
    return st.lists(floats(lo, hi), min_size=n, max_size=n).map(
        lambda xs: torch.tensor(xs, dtype=torch.float64).reshape(shape)
    )


def response_mask(rows: int, cols: int, least: int = 0) -> st.SearchStrategy:
    """(rows, cols) float64 mask, each row ones then zeros (a reply's real tokens, then padding)."""
    lengths = st.lists(st.integers(least, cols), min_size=rows, max_size=rows)
    return lengths.map(lambda ls: (torch.arange(cols) < torch.tensor(ls)[:, None]).double())


def unchanged(fn: Callable, args: tuple, any_float: tuple[int, ...] = ()) -> str | None:
    """Call ``fn(*args)``; the name of the first input it changed in place (tensor, list or model mode), else None.
    Float64 inputs must give float64 results, but for the parts of a tuple result at ``any_float`` (a metric)."""
    before = [
        a.detach().clone() if isinstance(a, torch.Tensor) else list(a) if isinstance(a, list) else a for a in args
    ]
    out = fn(*args)
    for i, (b, a) in enumerate(zip(before, args)):
        if isinstance(a, torch.Tensor) and not torch.equal(b, a.detach()):
            return f"argument {i + 1} was changed in place to {fmt(a)}"
        if isinstance(a, list) and b != a:
            return f"argument {i + 1} was changed in place to {a}"
    for i, part in enumerate(out if isinstance(out, tuple) else (out,)):
        if i in any_float:
            continue
        if isinstance(part, torch.Tensor) and part.is_floating_point() and part.dtype != torch.float64:
            return f"returned dtype {part.dtype} for float64 inputs (keep the input's dtype)"
    return None


def each_row(fn: Callable, args: list, rows: int) -> list:
    """``fn`` called on each row of the batch alone: every tensor argument cut to row i (kept 2-D), the rest as is."""
    return [fn(*(a[i : i + 1] if isinstance(a, torch.Tensor) else a for a in args)) for i in range(rows)]


def raises_value_error(call: Callable[[], object]) -> str | None:
    """None when ``call()`` raises ValueError (an unknown mode argument), else what it returned instead."""
    try:
        out = call()
    except ValueError:
        return None
    return f"{got(out)} instead of raising ValueError"


def gradcheck(f: Callable, inputs: list[torch.Tensor], names: str) -> str | None:
    """torch.autograd.gradcheck of ``f`` at ``inputs`` (float64); None if autograd agrees with central differences."""
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    out = f(*leaves)
    parts = out if isinstance(out, tuple) else (out,)
    if not any(isinstance(p, torch.Tensor) and p.requires_grad for p in parts):
        return f"the result carries no gradient to {names}"
    try:
        torch.autograd.gradcheck(f, leaves, eps=1e-6, atol=1e-5, rtol=1e-4)
    except Exception as err:  # noqa: BLE001 - gradcheck's GradcheckError, or a failure inside f
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        numerical = next((line for line in lines if line.startswith("numerical")), "")
        analytical = next((line for line in lines if line.startswith("analytical")), "")
        detail = f" ({numerical}; {analytical})" if numerical else f" ({lines[0] if lines else type(err).__name__})"
        return f"autograd's gradient w.r.t. {names} differs from float64 central differences{detail}".replace(
            "tensor(", "("
        )
    return None


def away_from(x: torch.Tensor, points: list[float], gap: float = 1e-3) -> bool:
    """No element of ``x`` within ``gap`` of a kink (the central differences straddle it)."""
    return all(bool(((x - p).abs() > gap).all()) for p in points)


# --- shared by several student files -----------------------------------------------------------------


def _olds(new: str, old: str, inside: bool = False, values: bool = False) -> Callable[[dict], dict]:
    """Turn the drawn "log_ratio" (and "value_step") into the old inputs a function takes: old = new - log_ratio.
    ``inside``: squeeze every ratio (and value step) inside its clip range first."""

    def convert(ex: dict) -> dict:
        lr = ex["log_ratio"]
        if inside:
            lr = torch.log1p(torch.tanh(lr) * ex["clip_range"] * 0.99)
        out = {k: v for k, v in ex.items() if k not in ("log_ratio", "value_step")}
        out[old] = ex[new] - lr
        if values:
            step = ex["value_step"]
            if inside:
                step = torch.tanh(step) * ex["clip_range_value"] * 0.99
            out["old_values"] = ex["new_values"] - step
        return out

    return convert


def _ratio(ex: dict, new: str, old: str) -> torch.Tensor:
    return torch.exp(ex[new] - ex[old])


def _pad(x: torch.Tensor, cols: int, fill: float = 0.0) -> torch.Tensor:
    """``x`` with ``cols`` more columns of ``fill`` on the right (padding)."""
    return torch.cat([x, torch.full((x.shape[0], cols), fill, dtype=x.dtype)], dim=1)


def clipped_loss_inputs(shape: st.SearchStrategy, **clip_ranges: st.SearchStrategy) -> st.SearchStrategy:
    """The inputs of a clipped GRPO loss (grpo_clip_loss, §9.2, and task 14's): for a (N, T) ``shape``, logprobs,
    old_logprobs (logprobs minus a log-ratio within 0.6), ref_logprobs, one advantage per reply and a response
    mask, then the given clip ranges ("clip_range", or "clip_range_low" and "clip_range_high"), beta, loss_type,
    max_tokens and "pad" (how many padding columns :func:`other_padding` adds)."""
    return shape.flatmap(
        lambda s: st.fixed_dictionaries(
            {
                "logprobs": tensor(s, -4, 0),
                "log_ratio": tensor(s, -0.6, 0.6),
                "ref_logprobs": tensor(s, -4, 0),
                "advantages": tensor(s[:1]),
                "mask": response_mask(*s),
                **clip_ranges,
                "beta": floats(0.0, 0.5),
                "loss_type": st.sampled_from(["grpo", "dapo", "dr_grpo"]),
                "max_tokens": st.integers(s[1], 6),
                "pad": st.integers(1, 2),
            }
        )
    ).map(_olds("logprobs", "old_logprobs"))


def loss_reduction(x: torch.Tensor, m: torch.Tensor, loss_type: str, max_tokens: int) -> torch.Tensor:
    """A per-token loss ``x`` reduced as ``loss_type`` says: "grpo" each reply's mean over its real tokens, then
    their mean; "dapo" the mean over every real token of the batch; "dr_grpo" the sum over N * max_tokens."""
    if loss_type == "grpo":
        return ((x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)).mean()
    if loss_type == "dapo":
        return (x * m).sum() / m.sum().clamp(min=1)
    return (x * m).sum() / (m.shape[0] * max_tokens)


def other_padding(fn: Callable, ex: dict, args: Callable[..., tuple]) -> str | None:
    """None if other values under the padding of a :func:`clipped_loss_inputs` example, and ``ex["pad"]`` extra
    padding columns, change ``fn``'s loss in nothing; ``args(**change)`` are its arguments with some inputs changed."""
    m, k = ex["mask"], ex["pad"]
    base = fn(*args())
    if bad := _number(base):
        return bad
    change = {
        name: _pad(torch.where(m > 0, ex[name], ex[name] - 1.3 + 0.5 * i), k, -0.4 + 0.2 * i)
        for i, name in enumerate(("logprobs", "old_logprobs", "ref_logprobs"))
    }
    out = fn(*args(mask=_pad(m, k), **change))
    return None if close(out, base.detach()) else f"{got(out)} with other padding, {fmt(base)} before"


def _number(out: object) -> str | None:
    return None if isinstance(out, torch.Tensor) and out.dim() == 0 else f"{got(out)}, expected one number"
