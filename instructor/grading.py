"""Grade a class: run each submission in isolation on the graded cases and print one score table.

    python -m instructor.grading submissions/alice submissions/bob ...
    python -m instructor.grading submissions/*/ --csv grades.csv --timeout 60 --memory_mb 3072
    python -m instructor.grading submissions/*/ --tasks 1-4          # one assignment: its functions and gates

Each submission is a folder holding a student's ``ppo.py`` and ``grpo.py`` (and ``token_level.py`` for
tasks 7-9, ``lecture.py`` for task 10, ``dpo.py`` for task 12, ``reward_model.py`` for task 13, ``after_grpo.py`` for
task 14, ``best_of_n.py`` for task 15, ``online.py`` for task 16): a copy of their ``rlhf_practice/rl/``, or a repository uploaded whole (its ``rlhf_practice/rl/`` is
found: the folder that holds the most student files; the progress line names it).
For each one, a child process runs in a fresh temporary tree that holds the package and the submission's
files and nothing else (no answer key, no tests), under limits on time, memory and output, in a sandbox
(:mod:`instructor.sandbox`): it sees the interpreter, the installed packages and its own work folder,
nothing else of this machine (no repository, no home folder, no other submission), writes only its
work folder, and every process it starts dies with it. The grader's first line says whether the
sandbox is on, and so does the CSV's ``sandbox`` column; where it cannot be built the grader stops,
unless ``--no_sandbox`` says to go on without it. The child (:mod:`instructor.case_child`, started by
:mod:`instructor.children`) only *computes*: it calls the submission's functions on the recorded cases
(tests/fixtures) and on fresh hidden inputs made for this grading run, and writes the results (values,
gradients, and the inputs as they are after the call) to a file: outputs, never verdicts. This process,
which never imports student code, reads that file as plain tensors and numbers, keeps only the results of
the cases that child was sent (a result written under another case's key is dropped) and compares:
whether a call changed an input in place, or a model's mode, is its own comparison of what it sent with
what came back.

A function's points are its share of passed *hidden* cases times its points in the course table: inputs
drawn fresh for this grading run from ``--seed`` (a fresh one by default; the CSV records it, so that a
grade can be reproduced), random ones and a variant of every fixed case of the task book (same
structure, other values), none of which the student release holds. The recorded cases that the release
ships are run too, as a self-check: the table shows their passes beside the hidden ones, they earn no
points, and a function that passes (nearly) all of them but clearly fewer fresh ones is flagged in the
notes (answers fitted to the published cases). In both sets, cases whose right answer is all zeros, or
an error, count only when the function gets a non-zero answer right too.
A submission that crashes, hangs, exits early or does not parse loses the cases it breaks and nothing
else: when its child fails as a whole, each function is rerun on its own. A submission whose ppo.py,
grpo.py, token_level.py, lecture.py, dpo.py, reward_model.py, after_grpo.py, best_of_n.py or online.py is there but is not a
regular file (a symbolic link, say to the answer key, a folder, a named pipe, a device) scores 0, with a note naming the file and what it
is; submitted files are read without following links. The table is printed as Markdown and written as
CSV (``--csv``, default ``grading_results.csv``).

Then the outcome gates (:mod:`instructor.gate`): per algorithm, a child with no student code in it trains
the tiny preset, calling the submission's own functions in a function server beside it (started as the
cases' child is, by :mod:`instructor.children`: limits, isolation; ``--gate_timeout`` per run), and a
third child that holds no student file judges the saved policy; a gate that reaches its bar adds its points. The CSV has ``gate/<algorithm>`` (``pass`` or
``fail``), ``gate/<algorithm>/reward`` and ``gate/<algorithm>/steps`` per gate; ``--gate none`` grades
the cases only, ``--gate ppo grpo`` some gates.
"""

from __future__ import annotations

import argparse
import ast
import csv
import math
import os
import random
import stat
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch

from instructor import sandbox
from instructor.children import CASES, SUBMISSION_FILES, Limits, make_tree, run_child
from instructor.feedback import diagnose, write_pages
from instructor.gate import GATE_NAMES, GATES, GateResult, run_gates
from rlhf_practice.checks import _close, blame_helpers, check_case, graded_callees, load_cases
from rlhf_practice.course import GRADED, MODULES, graded, module_of

FUNCTIONS = [g.function for g in GRADED]
POINTS = {g.function: g.points for g in GRADED}

