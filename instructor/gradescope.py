"""Gradescope: the autograder zip, and the program that grades one submission inside it.

    python -m instructor gradescope autograder.zip                   # hidden cases from a fresh seed, all gates
    python -m instructor gradescope autograder.zip --seed 7 --gate ppo grpo --timeout 60

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
grader's total for the same seed. It writes ``/autograder/results/results.json``: one test per graded
function and one per gate, each with its points and the words of :mod:`instructor.feedback` (published
failures as pytest prints them; hidden ones by kind, never a hidden input or expected value), the
feedback page as the top-level output, and a top-level score equal to the grader's total.

- results.json is written before anything runs (score 0, "did not finish"), again once the cases are
  graded (the gates marked as not run yet), and last with the gates: a run that Gradescope's timeout
  kills keeps what it had graded.
- A child that crashes or hangs costs its own functions (``--timeout`` per child, reruns per file, then
  per function), never the run.
- Gradescope's containers have no user namespaces, so the sandbox (:mod:`instructor.sandbox`) usually
  cannot be built there: the run then grades without it and says so in the output (each submission is
  already alone in its container). Without the sandbox and as root (Gradescope's case), the children run
  as an unprivileged user (``RLHF_GRADER_USER``, made by setup.sh), and the zip's files and the results
  folder are made readable by root only: a submission's code cannot read the hidden cases or write
  results.json. (With the sandbox, which hides those files already, they run as the grader does.)
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
    "gate.py",
    "gate_child.py",
    "gradescope.py",
    "grading.py",
    "judge_child.py",
    "sandbox.py",
    "sandbox_setup.py",
)
HIDDEN, SETTINGS = "hidden_cases.pt", "settings.json"
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
    out: Path, seed: int, gates: list[str], timeout: float, gate_timeout: float, memory_mb: int, sandbox: bool = True
) -> int:
    """Write the autograder zip to ``out``; returns the number of hidden cases it holds. ``sandbox`` False:
    its runs never try the sandbox (as in a container without user namespaces)."""
    from instructor.cases import build_cases

    hidden = build_cases(seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / HIDDEN
        torch.save(hidden, saved)
        settings = {"seed": seed, "gates": gates, "timeout": timeout, "gate_timeout": gate_timeout}
        settings.update(memory_mb=memory_mb, sandbox=sandbox)
        files = _package_files()
        files[HIDDEN] = saved.read_bytes()
        files[SETTINGS] = (json.dumps(settings, indent=1) + "\n").encode()
        scripts = {
            "setup.sh": SETUP_SH % {"index": TORCH_CPU_INDEX, "user": USER},
            "run_autograder": RUN_AUTOGRADER,
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, text in scripts.items():  # executable: Gradescope runs them as they are
                info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
                info.external_attr = (stat.S_IFREG | 0o755) << 16
                zf.writestr(info, text)
            for name, data in sorted(files.items()):
                zf.writestr(name, data)
    return len(hidden)


# --- grading one submission inside Gradescope


def find_submission(folder: Path) -> Path | None:
    """The folder under ``folder`` that holds the most student files (the shallowest of equals; links not
    followed): the uploaded files themselves, or rlhf_practice/rl/ of an uploaded repository."""
    from instructor.children import SUBMISSION_FILES

    best, most = None, 0
    for here, dirs, names in sorted(os.walk(folder), key=lambda walked: walked[0].count(os.sep)):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        count = sum(name in names for name in SUBMISSION_FILES)
        if count > most:
            best, most = Path(here), count
    return best


def _grader_user() -> tuple[tuple[int, int] | None, str]:
    """(uid, gid) for the children, and a line saying who they run as. Only as root, and only where that user
    can run this interpreter (a probe): else the children run as the grader does, and the line says so."""
    if os.geteuid() != 0:
        return None, "the children run as the grader's own user (not root: no other user to run them as)"
    name = os.environ.get("RLHF_GRADER_USER", USER)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None, f"the children run as root: user {name} does not exist (setup.sh makes it)"
    user = (entry.pw_uid, entry.pw_gid)
    try:
        probe = subprocess.run(
            [sys.executable, "-I", "-c", "import torch"],
            user=user[0],
            group=user[1],
            extra_groups=[],
            capture_output=True,
        )
    except OSError:  # the interpreter itself is out of its reach
        probe = None
    if probe is None or probe.returncode != 0:
        return None, f"the children run as root: user {name} cannot run {sys.executable} with torch"
    return user, f"the children run as user {name}, who cannot read the hidden cases or the results"


def _results(grade, gates: tuple, stage: str, header: list[str], seconds: float) -> dict:
    """results.json as Gradescope reads it: a test per graded function and per gate, the page, the score."""
    from instructor.feedback import SECTIONS, function_text, gate_text, page
    from instructor.grading import FUNCTIONS

    tests = []
    for f in FUNCTIONS:
        full = grade.total[f] > 0 and grade.passed[f] == grade.total[f]
        tests.append(
            {
                "name": f"{f} ({SECTIONS[f]})",
                "score": grade.points(f),
                "max_score": grade.max_points(f),
                "status": "passed" if full else "failed",
                "output": function_text(grade, f),
                "visibility": "visible",
            }
        )
    for gate in gates:
        test = {"name": f"gate/{gate.name}", "max_score": gate.points, "visibility": "visible"}
        if gate.name in grade.gates:
            result = grade.gates[gate.name]
            test.update(score=grade.gate_points(gate.name), status="passed" if result.passed else "failed")
            test["output"] = gate_text(grade, gate.name)
        else:
            test.update(score=0.0, status="failed", output=f"gate/{gate.name}: not run ({stage})")
        tests.append(test)
    return {
        "score": grade.total_points(),
        "execution_time": round(seconds),
        "output": "\n".join(header) + "\n\n" + page(grade, "your submission"),
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def _write(path: Path, results: dict) -> None:
    """Write results.json whole or not at all (a rename), so that a killed run leaves the last one."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)


