"""The students' feedback (instructor.feedback): what to fix, per function and gate, and no hidden value in it.

The catalog's wrong variants of a few functions run in-process on the hidden cases of one seed and on the
published ones, as the grader's child would run them; their feedback must name the mistake where the
published cases do, tell the kind of failure where only hidden cases fail, and hold no hidden input or
expected value in any form the checks print.
"""

from __future__ import annotations

import re
from functools import cache

import torch

from instructor.cases import build_cases
from instructor.feedback import diagnose, hidden_diagnosis, html_page, page, write_pages
from instructor.gate import GateResult
from instructor.grading import FUNCTIONS, Grade, _key
from instructor.mistakes import wrong_variants
from rlhf_practice.checks import _fmt, check_case, load_cases, run_case
from rlhf_practice.course import load_impl

SEED = 11
# Functions whose mistakes fail in every way the checks tell: values, shapes, NaN, gradients, in place, errors.
CHECKED = ("compute_group_advantages", "ppo_clip_loss", "masked_mean", "compute_gae", "dpo_loss", "cispo_loss")


@cache
def cases(function: str) -> tuple[list[dict], list[dict]]:
    """(published, hidden) cases of ``function``, the hidden ones renamed as the grader names them."""
    hidden = [{**c, "id": f"hidden_{c['id'].removeprefix('hidden_')}"} for c in build_cases(SEED, function)]
    return load_cases(function=function), hidden


def _values(expected) -> set[str]:
    """Every way the checks print an expected value: the whole tensor and each number, at 4 to 10 digits."""
    shown = set()
    for part in expected if isinstance(expected, list) else [expected]:
        if part is None:
            continue
        tensor = torch.as_tensor(part).double()
        for digits in (None, 6, 8, 10):
            shown.add(_fmt(tensor, digits))
            shown.update(f"{v:.{digits or 4}g}" for v in tensor.flatten()[:8].tolist())
    return shown


def _hidden_values(function: str) -> set[str]:
    """The hidden cases' expected values as printed, less those a published case prints as well (the answers a
    fresh input cannot change: 0, 1, log 2, ...) and short ones that any sentence may hold ("0.5", "2")."""
    published, hidden = cases(function)
    public = set().union(*(_values(c["expected"]) for c in published))
    public |= set().union(*(_values(g["expected"]) for c in published for g in c["grads"].values()))
    mine = set().union(*(_values(c["expected"]) for c in hidden))
    mine |= set().union(*(_values(g["expected"]) for c in hidden for g in c["grads"].values()))
    return {v for v in mine - public if len(re.sub(r"[^0-9]", "", v)) >= 3}