HIDDEN_PREFIX = "hidden_"  # the ids of instructor.cases.build_cases(seed=...): fresh inputs, the grade
# A function that passes this share of the published cases or more, but less than half that share of the
# hidden ones, is flagged: an honest mistake fails the fresh variants about as often as the published
# cases they vary. (A lookup table of the published values passes all but their gradient cases: 26/29 of
# ppo_clip_loss's.)
FITTED_PUBLISHED = 0.75
# A function whose result cannot train on some hidden case (:func:`stops_training`) keeps at most this share of
# its points, whatever share of the cases it passes: an output the training loop cannot learn from is not 90 %
# of an implementation (INSTRUCTOR.md §4.3).
STOPPED = 0.25


@dataclass
class Grade:
    """One submission's results per function: passed / total hidden cases (the grade) and published cases
    (a self-check, no points); notes for the instructor; the seed of the hidden inputs."""

    submission: str
    passed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FUNCTIONS, 0))
    total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FUNCTIONS, 0))
    notes: list[str] = field(default_factory=list)
    published_passed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FUNCTIONS, 0))
    published_total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FUNCTIONS, 0))
    seed: int | None = None
    gates: dict[str, GateResult] = field(default_factory=dict)  # the outcome gates that ran (instructor.gate)
    # {function: what to fix} for each function with a failing case (instructor.feedback.diagnose): what the
    # student's feedback says, with no hidden value in it
    diagnoses: dict[str, str] = field(default_factory=dict)
    # Notes for the instructor only (answers fitted to the published cases, similarity): in the table and the
    # CSV, not in the student's feedback
    flags: list[str] = field(default_factory=list)
    # The graded functions of this assignment (--tasks / --files), in the course's order: the others are not
    # run, scored or shown
    functions: list[str] = field(default_factory=lambda: list(FUNCTIONS))
    # {function: why its result cannot train, in fixed words}: its points are capped at STOPPED of its maximum
    stopped: dict[str, str] = field(default_factory=dict)

    def max_score(self) -> float:
        """The assignment's full marks: its functions' points and those of the gates it ran."""
        return sum(POINTS[f] for f in self.functions) + sum(g.points for g in GATES if g.name in self.gates)

    def max_points(self, function: str) -> float:
        return POINTS[function]

    def points(self, function: str) -> float:
        if not self.total[function]:
            return 0.0
        share = self.passed[function] / self.total[function]
        return round(POINTS[function] * (min(share, STOPPED) if function in self.stopped else share), 1)

    def capped(self, function: str) -> str:
        """Why ``function``'s points are capped (its result cannot train on a hidden case), in fixed words; ""."""
        if function not in self.stopped:
            return ""
        return (
            f"Points capped at {STOPPED:.0%} of the function's: {self.stopped[function]}, so a training run could not "
            "learn from it."
        )

    def gate_points(self, name: str) -> float:
        return next(g.points for g in GATES if g.name == name) if self.gates[name].passed else 0.0

    def total_points(self) -> float:
        return round(sum(self.points(f) for f in FUNCTIONS) + sum(self.gate_points(n) for n in self.gates), 1)


def _what_it_is(path: Path, mode: int) -> str:
    """What a submitted entry that is not a regular file is, in words."""
    if stat.S_ISLNK(mode):
        return f"a symbolic link (to {os.readlink(path)!r})"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _read_submission(folder: Path) -> tuple[dict[str, bytes], list[str]]:
    """The submission's files, read without following symbolic links: {name: contents} of those that are
    regular files, and "NAME is WHAT" for each one that is there but is not a regular file."""
    files, refused = {}, []
    for name in SUBMISSION_FILES:
        path = folder / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            refused.append(f"{name} is {_what_it_is(path, mode)}")
            continue
        try:  # no link followed, no pipe waited on, even if the entry was swapped since lstat
            with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    refused.append(f"{name} is not a regular file")
                    continue
                files[name] = f.read()
        except OSError as err:
            refused.append(f"{name} could not be read ({err.strerror})")
    return files, refused


def _file_notes(files: dict[str, bytes], functions: list[str]) -> list[str]:
    """A note for each submission file of the assignment (the files of ``functions``) that is missing or does
    not parse."""
    notes = []
    for name in dict.fromkeys(f"{module_of(f)}.py" for f in functions):
        if name not in files:
            notes.append(f"{name} missing")
            continue
        try:
            ast.parse(files[name].decode("utf-8", errors="replace"))
        except SyntaxError as err:
            notes.append(f"{name} does not parse (line {err.lineno})")
    return notes


