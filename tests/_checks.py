"""Comparisons that explain a wrong result in words, naming the mistake when one fits."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch


def call(section: str, fn: Callable, *args, **kwargs):
    """Call a student function; turn an unfinished stub or a crash into a readable failure."""
    name = getattr(fn, "__name__", "function")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        message = f"{name} is not implemented yet (it raises NotImplementedError). See TASKS.md {section}."
    except Exception as err:  # noqa: BLE001 - any crash is reported as the student's failure
        message = f"{name} raised {type(err).__name__}: {err}. Reread TASKS.md {section}."
    pytest.fail(message, pytrace=False)


def tolerances(dtype: torch.dtype) -> dict[str, float]:
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-10}


def close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> bool:
    if a.shape != b.shape:
        return False
    return torch.allclose(a.double(), b.double(), **tolerances(dtype))


def fmt(t: torch.Tensor) -> str:
    values = t.detach().double().flatten()[:8].tolist()
    more = " ..." if t.numel() > 8 else ""
    return "[" + ", ".join(f"{v:.4g}" for v in values) + more + "]" if t.dim() else f"{t.item():.6g}"


def check_result(
    actual: object,
    expected: torch.Tensor,
    *,
    what: str,
    section: str,
    mistakes: dict[str, torch.Tensor] | None = None,
    hint: str = "",
) -> None:
    """Fail with a plain-words message unless ``actual`` equals ``expected`` (shape, dtype, values)."""
    reread = f"Reread TASKS.md {section}."
    if not isinstance(actual, torch.Tensor):
        pytest.fail(f"{what}: returned {type(actual).__name__}, expected a torch.Tensor. {reread}", pytrace=False)
    if actual.shape != expected.shape:
        extra = ""
        if expected.dim() == 0:
            extra = " The loss must be one number (a 0-dim tensor): take the mean over the batch."
        elif actual.numel() == expected.numel():
            extra = " Same number of elements: flatten the result back to the shape of the input."
        pytest.fail(
            f"{what}: returned shape {tuple(actual.shape)}, expected {tuple(expected.shape)} (wrong output shape).{extra} {reread}",
            pytrace=False,
        )
    if not torch.isfinite(actual).all():
        if torch.isfinite(expected).all():
            pytest.fail(
                f"{what}: returned {fmt(actual)}, which holds NaN/inf; expected {fmt(expected)}. "
                f"{hint or 'Look for a division by a zero std (add eps) or exp() of a large number.'} {reread}",
                pytrace=False,
            )
    if actual.dtype != expected.dtype:
        pytest.fail(
            f"{what}: returned dtype {actual.dtype}, expected {expected.dtype} (the input's dtype); "
            f"avoid creating new tensors with a fixed dtype. {reread}",
            pytrace=False,
        )
    if close(actual, expected, expected.dtype):
        return
    for mistake, wrong in (mistakes or {}).items():
        if close(actual, wrong, expected.dtype):
            pytest.fail(
                f"{what}: got {fmt(actual)}, expected {fmt(expected)}. This matches a common mistake: {mistake}. {reread}",
                pytrace=False,
            )
    pytest.fail(
        f"{what}: got {fmt(actual)}, expected {fmt(expected)}. {hint} {reread}".replace("  ", " "), pytrace=False
    )


def check_no_grad(tensor: torch.Tensor, *, what: str, section: str, mistake: str) -> None:
    """Fail if backward() left a non-zero gradient on ``tensor``."""
    if tensor.grad is not None and tensor.grad.abs().sum() > 0:
        pytest.fail(
            f"{what}: a gradient reached it ({fmt(tensor.grad)}); {mistake}. Reread TASKS.md {section}.", pytrace=False
        )


def check_unmodified(
    before: dict[str, torch.Tensor], after: dict[str, torch.Tensor], *, what: str, section: str
) -> None:
    for name, original in before.items():
        if not torch.equal(original, after[name].detach()):
            pytest.fail(
                f"{what} changed its input `{name}` in place (e.g. with -=, /= or .sub_()); compute into new tensors. "
                f"Reread TASKS.md {section}.",
                pytrace=False,
            )
