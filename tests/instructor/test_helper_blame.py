"""A wrong helper is named before its caller (issue 44 §3): while a student's masked_mean (or reply_logps) fails
its own checks, a failure of token_ppo_loss (or reference_logps), which calls it, says so first, in pytest
(tests/_checks.py) and in the grader's notes (instructor.grading); both word it with
rlhf_practice.checks.blame_helpers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _checks import check, failing_helpers, recorded_cases

from instructor.grading import Grade, _helper_notes
from rlhf_practice.checks import blame_helpers, graded_callees
from rlhf_practice.course import MODULES, answer_path, load_impl

MASKED_MEAN = "return (values * mask).sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)"
REPLY_LOGPS = "return token_logps.masked_fill(~in_reply, 0.0).sum(dim=-1)"


def _submission(tmp_path: Path, module: str, right: str, wrong: str) -> object:
    """The key's files as a submission folder, one line of ``module`` replaced: a wrong helper."""
    for m in MODULES:
        shutil.copy(answer_path(m), tmp_path / f"{m}.py")
    path = tmp_path / f"{module}.py"
    source = path.read_text(encoding="utf-8")
    assert source.count(right) == 1
    path.write_text(source.replace(right, wrong), encoding="utf-8")
    return load_impl(str(tmp_path)).module(module)


def _messages(module: object, function: str) -> list[str]:
    messages = []
    for case in recorded_cases():
        if case["function"] == function:
            try:
                check(module, case)
            except pytest.fail.Exception as failure:
                messages.append(str(failure))
    return messages


def test_a_wrong_masked_mean_is_named_before_token_ppo_loss(tmp_path: Path) -> None:
    module = _submission(
        tmp_path,
        "token_level",
        MASKED_MEAN,
        "return (values * mask).mean() if dim is None else (values * mask).mean(dim=dim)",
    )
    assert failing_helpers(module, "token_ppo_loss") == {"masked_mean": "§7.2"}
    messages = _messages(module, "token_ppo_loss")
    assert messages
    assert all(
        m.startswith(
            "token_ppo_loss calls your masked_mean, which fails its own checks (see its failures first, "
            "TASKS.md §7.2); until it passes, this failure may come from it: token_ppo_loss"
        )
        for m in messages
    ), messages[0]
    assert not any(m.startswith("masked_mean calls") for m in _messages(module, "masked_mean"))


def test_a_wrong_reply_logps_is_named_before_reference_logps(tmp_path: Path) -> None:
    wrong = "return token_logps.masked_fill(~attention_mask[:, 1:].bool(), 0.0).sum(dim=-1)"  # prompt counted too
    module = _submission(tmp_path, "dpo", REPLY_LOGPS, wrong)
    messages = _messages(module, "reference_logps")
    assert messages and all(m.startswith("reference_logps calls your reply_logps, which fails") for m in messages)


def test_a_right_helper_blames_nothing() -> None:
    key = load_impl("answer")
    assert failing_helpers(key.module("token_level"), "token_ppo_loss") == {}
    assert failing_helpers(key.module("token_level"), "grpo_clip_loss") == {}
    assert blame_helpers("m", "f", {}) == "m"


def test_calls_are_read_from_the_callers_own_body() -> None:
    source = (
        "def masked_mean(v, m, dim=None):\n    return v\n\n"
        "def per_token_kl(a, b, m, estimator='k3'):\n    return masked_mean(a, m)\n\n"
        "def token_ppo_loss(*a):\n    '''masked_mean in the docstring only'''\n    return a\n\n"
        "def grpo_clip_loss(*a):\n    f = per_token_kl\n    return torch.nn.x.masked_mean(a)\n"
    )
    names = ["masked_mean", "per_token_kl", "token_ppo_loss", "grpo_clip_loss"]
    assert graded_callees(source, "token_ppo_loss", names) == []
    assert graded_callees(source, "grpo_clip_loss", names) == ["masked_mean", "per_token_kl"]
    assert graded_callees(source, "masked_mean", names) == []
    assert graded_callees("def (", "masked_mean", names) == []


def test_the_grader_notes_the_helper_first() -> None:
    grade = Grade(submission="s")
    grade.total.update(masked_mean=12, token_ppo_loss=10, compute_gae=20)
    grade.passed.update(masked_mean=5, token_ppo_loss=2, compute_gae=3)
    source = b"def token_ppo_loss(*a):\n    return masked_mean(*a)\n\ndef compute_gae(*a):\n    return a\n"
    assert _helper_notes(grade, {"token_level.py": source}) == [
        "token_ppo_loss calls your masked_mean, which fails its own checks (see its failures first, TASKS.md "
        "§7.2); until it passes, this failure may come from it: token_ppo_loss passes 2/10 hidden cases"
    ]
