"""Grade a class: run the graded tests on each submission and print one score table.

    python -m rlhf_practice.grading submissions/alice submissions/bob ...
    python -m rlhf_practice.grading submissions/*/ --csv grades.csv --timeout 20

Each submission is a folder holding a student's ``ppo.py`` and ``grpo.py`` (a copy of their
``rlhf_practice/rl/``). For each one, ``pytest -m graded --impl FOLDER`` runs in a separate process
with a per-test time limit. A task's points are its share of passed tests times ``--points``. A
submission that crashes, hangs or does not parse loses the points of the tests it breaks and
nothing else: when the whole run dies, each task is rerun on its own.

The table is printed as Markdown and written as CSV (``--csv``, default ``grading_results.csv``).
"""

from __future__ import annotations

import argparse
import ast
import csv
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from rlhf_practice import PACKAGE_DIR
from rlhf_practice.course import TASKS as COURSE_TASKS

ROOT = PACKAGE_DIR.parent
TASKS = [task.function for task in COURSE_TASKS]
TIMED_OUT = "timed out"  # a test outcome besides True (passed) and False (failed)
SECTIONS = {task.function: task.section for task in COURSE_TASKS}


def task_of(test_name: str) -> str:
    """The graded function a test belongs to: the one its name is about (``test_<function>_...``)."""
    matches = [task for task in TASKS if test_name.startswith(f"test_{task}")]
    if len(matches) != 1:
        raise ValueError(f"graded test {test_name!r} must be named test_<function>_... for one of {TASKS}")
    return matches[0]


def _task_of_case(case_name: str) -> str:
    """The task of a collected test case such as ``test_grpo_loss_random_inputs[float32]``."""
    return task_of(case_name.split("[")[0])


@dataclass
class Grade:
    """One submission's results: passed / total graded tests per task, and notes for the instructor."""

    submission: str
    passed: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def points(self, task: str, points_per_task: float) -> float:
        return round(points_per_task * self.passed.get(task, 0) / self.total[task], 1) if self.total[task] else 0.0

    def total_points(self, points_per_task: float) -> float:
        return round(sum(self.points(task, points_per_task) for task in TASKS), 1)


def _pytest(args: list[str], timeout: float) -> subprocess.CompletedProcess | None:
    """Run pytest in a fresh process from the repository root; None when it ran out of time."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header", *args]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None


def collect_graded_tests() -> dict[str, int]:
    """How many graded tests each task has (collected once, without running anything)."""
    proc = _pytest(["-m", "graded", "--collect-only", "--impl", "answer"], timeout=300)
    if proc is None or proc.returncode != 0:
        raise SystemExit(f"could not collect the graded tests:\n{proc.stdout if proc else 'timed out'}")
    totals = dict.fromkeys(TASKS, 0)
    for line in proc.stdout.splitlines():
        if "::" in line:
            totals[_task_of_case(line.split("::")[-1])] += 1
    return totals


def _results(folder: Path, keyword: str | None, per_test_timeout: float, budget: float) -> dict[str, bool | str] | None:
    """{test id: True, False or TIMED_OUT} for one run over ``folder``; None when the run crashed or hung as a whole."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        args = ["-m", "graded", f"--impl={folder}", f"--timeout={per_test_timeout}", f"--junitxml={report}"]
        if keyword:
            args += ["-k", keyword]
        proc = _pytest(args, timeout=budget)
        if proc is None or not report.is_file():
            return None
        results = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            problems = [child for child in case if child.tag in ("failure", "error", "skipped")]
            timed_out = any("Timeout" in (child.get("message") or "") for child in problems)
            results[case.get("name", "")] = TIMED_OUT if timed_out else not problems
        return results


SUBMISSION_FILES = ("ppo.py", "grpo.py")


