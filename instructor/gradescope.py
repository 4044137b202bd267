"""Gradescope: the autograder zip, and the program that grades one submission inside it.

    python -m instructor gradescope autograder.zip                   # hidden cases from a fresh seed, all gates
    python -m instructor gradescope a1.zip --tasks 1-4               # one assignment: tasks 1-4 and their gates
    python -m instructor gradescope autograder.zip --seed 7 --gate ppo grpo --timeout 60 --visibility visible

**The zip** follows Gradescope's autograder layout (unzipped into ``/autograder/source``): ``setup.sh``
(installs Python 3.11 where the image lacks it, a virtual environment with the pinned requirements, CPU
torch, and an unprivileged user for the children), ``run_autograder`` (runs :func:`run`), and what the
grader needs: the package with the student files as stubs, the training scripts the gates run, the
published cases (``tests/fixtures/graded/``), the grader's own modules (:data:`GRADER_MODULES`: no
answer key, no grading book, no case generator), ``hidden_cases.pt`` (the hidden cases of ``--seed``:
fresh inputs and their expected values, recorded from the key when the zip is built, as
``python -m instructor.grading --seed`` builds them) and ``settings.json`` (seed, gates, limits).

**A run** (:func:`run`) grades ``/autograder/submission`` (a copy of ``rlhf_practice/rl/``: uploaded files,
a zip or a repository; the folder that holds the most student files is graded, any subset of them) with
:func:`instructor.grading.grade`: same cases, same scoring, same gates, so the key's score is the
grader's total for the same seed. A zip is one assignment (``--tasks`` / ``--files``): only its functions,
and the gates that need no other, are run, scored and shown. It writes ``/autograder/results/results.json``:
per function a self-check test (the published cases, no points, always visible) and a test of its hidden
cases (its points), one test per gate, the latter two shown as ``--visibility`` says (after the due date by
default; the top-level page then holds only what the student may see now). Hidden failures are told in the
fixed words of :mod:`instructor.feedback`, never a hidden input, expected value or text of the submission's.
What only the instructor may see (the seed, the instructor's flags, who the children ran as) goes to
standard output, which Gradescope shows to instructors only.

- results.json is written before anything runs (score 0, "did not finish"), again once the cases are
  graded (the gates marked as not run yet), and last with the gates: a run that Gradescope's timeout
  kills keeps what it had graded.
- A child that crashes or hangs costs its own functions (``--timeout`` CPU seconds per child, reruns per
  file, then per function), never the run; a gate that calls a function that gave no result is not trained.
  No child starts once the submission's ``--budget`` is spent.
- Gradescope's containers have no user namespaces, so the sandbox (:mod:`instructor.sandbox`) usually
  cannot be built there: the run then grades without it and says so in the output (each submission is
  alone in its container). Without the sandbox and as root (Gradescope's case), the children run as an
  unprivileged user (``RLHF_GRADER_USER``, made by setup.sh), and the zip's files and the results folder
  are made readable by root only: a submission's code cannot read the hidden cases or write results.json.
  Never as root: where that user is missing or cannot run the interpreter, no student code runs and
  results.json says the autograder is misconfigured. After each child every process of that user is ended
  (:func:`instructor.children.end_processes`), and the judge runs as root in a folder only root may enter.
  (With the sandbox, which hides those files already, they run as the grader does.)
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import random
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import torch

from rlhf_practice.checks import load_cases
from rlhf_practice.course import ROOT

# The instructor modules the zip carries: the grader, its children, the gates, the feedback, and this one.
GRADER_MODULES = (
    "__init__.py",
    "case_child.py",
    "children.py",
    "feedback.py",
    "function_server.py",
    "gate.py",
    "gate_child.py",
    "gradescope.py",
    "grading.py",
    "judge_child.py",
    "sandbox.py",
    "sandbox_setup.py",
)
HIDDEN, SETTINGS = "hidden_cases.pt", "settings.json"
VISIBILITIES = ("after_due_date", "after_published", "hidden", "visible")  # Gradescope's, for the tests with points
# Seconds one submission may take in all (cases and gates; Gradescope's own limit defaults to 40 minutes): a
# child that would start later does not run, and its functions or gate score 0 with a note.
BUDGET = 25 * 60
USER = "rlhf-student"  # the unprivileged user the children run as (RLHF_GRADER_USER overrides)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
# RLHF_PYTHON, RLHF_VENV, RLHF_GRADER_USER and RLHF_TORCH_INDEX override the defaults below.
set -euo pipefail
cd "$(dirname "$0")"
venv="${RLHF_VENV:-/opt/rlhf_practice/venv}"
if [ ! -x "$venv/bin/python" ]; then
  python="${RLHF_PYTHON:-python3.11}"
  if ! command -v "$python" > /dev/null; then   # Gradescope's Ubuntu images: Python 3.11 from deadsnakes
    apt-get update
    apt-get install -y software-properties-common
    add-apt-repository -y ppa:deadsnakes/ppa
    apt-get update
    apt-get install -y python3.11 python3.11-venv
    python=python3.11
  fi
  "$python" -m venv "$venv"
fi
# torch from its CPU index first (PyPI's Linux wheel is the multi-GB CUDA build), then the pinned rest
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "$(grep -E '^torch==' requirements.txt)" --index-url "${RLHF_TORCH_INDEX:-%(index)s}"
"$venv/bin/python" -m pip install -q -r requirements.txt
user="${RLHF_GRADER_USER:-%(user)s}"
id -u "$user" > /dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
# the children's user runs the environment's interpreter: the environment and the Python it was made from
# readable by all, and every folder above them traversable (not listable), e.g. a Python under /root
base="$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')"
for dir in "$venv" "$base"; do
  chmod -R a+rX "$dir"
  while [ "$dir" != / ]; do chmod a+x "$dir"; dir="$(dirname "$dir")"; done
done
echo "setup.sh: $venv ready, children run as $user"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission, as root: it grades /autograder/submission and writes
# /autograder/results/results.json (AUTOGRADER_ROOT and RLHF_VENV override the paths).
root="${AUTOGRADER_ROOT:-/autograder}"
cd "$root/source"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONPATH="$root/source"
exec "${RLHF_VENV:-/opt/rlhf_practice/venv}/bin/python" -m instructor.gradescope run --root "$root"
"""