def run(root: Path) -> dict:
    """Grade ``root``/submission with the zip in ``root``/source and write ``root``/results/results.json."""
    from instructor import sandbox
    from instructor.children import Limits
    from instructor.gate import GATES
    from instructor.grading import _grade_gates, _read_submission, grade

    started = time.perf_counter()
    source, out = root / "source", root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads((source / SETTINGS).read_text(encoding="utf-8"))
    _write(out, {"score": 0.0, "output": "The autograder started but did not finish.", "tests": []})
    header = [f"Hidden inputs: seed {settings['seed']} (the same for the whole class)."]

    reason = sandbox.problem() if settings["sandbox"] else "the zip was built with --no_sandbox"
    isolate = reason is None
    if isolate:
        header.append("Sandbox: yes (each child sees only the interpreter, its packages and its own folder).")
    else:
        header.append(
            f"Sandbox: no ({reason}); graded without it: this submission is alone in its container, and its code "
            "runs in child processes under limits of time and memory."
        )
    user, who = (None, "the sandbox hides the autograder's files from the children") if isolate else _grader_user()
    header.append(f"Isolation: {who}.")
    if user is not None:
        for private in (source, out.parent):
            os.chmod(private, 0o700)
    limits = Limits(seconds=settings["timeout"], memory_mb=settings["memory_mb"], user=user)
    gate_limits = Limits(seconds=settings["gate_timeout"], memory_mb=settings["memory_mb"], user=user)
    gates = tuple(g for g in GATES if g.name in settings["gates"] or "all" in settings["gates"])

    folder = find_submission(root / "submission")
    if folder is None:
        from instructor.children import SUBMISSION_FILES

        names = ", ".join(SUBMISSION_FILES)
        results = {"score": 0.0, "output": f"No student file found in the submission: upload {names}.", "tests": []}
        _write(out, results)
        return results
    header.append(f"Graded: {folder.relative_to(root / 'submission').as_posix() or '.'} of your submission.")
    cases = load_cases(source / "tests" / "fixtures" / "graded") + torch.load(source / HIDDEN, weights_only=True)
    result = grade(folder, cases, limits, isolate, settings["seed"])
    result.submission = "your submission"
    seconds = time.perf_counter() - started
    _write(out, _results(result, gates, "the cases are graded; the gates were still running", header, seconds))
    files, refused = _read_submission(folder)
    if gates and not refused:
        _grade_gates(result, files, gates, gate_limits, isolate)
    results = _results(result, gates, "the submission scored 0", header, time.perf_counter() - started)
    _write(out, results)
    return results


def main(argv: list[str] | None = None) -> None:
    from instructor.grading import add_grading_arguments

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
        results = run(args.root)
        print(f"score {results['score']:g}; results.json written to {args.root / 'results' / 'results.json'}")
        return
    parser.add_argument("out", type=Path, help="the zip to write (e.g. autograder.zip)")
    add_grading_arguments(parser)
    parser.add_argument(
        "--no_sandbox", action="store_true", help="never try the sandbox (it is tried, and used where it can be built)"
    )
    args = parser.parse_args(argv)
    if args.out.suffix != ".zip":
        parser.error(f"{args.out}: give a path ending in .zip (Gradescope takes the autograder as a zip)")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    gates = [] if "none" in args.gate else args.gate
    count = build(args.out, seed, gates, args.timeout, args.gate_timeout, args.memory_mb, not args.no_sandbox)
    size = args.out.stat().st_size / 2**20
    print(
        f"wrote {args.out} ({size:.1f} MiB): {count} hidden cases (seed {seed}), gates: {', '.join(gates) or 'none'}; "
        f"upload it as the autograder of a Gradescope programming assignment (INSTRUCTOR.md §4.10)"
    )


if __name__ == "__main__":
    main()