def _file_notes(folder: Path) -> list[str]:
    """A note for each submission file that is missing or does not parse."""
    notes = []
    for name in SUBMISSION_FILES:
        path = folder / name
        if not path.is_file():
            notes.append(f"{name} missing")
            continue
        try:
            ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError as err:
            notes.append(f"{name} does not parse (line {err.lineno})")
    return notes


def grade(folder: Path, totals: dict[str, int], per_test_timeout: float) -> Grade:
    """Run the graded tests over one submission folder."""
    result = Grade(submission=str(folder), total=dict(totals), passed=dict.fromkeys(TASKS, 0))
    result.notes = _file_notes(folder)
    if not all((folder / name).is_file() for name in SUBMISSION_FILES):
        return result  # load_impl refuses a folder without both files: nothing can run
    budget = per_test_timeout * sum(totals.values()) + 120
    outcomes = _results(folder.resolve(), None, per_test_timeout, budget)
    if outcomes is None:
        result.notes.append("the test run crashed or hung; each task was rerun on its own")
        outcomes = {}
        for task in TASKS:
            task_budget = per_test_timeout * totals[task] + 120
            task_outcomes = _results(folder.resolve(), f"test_{task}", per_test_timeout, task_budget)
            if task_outcomes is None:
                result.notes.append(f"{task}: crashed or hung")
            else:
                outcomes.update({name: ok for name, ok in task_outcomes.items() if _task_of_case(name) == task})
    timed_out = dict.fromkeys(TASKS, 0)
    for name, outcome in outcomes.items():
        task = _task_of_case(name)
        result.passed[task] += outcome is True
        timed_out[task] += outcome == TIMED_OUT
    result.notes += [f"{task}: {n} test(s) timed out" for task, n in timed_out.items() if n]
    return result


def markdown_table(grades: list[Grade], points_per_task: float) -> str:
    header = ["submission", *(f"{task} ({SECTIONS[task]})" for task in TASKS), "total", "notes"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---", *["---:"] * (len(TASKS) + 1), "---"]) + "|"]
    for g in grades:
        cells = [f"{g.points(t, points_per_task):g} ({g.passed[t]}/{g.total[t]})" for t in TASKS]
        total = g.total_points(points_per_task)
        lines.append(f"| {g.submission} | " + " | ".join(cells) + f" | {total:g} | {'; '.join(g.notes)} |")
    max_total = points_per_task * len(TASKS)
    note = f"Each task is worth {points_per_task:g} points (total {max_total:g}); (passed/total) counts graded tests."
    return "\n".join(lines) + "\n\n" + note + "\n"


def write_csv(path: Path, grades: list[Grade], points_per_task: float) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", *TASKS, "total", *(f"{t}_tests_passed" for t in TASKS), "notes"])
        for g in grades:
            points = [g.points(t, points_per_task) for t in TASKS]
            total = g.total_points(points_per_task)
            writer.writerow([g.submission, *points, total, *(g.passed[t] for t in TASKS), "; ".join(g.notes)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rlhf_practice.grading",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("submissions", nargs="+", type=Path, help="folders that each hold ppo.py and grpo.py")
    parser.add_argument("--csv", type=Path, default=Path("grading_results.csv"), help="where to write the table")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds one graded test may take")
    parser.add_argument("--points", type=float, default=25.0, help="points per task (4 tasks)")
    args = parser.parse_args(argv)
    not_folders = [str(p) for p in args.submissions if not p.is_dir()]
    if not_folders:
        parser.error(f"not a folder: {', '.join(not_folders)} (each submission is a copy of rlhf_practice/rl/)")

    totals = collect_graded_tests()
    grades = []
    for i, folder in enumerate(args.submissions, 1):
        print(f"[{i}/{len(args.submissions)}] grading {folder} ...", file=sys.stderr, flush=True)
        grades.append(grade(folder, totals, args.timeout))
    print(markdown_table(grades, args.points))
    write_csv(args.csv, grades, args.points)
    print(f"table written to {args.csv}", file=sys.stderr)


if __name__ == "__main__":
    main()