def _child_inputs(cases: list[dict]) -> list[dict]:
    """What a child gets to see of the cases: the inputs, never the expected values."""
    keys = ("function", "args", "kwargs", "grad_of", "grad_weights", "grad_output")
    return [{**{k: case[k] for k in keys}, "id": _key(case), "module": module_of(case["function"])} for case in cases]


def _key(case: dict) -> str:
    """A case's name across functions ("compute_advantages/book_example")."""
    return f"{case['function']}/{case['id']}"


RESULT_KEYS = {"error", "output", "requires_grad", "grads", "after"}  # what run_case returns


def _valid(result: object) -> bool:
    """A result as run_case writes it, made of plain tensors, numbers and lists only: what the child computed, never
    a verdict (whether it changed an input, or a model's mode, is read from "after" by check_case)."""
    if not isinstance(result, dict) or set(result) != RESULT_KEYS:
        return False
    if not isinstance(result["grads"], dict) or not isinstance(result["after"], dict):
        return False
    if not all(type(v) in (torch.Tensor, list) for v in result["after"].values()):
        return False
    output = result["output"]  # a tuple result comes back as a list of tensors
    tensors = [*(output if type(output) is list else [output]), *result["grads"].values()]
    plain = all(t is None or type(t) in (str, float, torch.Tensor) for t in tensors)
    error = result["error"] is None or type(result["error"]) is str
    return plain and error and isinstance(result["requires_grad"], bool)


def _nonzero(expected: object) -> bool:
    """Whether a case's right answer (a tensor, a float, a list of tensors, or None: an error) is not all zeros."""
    if expected is None:
        return False
    if isinstance(expected, float):
        return expected != 0
    parts = expected if type(expected) is list else [expected]
    return any(bool(e.double().abs().sum() > 0) for e in parts)  # double: a bool answer too (filter_groups)


def _hidden(case: dict) -> bool:
    return case["id"].startswith(HIDDEN_PREFIX)


def _count_passes(cases: list[dict], outcomes: dict) -> dict[str, int]:
    """Passed cases per function. A case whose right answer is all zeros (or an error) counts only for a
    function that also gets a non-zero answer right: returning zeros, or raising, is not an implementation."""
    passed = [c for c in cases if _valid(outcomes.get(_key(c))) and check_case(c, outcomes[_key(c)]) is None]
    nonzero = {c["function"] for c in passed if _nonzero(c["expected"])}
    counts = dict.fromkeys(FUNCTIONS, 0)
    for case in passed:
        counts[case["function"]] += case["function"] in nonzero
    return counts


def _nonfinite(value: object) -> bool:
    """Whether a result (a tensor, a float, or a list of them) holds NaN or inf."""
    parts = value if type(value) is list else [value]
    return any(
        (type(t) is float and not math.isfinite(t))
        or (type(t) is torch.Tensor and t.is_floating_point() and not bool(torch.isfinite(t).all()))
        for t in parts
    )


def stops_training(case: dict, result: dict) -> str | None:
    """Why ``result`` (a function's on ``case``, which it fails) is one a training loop cannot learn from, in the
    grader's fixed words (it may be a hidden case's); None if it is merely wrong. Stopping are: NaN or inf where
    the answer is finite; no gradient, or an all-zero one, where
    the contract promises one, or NaN in it; a value or gradient that matches a catalogued mistake marked
    ``stops_training`` (a detached importance ratio whose loss still has its KL term's gradient). Only inputs a
    training run can feed the function count: a case that must raise (RLOO's K = 1, 'uwo' with one model) asks for
    a contract detail on settings the scripts refuse before the function sees them, and failing it costs that
    case alone (INSTRUCTOR.md §4.3)."""
    if not _valid(result) or result["error"] or case.get("raises"):
        return None
    output = result["output"]
    if _nonfinite(output) and not _nonfinite(case["expected"]):
        return "it returns NaN or inf where the answer is finite"
    for arg, grad in case["grads"].items():
        if not bool(grad["expected"].abs().sum() > 0):
            continue
        got = result["grads"].get(arg)
        if type(got) is torch.Tensor and _nonfinite(got) and not _nonfinite(grad["expected"]):
            return f"its gradient w.r.t. {arg} holds NaN or inf"
        if not result["requires_grad"] or type(got) is not torch.Tensor or not bool(got.abs().sum() > 0):
            return f"no gradient reaches {arg}, which the result must train"
    for diagnosis in case.get("stops_training", ()):  # recorded with the case (instructor.cases): no catalog here
        wrong = case["mistakes"].get(diagnosis)
        if wrong is not None and _matches(output, wrong):
            return "it makes a mistake that removes the gradient the function exists for"
        for arg, grad in case["grads"].items():
            wrong = grad["mistakes"].get(diagnosis)
            if wrong is not None and _matches(result["grads"].get(arg), wrong):
                return "it makes a mistake that removes the gradient the function exists for"
    return None