# --- building the zip


def _package_files() -> dict[str, bytes]:
    """{path in the zip: contents}: the package (student files as stubs), the gates' scripts, the published
    cases, the grader's modules and the requirements (less the editable install of this repository)."""
    from instructor.gate import SCRIPTS
    from instructor.release import _tracked_files, student_files

    stubs = {path: source.encode() for path, source in student_files().items()}
    files = {}
    for path in _tracked_files():
        wanted = path.startswith(("rlhf_practice/", "tests/fixtures/graded/")) or path in SCRIPTS
        if wanted and (ROOT / path).is_file():
            files[path] = stubs.get(path) or (ROOT / path).read_bytes()
    for module in GRADER_MODULES:
        files[f"instructor/{module}"] = (ROOT / "instructor" / module).read_bytes()
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    files["requirements.txt"] = "".join(f"{line}\n" for line in requirements if line.strip() != "-e .").encode()
    return files


def build(
    out: Path,
    seed: int,
    gates: list[str],
    timeout: float,
    gate_timeout: float,
    memory_mb: int,
    sandbox: bool = True,
    functions: list[str] | None = None,
    visibility: str = "after_due_date",
    budget: float = BUDGET,
) -> int:
    """Write the autograder zip to ``out``; returns the number of hidden cases it holds. ``gates``: names (or
    "all"), kept only where the assignment has every function they check; ``functions``: the assignment's
    (default: all); ``visibility``: Gradescope's, of the tests that carry points (hidden cases, gates);
    ``budget``: seconds one submission may take in all; ``sandbox`` False: its runs never try the sandbox
    (as in a container without user namespaces)."""
    from instructor.cases import build_cases
    from instructor.grading import FUNCTIONS, _chosen_gates

    functions = list(functions or FUNCTIONS)
    hidden = [c for c in build_cases(seed=seed) if c["function"] in functions]
    gates = [g.name for g in _chosen_gates(gates, functions)]
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / HIDDEN
        torch.save(hidden, saved)
        settings = {"seed": seed, "gates": gates, "timeout": timeout, "gate_timeout": gate_timeout}
        settings.update(memory_mb=memory_mb, sandbox=sandbox, functions=functions, visibility=visibility)
        settings.update(budget=budget)
        files = _package_files()
        files[HIDDEN] = saved.read_bytes()
        files[SETTINGS] = (json.dumps(settings, indent=1) + "\n").encode()
        scripts = {
            "setup.sh": SETUP_SH % {"index": TORCH_CPU_INDEX, "user": USER},
            "run_autograder": RUN_AUTOGRADER,
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        entries = [(name, text.encode(), 0o755) for name, text in scripts.items()]  # run as they are
        entries += [(name, data, 0o644) for name, data in sorted(files.items())]  # readable by all
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data, mode in entries:  # the modes are kept by unzip
                info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
                info.external_attr, info.compress_type = (stat.S_IFREG | mode) << 16, zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
    return len(hidden)


# --- grading one submission inside Gradescope


def _grader_user() -> tuple[tuple[int, int] | None, str]:
    """(uid, gid) of the children's user and a line saying who they run as; (None, why) where the grader runs
    as root and that user does not exist or cannot run this interpreter with torch (a probe): the run must
    then not go on (:func:`run` says the autograder is misconfigured). Not root: (None, a line) too, and the
    children run as the grader's own user (a local try of the autograder; Gradescope runs it as root)."""
    if os.geteuid() != 0:
        return None, "the children run as the grader's own user (not root: no other user to run them as)"
    name = os.environ.get("RLHF_GRADER_USER", USER)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None, f"user {name} does not exist (setup.sh makes it)"
    user = (entry.pw_uid, entry.pw_gid)
    if user[0] == 0:
        return None, f"user {name} is root"
    try:
        probe = subprocess.run(
            [sys.executable, "-I", "-c", "import torch"],
            user=user[0],
            group=user[1],
            extra_groups=[],
            capture_output=True,
            cwd="/",
        )
    except OSError:  # the interpreter itself is out of its reach
        probe = None
    if probe is None or probe.returncode != 0:
        return None, f"user {name} cannot run {sys.executable} with torch (setup.sh makes the environment readable)"
    return user, f"the children run as user {name}, who cannot read the hidden cases or the results"


def _published_text(grade, function: str) -> str:
    """One function's self-check: its published passes and, where one fails, the message pytest prints."""
    from instructor.feedback import SECTIONS

    passed, total = grade.published_passed[function], grade.published_total[function]
    line = (
        f"{function} (TASKS.md {SECTIONS[function]}): published cases passed {passed}/{total}, the ones "
        "`pytest -m graded` runs on your machine (a self-check, worth no points)."
    )
    said = grade.diagnoses.get(function, "")
    from_hidden = f"{function} fails a hidden case" in said or "on a hidden input" in said  # shown after the due date
    published_failure = passed < total and not from_hidden
    return f"{line}\nWhat to fix: {said}" if published_failure and said else line


def _results(grade, gates: tuple, stage: str, header: list[str], seconds: float, visibility: str) -> dict:
    """results.json as Gradescope reads it. Per graded function of the assignment two tests: its published
    cases (a self-check worth no points, always visible) and its hidden cases (its points, shown as
    ``visibility`` says); per gate one test, shown likewise. The top-level output is the feedback page where
    everything is visible at once, else only what the student may see now."""
    from instructor.feedback import SECTIONS, function_text, gate_text, page

    tests = []
    for f in grade.functions:
        done = grade.published_total[f] > 0 and grade.published_passed[f] == grade.published_total[f]
        tests.append(
            {
                "name": f"{f} ({SECTIONS[f]}): published cases (self-check)",
                "score": 0.0,
                "max_score": 0.0,
                "status": "passed" if done else "failed",
                "output": _published_text(grade, f),
                "visibility": "visible",
            }
        )
        full = grade.total[f] > 0 and grade.passed[f] == grade.total[f]
        tests.append(
            {
                "name": f"{f} ({SECTIONS[f]}): hidden cases",
                "score": grade.points(f),
                "max_score": grade.max_points(f),
                "status": "passed" if full else "failed",
                "output": function_text(grade, f),
                "visibility": visibility,
            }
        )
    for gate in gates:
        test = {"name": f"gate/{gate.name}", "max_score": gate.points, "visibility": visibility}
        if gate.name in grade.gates:
            result = grade.gates[gate.name]
            test.update(score=grade.gate_points(gate.name), status="passed" if result.passed else "failed")
            test["output"] = gate_text(grade, gate.name)
        else:
            test.update(score=0.0, status="failed", output=f"gate/{gate.name}: not run ({stage})")
        tests.append(test)
    maximum = sum(grade.max_points(f) for f in grade.functions) + sum(g.points for g in gates)
    if visibility == "visible":
        output = page(grade, "your submission")
    else:
        when = {
            "after_due_date": "after the due date (the late due date, where late submissions are allowed)",
            "after_published": "once your instructor publishes the grades",
            "hidden": "never here: your instructor has them",
        }[visibility]
        shown = [
            "# Feedback: your submission",
            "",
            f"This assignment is worth {maximum:g} points: the *hidden* cases of each function (inputs made fresh "
            "for this grading, which you do not have) and the outcome gates (a short training run with your code). "
            f"Their results are shown {when}. What you see now is the self-check: the *published* cases, the "
            "ones `pytest -m graded` runs on your machine, worth no points.",
            "",
            "| function | TASKS.md | published passed | what to fix |",
            "|---|---|---:|---|",
        ]
        for f in grade.functions:
            fix = _published_text(grade, f).partition("What to fix: ")[2].replace("|", "\\|")
            passed = f"{grade.published_passed[f]}/{grade.published_total[f]}"
            shown.append(f"| {f} | {SECTIONS[f]} | {passed} | {fix or '—'} |")
        # the notes on the files alone (missing, not parsing, refused): the others speak of hidden results
        notes = [n for n in grade.notes if n.split(" ")[0].endswith(".py") or n.startswith("scored 0")]
        if notes:
            shown += ["", "## Notes", "", *(f"- {n}" for n in notes)]
        output = "\n".join(shown) + "\n"
    results = {
        "execution_time": round(seconds),
        "output": "\n".join(header) + "\n\n" + output,
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    if visibility == "visible":  # else the total is the tests' sum, each shown when its test is
        results["score"] = grade.total_points()
    return results


def _write(path: Path, results: dict) -> None:
    """Write results.json whole or not at all (a rename), so that a killed run leaves the last one."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)


def _misconfigured(out: Path, why: str) -> dict:
    """results.json of a run that must not grade (no student code ran): 0, and why, for the instructor."""
    print(f"AUTOGRADER MISCONFIGURED: {why}; no student code ran. Rerun setup.sh (INSTRUCTOR.md §4.10).")
    results = {
        "score": 0.0,
        "output": "The autograder is misconfigured, so your submission was not graded (none of your code ran). "
        "Your instructor can see why; resubmit once they have fixed it.",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }
    _write(out, results)
    return results


def run(root: Path) -> dict:
    """Grade ``root``/submission with the zip in ``root``/source and write ``root``/results/results.json.
    What only the instructor may see (the seed, the instructor's flags) goes to standard output, which
    Gradescope shows to instructors only (``stdout_visibility``: hidden)."""
    from instructor import sandbox
    from instructor.children import Limits, end_processes
    from instructor.gate import GATES
    from instructor.grading import _grade_gates, _read_submission, find_student_files, grade

    started = time.perf_counter()
    source, out = root / "source", root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads((source / SETTINGS).read_text(encoding="utf-8"))
    visibility = settings.get("visibility", "visible")
    _write(out, {"score": 0.0, "output": "The autograder started but did not finish.", "tests": []})
    print(f"hidden inputs: seed {settings['seed']}; hidden cases and gates shown to students: {visibility}")
    header = []

    reason = sandbox.problem() if settings["sandbox"] else "the zip was built with --no_sandbox"
    isolate = reason is None
    if isolate:
        header.append("Sandbox: yes (each child sees only the interpreter, its packages and its own folder).")
    else:
        header.append(
            f"Sandbox: no ({reason}); graded without it: this submission is alone in its container, and its code "
            "runs in child processes as another user, under limits of CPU time and memory."
        )
    user, who = (None, "the sandbox hides the autograder's files from the children") if isolate else _grader_user()
    if not isolate and user is None and os.geteuid() == 0:
        return _misconfigured(out, who)
    print(f"isolation: {who}")
    if user is not None:
        end_processes(user[0])  # nothing of that user runs before the submission does
        for private in (source, out.parent):
            os.chmod(private, 0o700)
    budget = settings.get("budget", BUDGET)
    deadline = time.monotonic() + budget
    shared = {"memory_mb": settings["memory_mb"], "user": user, "deadline": deadline, "budget": budget}
    limits, gate_limits = (
        Limits(seconds=settings["timeout"], **shared),
        Limits(seconds=settings["gate_timeout"], **shared),
    )
    gates = tuple(g for g in GATES if g.name in settings["gates"])

    folder = find_student_files(root / "submission")
    if folder is None:
        from instructor.children import SUBMISSION_FILES

        names = ", ".join(SUBMISSION_FILES)
        results = {"score": 0.0, "output": f"No student file found in the submission: upload {names}.", "tests": []}
        _write(out, results)
        return results
    header.append(f"Graded: {folder.relative_to(root / 'submission').as_posix() or '.'} of your submission.")
    functions = settings.get("functions")
    cases = load_cases(source / "tests" / "fixtures" / "graded") + torch.load(source / HIDDEN, weights_only=True)
    result = grade(folder, cases, limits, isolate, settings["seed"], functions=functions)
    result.submission = "your submission"
    seconds = time.perf_counter() - started
    stage = "the cases are graded; the gates were still running"
    _write(out, _results(result, gates, stage, header, seconds, visibility))
    files, refused = _read_submission(folder)
    if gates and not refused:
        _grade_gates(result, files, gates, gate_limits, isolate)
    if time.monotonic() > deadline:
        result.notes.append(f"the autograder's time for one submission ({budget:g} s) ran out")
    results = _results(result, gates, "the submission scored 0", header, time.perf_counter() - started, visibility)
    _write(out, results)
    for flag in result.flags:  # for the instructor only
        print(f"instructor flag: {flag}")
    total = result.total_points()
    print(
        f"score {total:g} of {result.max_score():g} in {time.perf_counter() - started:.0f} s ({'; '.join(result.notes)})"
    )
    return results


def main(argv: list[str] | None = None) -> None:
    from instructor.gate import GATES
    from instructor.grading import POINTS, add_grading_arguments, assignment

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m instructor gradescope",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if argv and argv[0] == "run":  # inside the autograder: python -m instructor.gradescope run --root /autograder
        parser.add_argument("run")
        parser.add_argument("--root", type=Path, default=Path("/autograder"))
        args = parser.parse_args(argv)
        run(args.root)
        print(f"results.json written to {args.root / 'results' / 'results.json'}")
        return
    parser.add_argument("out", type=Path, help="the zip to write (e.g. autograder.zip)")
    add_grading_arguments(parser)
    parser.add_argument(
        "--no_sandbox", action="store_true", help="never try the sandbox (it is tried, and used where it can be built)"
    )
    parser.add_argument(
        "--visibility",
        default="after_due_date",
        choices=VISIBILITIES,
        help="when students see the tests that carry points, the hidden cases and the gates (Gradescope's "
        "visibility; default after_due_date); the published cases' self-check is always visible",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=BUDGET,
        help=f"seconds one submission may take in all (default {BUDGET}); set Gradescope's timeout above it",
    )
    args = parser.parse_args(argv)
    if args.out.suffix != ".zip":
        parser.error(f"{args.out}: give a path ending in .zip (Gradescope takes the autograder as a zip)")
    try:
        functions = assignment(args.tasks, args.files)
    except ValueError as err:
        parser.error(str(err))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    gates = [] if "none" in args.gate else args.gate
    count = build(args.out, seed, gates, args.timeout, args.gate_timeout, args.memory_mb, not args.no_sandbox,
                  functions, args.visibility, args.budget)  # fmt: skip
    with zipfile.ZipFile(args.out) as zf:
        kept = json.loads(zf.read(SETTINGS))["gates"]
    marks = sum(POINTS[f] for f in functions) + sum(g.points for g in GATES if g.name in kept)
    size = args.out.stat().st_size / 2**20
    print(
        f"wrote {args.out} ({size:.1f} MiB): {len(functions)} functions, {count} hidden cases (seed {seed}), gates: "
        f"{', '.join(kept) or 'none'}; full marks {marks:g} points (give the assignment that many), hidden cases and "
        f"gates shown {args.visibility}; upload it as the autograder of a Gradescope programming assignment "
        "(INSTRUCTOR.md §4.10)"
    )


if __name__ == "__main__":
    main()
