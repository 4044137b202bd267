"""A cheat two instructor tests grade (test_grading.py's quick cheats, test_attacks.py's attacks): answers
looked up in a table of the published cases, built from the current student files and fixtures.

:func:`lookup_files` gives every student file with the graded functions replaced by a lookup: a table of
the shipped cases of its functions (inputs, options, expected result or error), embedded in the file
itself, answers a call whose inputs match one (allclose), and anything else gets zeros.
"""

from __future__ import annotations

import base64
import io
import textwrap
from pathlib import Path

import torch

from instructor.release import student_files
from rlhf_practice.checks import load_cases
from rlhf_practice.course import GRADED, MODULES

LOOKUP = """
import base64 as _base64
import builtins as _builtins
import io as _io

import torch as _torch

_TABLE = _torch.load(_io.BytesIO(_base64.b64decode(DATA)), weights_only=True)


def _same(a, b):
    if isinstance(a, _torch.Tensor) or isinstance(b, _torch.Tensor):
        return (
            isinstance(a, _torch.Tensor) and isinstance(b, _torch.Tensor) and a.shape == b.shape
            and a.dtype == b.dtype and _torch.allclose(a.detach(), b.detach(), equal_nan=True)
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _lookup(function, args, kwargs):
    for case in _TABLE[function]:
        if len(case["args"]) == len(args) and all(_same(a, b) for a, b in zip(case["args"], args)):
            if set(case["kwargs"]) == set(kwargs) and all(_same(case["kwargs"][k], kwargs[k]) for k in kwargs):
                if case["raises"]:
                    raise getattr(_builtins, case["raises"])("looked up")
                expected = case["expected"]
                if isinstance(expected, list):
                    return tuple(e.clone() for e in expected)
                return expected.clone() if isinstance(expected, _torch.Tensor) else expected
    return _torch.zeros(())


def _table_function(function):
    return lambda *args, **kwargs: _lookup(function, args, kwargs)


for _function in _TABLE:
    globals()[_function] = _table_function(_function)
"""


def lookup_files() -> dict[str, str]:
    """{module: source}: each student file with a table of the shipped cases of its functions (those with a
    model among their inputs left out: no table can hold a model's call)."""
    stubs = {Path(path).stem: source for path, source in student_files().items()}
    cases = load_cases()
    files = {}
    for m in MODULES:
        table = {g.function: [] for g in GRADED if g.module == m}
        for case in cases:
            if case["function"] in table and not any(isinstance(v, dict) for _, v in case["args"]):
                args = [value for _, value in case["args"]]
                table[case["function"]].append(
                    {"args": args, "kwargs": case["kwargs"], "expected": case["expected"], "raises": case["raises"]}
                )
        buffer = io.BytesIO()
        torch.save(table, buffer)
        data = base64.b64encode(buffer.getvalue()).decode()
        files[m] = stubs[m] + f"\nDATA = {data!r}\n" + textwrap.dedent(LOOKUP)
    return files