def _matches(got: object, wrong: object) -> bool:
    got, wrong = (got, wrong) if type(wrong) is list else ([got], [wrong])
    return (
        type(got) is list
        and len(got) == len(wrong)
        and all(type(a) is torch.Tensor and _close(a, b, b.dtype) for a, b in zip(got, wrong))
    )


def _stopped(cases: list[dict], outcomes: dict) -> dict[str, str]:
    """{function: why} for each function with a hidden case whose result stops training (:func:`stops_training`)."""
    stopped: dict[str, str] = {}
    for case in cases:
        outcome = outcomes.get(_key(case))
        if case["function"] in stopped or outcome is None or check_case(case, outcome) is None:
            continue
        why = stops_training(case, outcome)
        if why:
            stopped[case["function"]] = why
    return stopped


def _helper_notes(result: Grade, files: dict[str, bytes]) -> list[str]:
    """For each function that fails hidden cases and calls a graded function of its own file that fails
    hidden cases too, a note naming that helper first (rlhf_practice.checks.blame_helpers, as pytest says it)."""
    failing = {f for f in result.functions if result.passed[f] < result.total[f]}
    notes = []
    for f in result.functions:
        if f not in failing:
            continue
        source = files.get(f"{module_of(f)}.py", b"").decode("utf-8", errors="replace")
        sections = graded(module_of(f))
        helpers = {n: sections[n] for n in graded_callees(source, f, list(sections)) if n in failing}
        if helpers:
            notes.append(blame_helpers(f"{f} passes {result.passed[f]}/{result.total[f]} hidden cases", f, helpers))
    return notes


def _fitted_notes(result: Grade) -> list[str]:
    """A note for each function that passes (nearly) all published cases but clearly fewer fresh ones."""
    notes = []
    for f in result.functions:
        published, hidden = (result.published_passed[f], result.published_total[f]), (result.passed[f], result.total[f])
        if not published[1] or not hidden[1] or published[0] < FITTED_PUBLISHED * published[1]:
            continue
        if hidden[0] / hidden[1] < published[0] / published[1] / 2:
            notes.append(
                f"{f} passes {published[0]}/{published[1]} published cases but only {hidden[0]}/{hidden[1]} fresh "
                f"ones: answers fitted to the published cases (a lookup table?); read {module_of(f)}.py"
            )
    return notes


def grade(
    submission: Path,
    cases: list[dict],
    limits: Limits,
    isolate: bool,
    seed: int | None = None,
    gates: tuple = (),
    gate_limits: Limits | None = None,
    functions: list[str] | None = None,
    folder: Path | None = None,
) -> Grade:
    """Run one submission on ``cases`` (published and hidden) in a child process and score it: points from
    the hidden cases only; then its outcome ``gates``. ``functions``: the assignment's (default: all), the only
    ones run and scored; ``folder``: where the student files are, when not ``submission`` itself (a repository
    uploaded whole: :func:`find_student_files`)."""
    result = Grade(submission=str(submission), seed=seed, functions=list(functions or FUNCTIONS))
    cases = [c for c in cases if c["function"] in result.functions]
    result.gates = {g.name: GateResult() for g in gates}
    for case in cases:
        (result.total if _hidden(case) else result.published_total)[case["function"]] += 1
    files, refused = _read_submission(folder or submission)
    if refused:
        result.notes.append(f"scored 0: {'; '.join(refused)}; a submission holds regular files only")
        result.diagnoses = dict.fromkeys(result.functions, result.notes[-1])
        return result
    result.notes = _file_notes(files, result.functions)
    with tempfile.TemporaryDirectory(prefix="rlhf-grading-") as work:
        tree = Path(work) / "tree"
        make_tree(tree, files, (CASES,))
        # The published cases first, in children of their own: what they print reaches the student as it is (the
        # message pytest prints), and no child before them has held a hidden input it could have put there.
        # A function that gave no result on any published case (it crashed or hung every time) is not run on the
        # hidden ones: it would only hang again, three timeouts more.
        published = [c for c in cases if not _hidden(c)]
        outcomes = _run_cases(tree, published, limits, isolate, result.notes)
        dead = {c["function"] for c in published} - {c["function"] for c in published if _key(c) in outcomes}
        hidden = [c for c in cases if _hidden(c) and c["function"] not in dead]
        outcomes.update(_run_cases(tree, hidden, limits, isolate, result.notes))
    result.notes = list(dict.fromkeys(result.notes))  # a function that failed in both runs: one note
    outcomes = {key: outcome for key, outcome in outcomes.items() if _valid(outcome)}  # forged ones count as none
    result.passed = _count_passes([c for c in cases if _hidden(c)], outcomes)
    result.published_passed = _count_passes([c for c in cases if not _hidden(c)], outcomes)
    result.stopped = _stopped([c for c in cases if _hidden(c)], outcomes)
    result.diagnoses = diagnose(cases, outcomes, _hidden, _key)
    for function in result.functions:
        if not any(_key(c) in outcomes for c in cases if c["function"] == function):
            if time_out := limits.out_of_time():
                result.diagnoses[function] = f"{function}: {time_out}."
                continue
            result.diagnoses[function] = (
                f"{function} gave no result: its process crashed, hung or exceeded a limit ({limits.seconds:g} CPU s, "
                f"{limits.memory_mb} MiB) every time; run pytest -m graded -k {function} on your machine to see why."
            )
    result.notes += _helper_notes(result, files)
    result.flags += _fitted_notes(result)
    _grade_gates(result, files, gates, gate_limits or limits, isolate)
    return result


