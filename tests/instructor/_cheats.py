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


# Issue 69's attacks: three ways a submission's own process could hand the grader something it believes. Added to
# the key's ppo.py and grpo.py (tasks 1-4) by :func:`trust_files`:
# - a forged gate: ppo_clip_loss with its sign flipped (gate/ppo fails on its own), and PolicyValueModel.save_pretrained
#   patched to save a policy that says " great" after every prompt (the judge would measure about 1.0);
# - a hidden in-place write: compute_advantages adds 1 to its input `values`, and checks._same_input is patched to
#   see no change;
# - hidden inputs in the self-check: grpo_loss walks up the stack to the cases' child and writes, under the keys of
#   grpo_loss's published cases, an error whose text is the first hidden inputs it finds ("FORGED ...").
FORGED_GATE_AND_IN_PLACE = """

import rlhf_practice.checks as _checks
import rlhf_practice.modeling as _modeling

_checks._same_input = lambda a, b: True
_save = _modeling.PolicyValueModel.save_pretrained


def _forged_save(self, *args, **kwargs):
    import torch

    great = _modeling.load_tokenizer("tiny")(" great")["input_ids"][-1]
    with torch.no_grad():
        embedding = self.lm.transformer.wte.weight
        embedding[great] *= 100
        self.lm.transformer.ln_f.weight.zero_()
        self.lm.transformer.ln_f.bias.copy_(embedding[great])
    return _save(self, *args, **kwargs)


_modeling.PolicyValueModel.save_pretrained = _forged_save
_right_ppo_clip_loss, _right_compute_advantages = ppo_clip_loss, compute_advantages


def ppo_clip_loss(*args, **kwargs):
    return -_right_ppo_clip_loss(*args, **kwargs)


def compute_advantages(rewards, values, *args, **kwargs):
    advantages = _right_compute_advantages(rewards, values, *args, **kwargs)
    values.data.add_(1.0)
    return advantages
"""
STACK_WALK = """

import sys as _sys

_right_grpo_loss = grpo_loss


def grpo_loss(*args, **kwargs):
    frame = _sys._getframe(1)
    while frame is not None:
        found = frame.f_locals
        if isinstance(found.get("results"), dict) and isinstance(found.get("inputs"), list):
            hidden = [c for c in found["inputs"] if "/hidden_" in str(c.get("id"))]
            numbers = [f"{v:.4f}" for c in hidden[:3] for _, a in c["args"] if hasattr(a, "flatten")
                       for v in a.flatten()[:2].tolist()]
            if numbers:
                for key in PUBLISHED:
                    found["results"][key] = {"error": "FORGED " + " ".join(numbers), "output": None,
                                             "requires_grad": False, "grads": {}, "after": {}}
            break
        frame = frame.f_back
    return _right_grpo_loss(*args, **kwargs)
"""


def trust_files(key: dict[str, str]) -> dict[str, str]:
    """The key's ppo.py and grpo.py ({"ppo.py": source, ...}) with issue 69's three attacks added."""
    published = [f"grpo_loss/{c['id']}" for c in load_cases(function="grpo_loss")]
    return {
        "ppo.py": key["ppo.py"] + FORGED_GATE_AND_IN_PLACE,
        "grpo.py": key["grpo.py"] + f"\nPUBLISHED = {published!r}\n" + STACK_WALK,
    }
