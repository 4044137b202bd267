"""The graded checks: run a student function on one recorded case and explain, in words, what differs.

A *case* is one call of a graded function with its expected outcome, recorded from the answer key in
``tests/fixtures/graded_cases.pt`` (a list of plain dicts, loaded with ``weights_only=True``):

    id            short name, unique per function ("book_example", "random_float32_n64_clip0.2", ...)
    function      the graded function ("compute_advantages", ...), section its TASKS.md section
    what          how a failure message names the call
    args, kwargs  the inputs: args is a list of (name, value) pairs, passed positionally; a value is a
                  tensor, a number, a string or a list of ints (the sort rewards take lists)
    expected      the expected result: a tensor, a float (a function that returns a Python number), or
                  a list of tensors when the function returns a tuple; then ``outputs`` names them
                  ("advantages", "returns"); None when the call must raise
    raises        None, or the exception the call must raise ("ValueError" for an unknown mode)
    mistakes      {description of a common mistake: what that mistake returns}, for diagnoses; a
                  result that matches several (they agree on this input) is told all of them
    grad_of       names of the inputs that require grad; backward() runs on sum(result * grad_weights)
    grads         {input name: {"expected": tensor, "mistakes": {...}, "message": str}}; an all-zero
                  expected gradient means "no gradient may reach this input" and message says why
    unmodified    True: the inputs must be unchanged afterwards

:func:`run_case` only computes (it is what a grading child process runs on a submission) and
returns plain tensors; :func:`check_case` only compares (the grader's parent process, and the graded
pytest tests, call it). Neither needs the answer key.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable
from pathlib import Path

import torch

from rlhf_practice import PACKAGE_DIR

CASES_FILE = PACKAGE_DIR.parent / "tests" / "fixtures" / "graded_cases.pt"
NOT_IMPLEMENTED = "NotImplementedError"


def load_cases(path: Path = CASES_FILE, function: str | None = None) -> list[dict]:
    """The recorded cases (of one function, if given), in file order."""
    cases = torch.load(path, weights_only=True)
    return [case for case in cases if function is None or case["function"] == function]


def _plain(value: object) -> object:
    """A tensor result as a plain ``torch.Tensor`` on the CPU, a tuple of tensors as a list of them, a
    real number (an int or a float; not a bool, not a tensor) as a float; anything else as its type name."""
    if type(value) is torch.Tensor:
        return value.detach().cpu().clone()
    if type(value) in (tuple, list) and value and all(type(v) is torch.Tensor for v in value):
        return [_plain(v) for v in value]
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return type(value).__name__


def _copy(value: object) -> object:
    """A fresh copy of an input: the function under test may change it, the case must stay as recorded."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    return copy.deepcopy(value) if isinstance(value, list) else value


def _same_input(a: object, b: object) -> bool:
    return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def run_case(fn: Callable, case: dict) -> dict:
    """Call ``fn`` on the case's inputs; return what happened as plain data (no comparison here).

    Returns {"error": None or "Type: message", "output": tensor or type name, "requires_grad": bool,
    "grads": {name: tensor or None}, "modified": [names of inputs changed in place]}.
    """
    args = {name: _copy(value) for name, value in case["args"]}
    for name in case["grad_of"]:
        args[name].requires_grad_(True)
    before = {
        name: value.detach().clone() if isinstance(value, torch.Tensor) else copy.deepcopy(value)
        for name, value in args.items()
        if isinstance(value, torch.Tensor | list)
    }
    result = {"error": None, "output": None, "requires_grad": False, "grads": {}, "modified": []}
    try:
        out = fn(*args.values(), **case["kwargs"])
        result["output"] = _plain(out)
        parts = [out] if type(out) is torch.Tensor else list(out) if isinstance(result["output"], list) else []
        parts = [part for part in parts if part.requires_grad]
        result["requires_grad"] = bool(parts)
        if case["grad_of"] and parts:
            weights = case.get("grad_weights")
            sum((part * weights if weights is not None else part).sum() for part in parts).backward()
        result["grads"] = {
            name: _plain(args[name].grad) if args[name].grad is not None else None for name in case["grad_of"]
        }
    except NotImplementedError:
        result["error"] = NOT_IMPLEMENTED
    except BaseException as err:  # noqa: BLE001 - whatever a submission raises is its own failure
        result["error"] = f"{type(err).__name__}: {err}"
    result["modified"] = [
        name
        for name, value in before.items()
        if not _same_input(value, args[name].detach() if isinstance(args[name], torch.Tensor) else args[name])
    ]
    return result


def _fmt(t: torch.Tensor) -> str:
    values = t.detach().double().flatten()[:8].tolist()
    more = " ..." if t.numel() > 8 else ""
    return "[" + ", ".join(f"{v:.4g}" for v in values) + more + "]" if t.dim() else f"{t.item():.6g}"


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> bool:
    """Equal within the tolerance of ``dtype``; NaN and inf count as equal where both hold them."""
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-10}
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), equal_nan=True, **tolerance)


def _same_number(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-10) or (math.isnan(a) and math.isnan(b))


def _named(actual: torch.Tensor | float, mistakes: dict, dtype: torch.dtype | None = None) -> str:
    """ " This matches ..." naming every recorded mistake that returns ``actual``; "" if none does.
    ``dtype`` sets the tolerance of a tensor; a number (dtype None) is compared as a float64."""
    same = (lambda wrong: _same_number(actual, wrong)) if dtype is None else (lambda w: _close(actual, w, dtype))
    names = [mistake for mistake, wrong in mistakes.items() if same(wrong)]
    if len(names) > 1:
        return f" This matches one of these common mistakes (they agree on this input): {'; or '.join(names)}."
    return f" This matches a common mistake: {names[0]}." if names else ""