def no_result(result: Grade) -> set[str]:
    """The functions whose every child crashed, hung or hit a limit (their diagnosis says so): a gate that calls
    one of them is not trained (it would hang or crash there too, at a gate's larger budget)."""
    return {f for f, said in result.diagnoses.items() if said.startswith(f"{f} gave no result")}


def _run_cases(tree: Path, cases: list[dict], limits: Limits, isolate: bool, notes: list[str]) -> dict:
    """The child's results on ``cases``, {case key: result}. A child that fails as a whole (a crash, a hang,
    a limit) is rerun per student file, and a file whose child fails again per function: a function that
    hangs costs three timeouts, not one per graded function; each function that still fails gets a note."""

    def run(part: list[dict]) -> dict | None:
        """The child's results on ``part``, only for the cases it was sent: a result under another key (a published
        case's, written by code that walked up to the child's own variables) is dropped, never merged."""
        got, keys = run_child(tree, CASES, _child_inputs(part), limits, isolate), {_key(c) for c in part}
        return None if got is None else {k: v for k, v in got.items() if k in keys}

    outcomes = run(cases) or {}

    def missing(functions: list[str]) -> list[str]:
        return [f for f in functions if any(_key(c) not in outcomes for c in cases if c["function"] == f)]

    for module in dict.fromkeys(module_of(f) for f in missing(FUNCTIONS)):
        part = missing([f for f in FUNCTIONS if module_of(f) == module])
        groups = [part] if len(part) > 1 else []
        groups += [[f] for f in part]
        for group in groups:
            group = missing(group)  # after the file's rerun: only what it left out
            if not group:
                continue
            rerun = run([c for c in cases if c["function"] in group])
            if rerun is not None:
                outcomes.update(rerun)
            elif len(group) == 1:
                notes.append(f"{group[0]}: {limits.out_of_time() or 'crashed, hung or exceeded a limit'}")
    return outcomes


def _counts(g: Grade, function: str) -> str:
    """A function's hidden passes (the grade) and published ones (self-check), as the table shows them."""
    hidden = f"{g.passed[function]}/{g.total[function]}"
    return f"hidden {hidden}; published {g.published_passed[function]}/{g.published_total[function]}"


def _grade_gates(result: Grade, files: dict[str, bytes], gates: tuple, limits: Limits, isolate: bool) -> None:
    """Train each gate with the submission's own functions (instructor.gate) and record pass/fail."""
    if not gates:
        return
    start = time.perf_counter()
    broken = no_result(result)
    skipped = {g.name: [f for f in g.checked if f in broken] for g in gates}
    result.gates = run_gates(files, tuple(g for g in gates if not skipped[g.name]), limits, isolate)
    for gate in gates:
        if skipped[gate.name]:
            hung = ", ".join(skipped[gate.name])
            result.gates[gate.name] = GateResult(
                note=f"gate/{gate.name}: not trained: {hung} gave no result on the cases"
            )
    result.gates = {g.name: result.gates[g.name] for g in gates}  # in the gates' order
    result.notes += [g.note for g in result.gates.values() if g.note]
    shown = ", ".join(f"{name} {g.shown} ({g.seconds:.0f} s)" for name, g in result.gates.items())
    seconds = time.perf_counter() - start  # with --jobs, lines of several submissions interleave: name it
    print(f"  {result.submission} gates: {shown}; {seconds:.0f} s with the judge", file=sys.stderr, flush=True)


