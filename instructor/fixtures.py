"""Instructor only: do the recorded graded cases still say what the answer key computes?

    python -m instructor fixtures      # record tests/fixtures/graded/<file>.pt (each kept if it agrees)

The recorded cases are made on one machine and checked on every other. Two correct ``exp``s, or two
summation orders, may differ by an ulp, so a float is compared with a tolerance per dtype, and
everything else exactly: ids, shapes, dtypes, texts, kwargs, the mistakes and their order (the order
in which a message names those that match), which gradients must be zero, integer and boolean tensors,
and Python numbers (what the sort rewards return: whole numbers, exact on any CPU).

A float tensor ``T`` agrees when ``max|recorded - fresh| <= rtol * max|T| + atol * max|E| + tiny``:

- ``max|T|``: the tensor's own largest value. A few ulps of it are rounding.
- ``max|E|``: the largest value of the expected result that ``T`` belongs to (a mistake is measured
  against the value it mistakes; an input or an expected value against itself). A result that cancels
  far below the numbers it was computed from keeps their rounding: the "no clipping" mistake of the
  §2.1 example is exactly 0 in real numbers, and two CPUs record it as -1.1e-16 and as -0.0.
- ``tiny``: the dtype's smallest normal number, so that zeros and denormals compare.

:data:`TOLERANCE` sets ``(rtol, atol)`` per dtype.

- float32: 4 and 2 ulps (``eps`` = 1.19e-7). Two CPUs were seen to differ by up to 1.3 ulps of a
  tensor's largest value. A relative change of 1e-6 (8 ulps in float32) in any expected value exceeds
  the 6 ulps allowed, as does one in any other value at least 0.6 of its expected value.
- float64: 1e-12. Two CPUs were seen to differ by up to 66 ulps (1.5e-14) of a cancelled value's own
  size, 7.7 ulps of its expected value's. 1e-12 is 1000 times tighter than the graded tests' tolerance
  (1e-9) and 1e8 times tighter than the smallest gap between an expected value and a mistake (9e-4):
  any change that could alter a grade or a diagnosis fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from rlhf_practice.checks import CASES_DIR, load_cases
from rlhf_practice.course import MODULES, module_of

_EPS32 = torch.finfo(torch.float32).eps
TOLERANCE: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (4 * _EPS32, 2 * _EPS32),
    torch.float64: (1e-12, 1e-12),
}


def largest(t: torch.Tensor) -> float:
    """max|t| over its finite values; 0 for an empty tensor. A bool or integer tensor (filter_groups returns bool)
    counts as its values."""
    t = t if t.is_floating_point() else t.double()
    finite = t[torch.isfinite(t)]
    return finite.abs().max().item() if finite.numel() else 0.0


def tensor_difference(recorded: torch.Tensor, fresh: torch.Tensor, scale: float | None = None) -> str | None:
    """None if the two tensors agree (see the module's docstring); else what differs, in a few words.

    ``scale`` is ``max|E|``, the expected result's largest value; None: the tensors' own.
    """
    if recorded.dtype != fresh.dtype:
        return f"dtype {recorded.dtype} != {fresh.dtype}"
    if recorded.shape != fresh.shape:
        return f"shape {tuple(recorded.shape)} != {tuple(fresh.shape)}"
    if not recorded.is_floating_point():
        return None if torch.equal(recorded, fresh) else "values differ"
    finite = torch.isfinite(recorded)
    if not torch.equal(finite, torch.isfinite(fresh)) or not torch.equal(
        recorded[~finite].nan_to_num(), fresh[~finite].nan_to_num()
    ):
        return "NaN/inf at other places"
    own = max(largest(recorded), largest(fresh))
    info = torch.finfo(recorded.dtype)
    rtol, atol = TOLERANCE.get(recorded.dtype, (4 * info.eps, 2 * info.eps))
    allowed = rtol * own + atol * (own if scale is None else scale) + info.tiny
    worst = (recorded[finite].double() - fresh[finite].double()).abs().max().item() if finite.any() else 0.0
    return None if worst <= allowed else f"differs by {worst:.3g} (allowed {allowed:.3g})"


def _differences(recorded: object, fresh: object, path: str, scale: float | list | None, out: list[str]) -> None:
    """Walk two recorded values side by side; ``scale`` follows the structure of a tuple result."""
    if isinstance(recorded, torch.Tensor) or isinstance(fresh, torch.Tensor):
        if not (isinstance(recorded, torch.Tensor) and isinstance(fresh, torch.Tensor)):
            out.append(f"{path}: a tensor on one side only")
        elif message := tensor_difference(recorded, fresh, scale if not isinstance(scale, list) else None):
            out.append(f"{path}: {message}")
    elif isinstance(recorded, dict) and isinstance(fresh, dict):
        if recorded.keys() != fresh.keys():
            out.append(f"{path}: keys {sorted(map(str, recorded.keys() ^ fresh.keys()))} on one side only")
            return
        if list(recorded) != list(fresh):  # the mistakes' order: a message names the matching ones in it
            out.append(f"{path}: the same keys in another order")
            return
        for key in recorded:
            _differences(recorded[key], fresh[key], f"{path}[{key!r}]", scale, out)
    elif isinstance(recorded, list | tuple) and isinstance(fresh, list | tuple) and type(recorded) is type(fresh):
        if len(recorded) != len(fresh):
            out.append(f"{path}: {len(recorded)} items != {len(fresh)}")
            return
        for i, (a, b) in enumerate(zip(recorded, fresh)):
            _differences(a, b, f"{path}[{i}]", scale[i] if isinstance(scale, list) else scale, out)
    elif recorded != fresh:
        out.append(f"{path}: {recorded!r} != {fresh!r}")


def _scale(recorded: object, fresh: object) -> float | list | None:
    """max|E| of an expected result (a list of them for a tuple result), from both recordings."""
    if isinstance(recorded, list) and isinstance(fresh, list):
        return [_scale(a, b) for a, b in zip(recorded, fresh)]
    if isinstance(recorded, torch.Tensor) and isinstance(fresh, torch.Tensor):
        return max(largest(recorded), largest(fresh))
    return None  # the structures differ: the walk reports it


def case_differences(recorded: dict, fresh: dict) -> list[str]:
    """What differs between two recordings of one case, one line each (empty: they agree)."""
    name = f"{recorded.get('function')}/{recorded.get('id')}"
    if recorded.keys() != fresh.keys():
        return [f"{name}: fields {sorted(recorded.keys() ^ fresh.keys())} on one side only"]
    out: list[str] = []
    scale = _scale(recorded["expected"], fresh["expected"])
    for field in recorded:
        if field in ("expected", "mistakes"):
            _differences(recorded[field], fresh[field], f"{name} {field}", scale, out)
        elif field == "grads" and recorded["grads"].keys() == fresh["grads"].keys():
            for arg, grad in recorded["grads"].items():
                new, path = fresh["grads"][arg], f"{name} grads[{arg!r}]"
                zero = [isinstance(g["expected"], torch.Tensor) and not g["expected"].any() for g in (grad, new)]
                if zero[0] != zero[1]:  # an all-zero expected gradient means "no gradient may reach it"
                    out.append(f"{path}: one recording says no gradient may reach {arg}, the other does not")
                _differences(grad, new, path, _scale(grad["expected"], new["expected"]), out)
        else:
            _differences(recorded[field], fresh[field], f"{name} {field}", None, out)
    return out


def differences(recorded: list[dict], fresh: list[dict]) -> list[str]:
    """What differs between two recordings of the case book, one line each (empty: they agree)."""
    ids = [[(c.get("function"), c.get("id")) for c in cases] for cases in (recorded, fresh)]
    if ids[0] != ids[1]:
        gone, new = sorted(set(ids[0]) - set(ids[1])), sorted(set(ids[1]) - set(ids[0]))
        return [f"the cases differ: recorded only {gone[:5]}, built only {new[:5]} (or their order)"]
    return [line for a, b in zip(recorded, fresh) for line in case_differences(a, b)]


def of_file(cases: list[dict], module: str) -> list[dict]:
    """The cases of the graded functions of student file ``module``: what its fixture file holds."""
    return [case for case in cases if module_of(case["function"]) == module]


def record(folder: Path = CASES_DIR, cases: list[dict] | None = None) -> tuple[int, list[Path]]:
    """Save ``cases`` (default: built from the answer key) into ``folder``, one file per student file
    (``ppo.pt``, ...), except a file that already agrees within :data:`TOLERANCE`: it is kept as it is, so
    that recording on another CPU changes no byte. Returns (number of cases, the files written)."""
    from instructor.cases import build_cases

    cases = build_cases() if cases is None else cases
    written = []
    for module in MODULES:
        mine = of_file(cases, module)
        path = folder / f"{module}.pt"
        try:
            if path.is_file() and not differences(load_cases(path), mine):
                continue
        except Exception:  # noqa: BLE001 - an unreadable or foreign file is simply replaced
            pass
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        torch.save(mine, partial)
        os.replace(partial, path)
        written.append(path)
    return len(cases), written