def test_feedback_of_the_catalog_names_the_mistake_and_holds_no_hidden_value() -> None:
    told = 0
    for function in CHECKED:
        published, hidden = cases(function)
        secrets = _hidden_values(function)
        for variant in wrong_variants(function):
            # all cases: what the grader's child would report; hidden ones alone: a function fitted to the
            # published cases, told from the hidden failures only
            for shown in (published + hidden, hidden):
                outcomes = {_key(c): run_case(variant.fn, c) for c in shown}
                said = diagnose(shown, outcomes, lambda c: c["id"].startswith("hidden_"), _key).get(function)
                assert said, f"{variant.name}: fails its cases but is told nothing"
                assert "Reread TASKS.md" in said or "See TASKS.md" in said, said
                numbers = set(re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", said))
                leaked = [v for v in secrets if (v in said if v.startswith("[") else v in numbers)]
                assert not leaked, f"{variant.name}: the feedback shows hidden values {leaked[:3]}: {said}"
                told += variant.diagnosis in said
    assert told >= 40, f"only {told} of the catalog's diagnoses reached the feedback"


def test_a_hidden_failure_is_told_by_kind_and_the_student_code_s_words_are_not_shown() -> None:
    _, hidden = cases("compute_group_advantages")
    case = next(c for c in hidden if not c.get("raises") and c["args"])
    secret = str(dict(case["args"])["rewards"].tolist())

    def leaky(rewards, group_size, normalize=True, eps=1e-8):
        raise ValueError(f"my inputs were {rewards.tolist()}")

    said = hidden_diagnosis(case, run_case(leaky, case))
    assert (
        "raised an exception on a hidden input (" in said
        and "ValueError" not in said
        and secret not in said
        and "my inputs" not in said
    )

    def shaped(rewards, group_size, normalize=True, eps=1e-8):
        return rewards.view(-1, group_size)

    said = hidden_diagnosis(case, run_case(shaped, case))
    assert said.startswith(
        "compute_group_advantages fails a hidden case (book example): its result has the wrong shape."
    )
    assert not re.search(r"\d+, \d+", said), said  # no shape of a hidden input either


def _grade() -> Grade:
    grade = Grade(submission="classes/alice", seed=SEED)
    for f in FUNCTIONS:
        grade.total[f], grade.published_total[f] = 10, 8
    grade.passed.update(compute_advantages=10, ppo_clip_loss=4)
    grade.published_passed.update(compute_advantages=8, ppo_clip_loss=8)
    grade.diagnoses["ppo_clip_loss"] = (
        "ppo_clip_loss fails a hidden case: its values differ | oops. Reread TASKS.md §2.2."
    )
    grade.notes = ["grpo.py missing"]
    grade.flags = ["ppo_clip_loss passes 8/8 published cases but only 4/10 fresh ones: answers fitted"]
    grade.gates = {"ppo": GateResult(passed=True, reward=0.61, steps=12), "grpo": GateResult(note="gate/grpo: x")}
    return grade


def test_the_page_shows_points_passes_fixes_and_gates_and_not_the_instructor_s_flags(tmp_path) -> None:
    grade = _grade()
    text = page(grade)
    assert "**Total: 45 of 350 points.**" in text  # 25 + 25 * 4/10 + gate/ppo 10; 330 + two gates
    assert "| compute_advantages | §1.2 | 25 / 25 | 10/10 | 8/8 | — |" in text
    assert "its values differ \\| oops" in text  # a | in a message does not break the table
    assert "| gate/ppo | pass | 0.61 | 0.3 | 10 / 10 | — |" in text and "gate/grpo: x" in text
    assert "grpo.py missing" in text and "answers fitted" not in text
    bob = Grade(submission="classes/bob/rlhf_practice/rl")
    written = write_pages(tmp_path / "feedback", [grade, grade, bob])
    assert [p.name for p in written] == ["alice.md", "alice-2.md", "bob.md"]
    html = (tmp_path / "feedback" / "alice.html").read_text()
    assert "<td>compute_advantages</td>" in html and "<strong>Total: 45 of 350 points.</strong>" in html
    assert "its values differ | oops" in html and "<script" not in html_page("<script>alert(1)</script>")


def test_each_case_diagnosis_agrees_with_the_checks() -> None:
    """A passing case is told nothing; a failing published case is told exactly what pytest prints."""
    published, hidden = cases("masked_mean")
    variant = wrong_variants("masked_mean")[0]
    outcomes = {_key(c): run_case(variant.fn, c) for c in published}
    first = next(check_case(c, outcomes[_key(c)]) for c in published if check_case(c, outcomes[_key(c)]))
    assert diagnose(published, outcomes, lambda c: False, _key) == {"masked_mean": first}
    assert hidden_diagnosis(hidden[0], run_case(load_impl("answer").token_level.masked_mean, hidden[0])) is None


def test_text_the_submission_controls_never_reaches_a_hidden_diagnosis() -> None:
    """The audit's three leaks: a class name made of the inputs, words ("in place", "train mode") that once let a
    message through whole, and another error on a case that must raise. Only fixed words may come back."""
    _, hidden = cases("compute_group_advantages")
    case = next(c for c in hidden if not c.get("raises") and c["args"])
    secret = str(dict(case["args"])["rewards"].tolist())

    def named_by_inputs(rewards, group_size, normalize=True, eps=1e-8):
        raise type(f"E{rewards.tolist()}", (Exception,), {})("in place")

    def wordy(rewards, group_size, normalize=True, eps=1e-8):
        return f"changed in place, train mode, gradient of {rewards.tolist()}"

    def wordy_error(rewards, group_size, normalize=True, eps=1e-8):
        raise ValueError(f"in place {rewards.tolist()}")

    for fn in (named_by_inputs, wordy, wordy_error):
        said = hidden_diagnosis(case, run_case(fn, case))
        assert secret not in said and "[" not in said, said
    assert "raised an exception on a hidden input" in hidden_diagnosis(case, run_case(named_by_inputs, case))
    assert "returns something other than a torch.Tensor" in hidden_diagnosis(case, run_case(wordy, case))

    _, hidden = cases("compute_rloo_advantages")
    raising = next(c for c in hidden if c.get("raises"))
    raising_secret = str(dict(raising["args"])["rewards"].tolist())

    def other_error(rewards, group_size):
        raise RuntimeError(f"in place: {rewards.tolist()} {group_size}")

    said = hidden_diagnosis(raising, run_case(other_error, raising))
    assert said.startswith("compute_rloo_advantages fails a hidden case (")
    assert raising_secret not in said and raising["what"] not in said and "RuntimeError" not in said, said