def _gate_cell(gate: GateResult) -> str:
    return f"{gate.shown} ({gate.reward:g})" if gate.reward is not None else gate.shown


def markdown_table(grades: list[Grade]) -> str:
    sections = {g.function: g.section for g in GRADED}
    ran = _gates_ran(grades)
    functions = grades[0].functions if grades else []  # the assignment's
    header = ["submission", *(f"{f} ({sections[f]})" for f in functions), *(f"gate/{n}" for n in ran), "total", "notes"]
    columns = len(functions) + len(ran) + 1
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---", *["---:"] * columns, "---"]) + "|"]
    for g in grades:
        cells = [f"{g.points(f):g} ({_counts(g, f)})" for f in functions]
        cells += [_gate_cell(g.gates[n]) for n in ran]
        lines.append(
            f"| {g.submission} | " + " | ".join(cells) + f" | {g.total_points():g} | {'; '.join(g.notes + g.flags)} |"
        )
    points = ", ".join(f"{g.function} {g.points:g}" for g in GRADED if g.function in functions)
    if ran:
        points += ", " + ", ".join(f"gate/{g.name} {g.points:g}" for g in GATES if g.name in ran)
    total = sum(g.points for g in GRADED if g.function in functions) + sum(g.points for g in GATES if g.name in ran)
    seeds = ", ".join(sorted({str(g.seed) for g in grades}))
    note = (
        f"Points: {points} (total {total:g}); case points from the hidden cases only: fresh inputs "
        f"(seed {seeds}); published: the recorded cases the students have, a self-check that earns no points."
    )
    if ran:
        note += " A gate passes when the judged reward (in brackets) of its run's final policy reaches its bar."
    return "\n".join(lines) + "\n\n" + note + "\n"


def _gates_ran(grades: list[Grade]) -> list[str]:
    """The gates of this grading run, in the order of instructor.gate.GATES."""
    return [n for n in GATE_NAMES if any(n in g.gates for g in grades)]


def write_csv(path: Path, grades: list[Grade], sandbox: str = "yes") -> None:
    """The table as CSV; ``sandbox`` ("yes" or "no") says whether the children ran in the sandbox."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        ran = _gates_ran(grades)
        functions = grades[0].functions if grades else []  # the assignment's
        gate_columns = [c for n in ran for c in (f"gate/{n}", f"gate/{n}/reward", f"gate/{n}/steps")]
        counts = [f"{f}/{kind}" for f in functions for kind in ("hidden", "published")]
        writer.writerow(["submission", *functions, "total", *counts, *gate_columns, "seed", "notes", "sandbox"])
        for g in grades:
            points = [g.points(f) for f in functions]
            passes = [
                f"{passed[f]}/{total[f]}"
                for f in functions
                for passed, total in ((g.passed, g.total), (g.published_passed, g.published_total))
            ]
            gates = [c for n in ran for c in _gate_csv(g.gates[n])]
            row = [
                g.submission,
                *points,
                g.total_points(),
                *passes,
                *gates,
                g.seed,
                "; ".join(g.notes + g.flags),
                sandbox,
            ]
            writer.writerow(row)


def _sandbox_line(no_sandbox: bool) -> tuple[bool, str]:
    """Whether the children run in the sandbox, and the grader's first line, which says so. Where the
    sandbox cannot be built and --no_sandbox was not given, exit 2 with one line."""
    if no_sandbox:
        return False, "sandbox: NO (--no_sandbox): a submission can read this machine and leave processes behind"
    reason = sandbox.problem()
    if reason is not None:
        print(
            f"python -m instructor.grading: the sandbox cannot be built here ({reason}); add --no_sandbox to grade "
            "without it (a submission can then read this machine, the answer key included)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return (
        True,
        "sandbox: yes (a child sees only the interpreter, its packages and its own tree; its processes die with it)",
    )


def _gate_csv(gate: GateResult) -> list:
    """A gate's three CSV cells: pass/fail, the judged reward (empty if none) and the steps the run made."""
    return [gate.shown, "" if gate.reward is None else gate.reward, gate.steps]