def _compare_number(actual: object, expected: float, what: str, mistakes: dict) -> str | None:
    """:func:`compare` for a function that returns a Python number (an int is a right answer too)."""
    if type(actual) is not float:
        got = actual if isinstance(actual, str) else type(actual).__name__
        hint = ": convert it with float(...) or .item()" if got == "Tensor" else ""
        return f"{what}: returned {got}, expected a number (a Python float){hint}."
    if _same_number(actual, expected):
        return None
    return f"{what}: got {actual:g}, expected {expected:g}.{_named(actual, mistakes)}"


def compare(actual: object, expected: torch.Tensor | float, what: str, mistakes: dict) -> str | None:
    """None if ``actual`` equals ``expected`` (type, shape, dtype, values); else one sentence saying what
    differs, naming the recorded ``mistakes`` that return the same (NaN included)."""
    if isinstance(expected, float):
        return _compare_number(actual, expected, what, mistakes)
    if type(actual) is not torch.Tensor:
        return (
            f"{what}: returned {actual if isinstance(actual, str) else type(actual).__name__}, expected a torch.Tensor."
        )
    if actual.shape != expected.shape:
        extra = ""
        if expected.dim() == 0:
            extra = " The loss must be one number (a 0-dim tensor): take the mean over the batch."
        elif actual.numel() == expected.numel():
            extra = " Same number of elements: flatten the result back to the shape of the input."
        return f"{what}: returned shape {tuple(actual.shape)}, expected {tuple(expected.shape)} (wrong output shape).{extra}"
    named = _named(actual, mistakes, expected.dtype) if actual.dtype == expected.dtype else ""
    if not torch.isfinite(actual).all() and torch.isfinite(expected).all():
        # Which step made the NaN is known only when a recorded mistake makes the same one.
        advice = named or (
            " Find the step that makes it (e.g. a division by a zero std without eps, the std of a single"
            " value, exp() of a large number)."
        )
        return f"{what}: returned {_fmt(actual)}, which holds NaN/inf; expected {_fmt(expected)}.{advice}"
    if actual.dtype != expected.dtype:
        return (
            f"{what}: returned dtype {actual.dtype}, expected {expected.dtype} (the input's dtype); "
            "avoid creating new tensors with a fixed dtype."
        )
    if _close(actual, expected, expected.dtype):
        return None
    return f"{what}: got {_fmt(actual)}, expected {_fmt(expected)}.{named}"


def _compare_output(case: dict, actual: object) -> str | None:
    """:func:`compare` for one result, or for each part of a tuple result (``case["outputs"]``)."""
    names = case.get("outputs")
    if not names:
        return compare(actual, case["expected"], case["what"], case["mistakes"])
    if not isinstance(actual, list) or len(actual) != len(names):
        got = f"{len(actual)} tensors" if isinstance(actual, list) else actual
        return f"{case['what']}: returned {got}, expected a tuple of {len(names)} tensors ({', '.join(names)})."
    expected = case["expected"]
    for i, name in enumerate(names):
        # The first part that differs is diagnosed, by the mistakes that get the parts before it right.
        mistakes = {
            k: v[i]
            for k, v in case["mistakes"].items()
            if all(_close(v[j], expected[j], expected[j].dtype) for j in range(i))
        }
        message = compare(actual[i], expected[i], f"{case['what']}, {name}", mistakes)
        if message:
            return message
    return None


def check_case(case: dict, result: dict) -> str | None:
    """None if ``result`` (from :func:`run_case`) is right for ``case``; else the one-line diagnosis."""
    reread = f"Reread TASKS.md {case['section']}."
    name = case["function"]
    if result["error"] == NOT_IMPLEMENTED:
        return f"{name} is not implemented yet (it raises NotImplementedError). See TASKS.md {case['section']}."
    raises = case.get("raises")
    if raises:
        if result["error"] and result["error"].startswith(f"{raises}:"):
            return None
        if result["error"]:
            return f"{name} raised {result['error']}; expected {raises} ({case['what']}). {reread}"
        got = result["output"]
        got = _fmt(got) if isinstance(got, torch.Tensor) else f"{got:g}" if isinstance(got, float) else got
        return f"{case['what']}: returned {got} instead of raising {raises}. {reread}"
    if result["error"]:
        return f"{name} raised {result['error']}. {reread}"
    message = _compare_output(case, result["output"])
    for arg, grad in case["grads"].items():
        if message:
            break
        must_be_zero = not bool(grad["expected"].abs().sum() > 0)
        got = result["grads"].get(arg)
        if must_be_zero:
            if isinstance(got, torch.Tensor) and got.abs().sum() > 0:
                message = f"{name}: {arg}: a gradient reached it ({_fmt(got)}); {grad['message']}."
        elif not result["requires_grad"] or got is None:
            message = f"{name}: the result carries no gradient to {arg}; do not detach {arg}."
        else:
            what = f"gradient of {name} w.r.t. {arg} ({case['what']})"
            message = compare(got, grad["expected"], what, grad["mistakes"])
    if not message and case["unmodified"] and result["modified"]:
        arg = result["modified"][0]
        how = (
            "(e.g. with .sort()); work on a copy: sorted(...) returns a new list"
            if isinstance(dict(case["args"])[arg], list)
            else "(e.g. with -=, /= or .sub_()); compute into new tensors"
        )
        message = f"{name} changed its input `{arg}` in place {how}."
    return f"{message} {reread}" if message else None