def _chosen_gates(names: list[str], functions: list[str] | None = None) -> tuple:
    """--gate all / none / NAME...: the gates to train, in the order of instructor.gate.GATES; with
    ``functions`` (an assignment's), only the gates whose every checked function is among them."""
    if "none" in names:
        return ()
    chosen = (g for g in GATES if "all" in names or g.name in names)
    return tuple(g for g in chosen if functions is None or set(g.checked) <= set(functions))


def task_of(function: str) -> int:
    """The task a graded function belongs to: the number of its TASKS.md section (§3.2: task 3)."""
    return int(next(g.section for g in GRADED if g.function == function).lstrip("§").split(".")[0])


def assignment(tasks: str | None, files: list[str] | None) -> list[str]:
    """The graded functions of an assignment, in the course's order: those of ``tasks`` ("1-4", "1-4,7") and
    those of ``files`` (student files, "ppo" or "ppo.py"); every function when both are None. ValueError, with
    the setting named, for a task or file the course does not have."""
    if tasks is None and files is None:
        return list(FUNCTIONS)
    known, wanted = sorted({task_of(f) for f in FUNCTIONS}), set()
    for part in (tasks or "").replace(" ", "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"--tasks {tasks}: give task numbers and ranges, e.g. 1-4 or 1-4,7")
        wanted |= set(range(int(low), int(high or low) + 1))
    if wanted and (max(wanted) > known[-1] or min(wanted) < 1):  # tasks 4, 5, 6 and 11 are run, not graded
        raise ValueError(f"--tasks {tasks}: the graded tasks are {', '.join(map(str, known))}")
    modules = {f.removesuffix(".py") for f in files or []}
    if modules - set(MODULES):
        raise ValueError(f"--files {' '.join(files or [])}: the student files are {', '.join(MODULES)}")
    chosen = [f for f in FUNCTIONS if task_of(f) in wanted or module_of(f) in modules]
    if not chosen:
        raise ValueError("--tasks / --files: this selection holds no graded function")
    return chosen


def find_student_files(folder: Path) -> Path | None:
    """Where the student files are under ``folder``: rlhf_practice/rl/ of an uploaded repository when it holds
    any (the course's own tests/properties/ holds files of the same names: the property laws, never graded), else
    the folder that holds the most student files (the shallowest of equals), tests/ folders, hidden folders and
    links not followed: the uploaded files themselves. None when no student file is anywhere in it."""
    best, rank = None, (False, 0)
    for here, dirs, names in sorted(os.walk(folder), key=lambda walked: walked[0].count(os.sep)):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "tests"]
        count = sum(name in names for name in SUBMISSION_FILES)
        path = Path(here)
        mine = (count > 0 and path.name == "rl" and path.parent.name == "rlhf_practice", count)
        if mine > rank:
            best, rank = path, mine
    return best


def add_grading_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a grading run, shared by the grader and the Gradescope autograder (instructor.gradescope):
    the hidden inputs' seed, the gates, the children's limits."""
    parser.add_argument("--seed", type=int, default=None, help="seed of the hidden inputs (default: a fresh one)")
    parser.add_argument(
        "--gate",
        nargs="+",
        default=["all"],
        choices=["all", "none", *GATE_NAMES],
        help="outcome gates to train (instructor.gate): all (default), none (the cases only), or some of them",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="CPU seconds one submission's child may use (wall clock: 3x that + 30 s, a backstop)",
    )
    parser.add_argument(
        "--gate_timeout", type=float, default=180.0, help="CPU seconds one gate's training child may use (likewise)"
    )
    parser.add_argument("--memory_mb", type=int, default=3072, help="address-space limit of a child, in MiB")
    parser.add_argument(
        "--tasks",
        default=None,
        help="grade only these tasks' functions, and the gates that need no other (e.g. 1-4, or 1-4,7): one "
        "assignment of the term (INSTRUCTOR.md §4.10); default: every task",
    )
    parser.add_argument(
        "--files",
        nargs="+",
        default=None,
        metavar="FILE",
        help=f"grade only the functions of these student files ({', '.join(MODULES)}), added to --tasks",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m instructor.grading",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "submissions",
        nargs="+",
        type=Path,
        help=f"folders that each hold a copy of rlhf_practice/rl/ ({', '.join(SUBMISSION_FILES)})",
    )
    parser.add_argument("--csv", type=Path, default=Path("grading_results.csv"), help="where to write the table")
    parser.add_argument(
        "--feedback",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write each student's feedback page to DIR (<submission>.md and .html): per function the points, "
        "the passes and what to fix, per gate the measured reward; no hidden input or expected value",
    )
    add_grading_arguments(parser)
    parser.add_argument(
        "--jobs",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="submissions graded at once, each child on one thread (default: the CPU cores this process may use)",
    )
    parser.add_argument(
        "--no_sandbox",
        action="store_true",
        help="run the children without the sandbox (where it cannot be built): they can then read this machine, "
        "the answer key included, write wherever you can, and leave processes running",
    )
    from instructor import similarity  # copydetect's winnowing: only with --similarity

    parser.add_argument(
        "--similarity",
        action="store_true",
        help="after grading, compare every pair of submissions file by file (instructor.similarity) and note each "
        "flagged pair in both rows (the table and the CSV; not the students' feedback)",
    )
    parser.add_argument(
        "--similarity_threshold",
        type=float,
        default=similarity.THRESHOLD,
        help="the score (of the pair, or of one of its files) from which a pair is flagged",
    )
    parser.add_argument(
        "--similarity_report", type=Path, default=None, help="the HTML report (default: similarity.html beside --csv)"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more (submissions graded at once)")
    not_folders = [str(p) for p in args.submissions if not p.is_dir()]
    if not_folders:
        parser.error(f"not a folder: {', '.join(not_folders)} (each submission is a copy of rlhf_practice/rl/)")
    try:
        functions = assignment(args.tasks, args.files)
    except ValueError as err:
        parser.error(str(err))
    isolate, sandbox_line = _sandbox_line(args.no_sandbox)
    print(sandbox_line, file=sys.stderr, flush=True)
    # where each submission's student files are: the folder itself, or rlhf_practice/rl/ of a repository
    found = {folder: find_student_files(folder) or folder for folder in args.submissions}

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    from instructor.cases import build_cases  # the live key: loaded only once the arguments are right

    started = time.perf_counter()
    hidden = [c for c in build_cases(seed=seed) if c["function"] in functions]  # fresh inputs: random, and variants
    built = time.perf_counter() - started
    published = [c for c in load_cases() if c["function"] in functions]  # what the release ships: a self-check
    cases = published + hidden
    limits = Limits(seconds=args.timeout, memory_mb=args.memory_mb)
    print(
        f"{len(hidden)} hidden cases (the grade; seed {seed}, built in {built:.1f} s), {len(published)} published "
        "(self-check)",
        file=sys.stderr,
    )
    gates = _chosen_gates(args.gate, functions)
    if len(functions) < len(FUNCTIONS):
        print(f"the assignment: {', '.join(functions)}; gates: {', '.join(g.name for g in gates) or 'none'}",
              file=sys.stderr)  # fmt: skip
    gate_limits = Limits(seconds=args.gate_timeout, memory_mb=args.memory_mb)

    def one(numbered: tuple[int, Path]) -> Grade:
        i, folder = numbered
        where = "" if found[folder] == folder else f" (its student files: {found[folder]})"
        print(f"[{i}/{len(args.submissions)}] grading {folder}{where} ...", file=sys.stderr, flush=True)
        result = grade(folder, cases, limits, isolate, seed, gates, gate_limits, functions, found[folder])
        if found[folder] == folder and not any((folder / name).exists() for name in SUBMISSION_FILES):
            result.notes.insert(0, f"no student file anywhere in {folder}")
        return result

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each child is its own process on one thread
        grades = list(pool.map(one, enumerate(args.submissions, 1)))
    if args.similarity:  # read as the grader reads them (no link followed); labelled as the rows
        report = args.similarity_report or args.csv.parent / "similarity.html"
        read = {str(folder): _read_submission(found[folder])[0] for folder in args.submissions}
        pairs = similarity.similar_pairs(read, args.similarity_threshold, report)
        rows = {g.submission: g for g in grades}
        for pair in pairs:
            for me in (pair.a, pair.b):
                rows[me].flags.append(pair.note(me, report))
        print(
            f"similarity: {len(pairs)} pairs flagged (score >= {args.similarity_threshold:g}); report {report}",
            file=sys.stderr,
        )
    print(markdown_table(grades))
    write_csv(args.csv, grades, sandbox="yes" if isolate else "no")
    print(f"table written to {args.csv}", file=sys.stderr)
    if args.feedback is not None:
        pages = write_pages(args.feedback, grades)
        print(f"feedback pages written to {args.feedback} ({len(pages)} submissions, .md and .html)", file=sys.stderr)


if __name__ == "__main__":
    main()
