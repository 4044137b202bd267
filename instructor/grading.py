"""Grade a class: run each submission in isolation on the graded cases and print one score table.

    python -m instructor.grading submissions/alice submissions/bob ...
    python -m instructor.grading submissions/*/ --csv grades.csv --timeout 60 --memory_mb 3072

Each submission is a folder holding a student's ``ppo.py`` and ``grpo.py`` (and ``token_level.py`` for
tasks 7-9, ``lecture.py`` for task 10, ``dpo.py`` for task 12): a copy of their ``rlhf_practice/rl/``.
For each one, a child process runs in a fresh temporary tree that holds the package and the submission's
files and nothing else (no answer key, no tests), under limits on time, memory and output. Where the
system allows it (``unshare``), the child also cannot see the answer key, the tests, the scripts, the
instructor wing or the git history of this repository, and cannot write to it. The child only
*computes*: it calls the submission's functions on the recorded cases (tests/fixtures) and on fresh
hidden inputs made for this grading run, and writes the results (values and gradients) to a file. This
process, which never imports student code, reads that file as plain tensors and numbers and compares.

A function's points are its share of passed cases times its points in the course table (cases whose
right answer is all zeros, or an error, count only when the function gets a non-zero answer right too).
A submission that crashes, hangs, exits early or does not parse loses the cases it breaks and nothing
else: when its child fails as a whole, each function is rerun on its own. A submission whose ppo.py,
grpo.py, token_level.py, lecture.py or dpo.py is there but is not a regular file (a symbolic link, say
to the answer key, a folder, a named pipe, a device) scores 0, with a note naming the file and what it
is; submitted files are read without following links. The table is printed as Markdown and written as
CSV (``--csv``, default ``grading_results.csv``).

Then the outcome gates (:mod:`instructor.gate`): per algorithm, a child trains the tiny preset with the
submission's own functions (same ``_run_child``: limits, isolation; ``--gate_timeout`` per run) and a
second child that holds no student file judges the saved policy; a gate that reaches its bar adds its
points. The CSV has ``gate/<algorithm>`` (``pass`` or ``fail``), ``gate/<algorithm>/reward`` and
``gate/<algorithm>/steps`` per gate; ``--gate none`` grades the cases only, ``--gate ppo grpo`` some gates.
"""

from __future__ import annotations

import argparse
import ast
import csv
import os
import random
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from instructor.gate import GATE_NAMES, GATES, GateResult, run_gates
from rlhf_practice import PACKAGE_DIR
from rlhf_practice.checks import check_case, load_cases
from rlhf_practice.course import GRADED, MODULES, ROOT, module_of

FUNCTIONS = [g.function for g in GRADED]
POINTS = {g.function: g.points for g in GRADED}
SUBMISSION_FILES = tuple(f"{m}.py" for m in MODULES)
# What a child must not see or change: hidden from it when the system has `unshare`.
HIDDEN_FROM_CHILD = (
    "answer",
    "tests",
    "scripts",
    ".git",
    "instructor",
)
CHILD_CODE = """\
import os, sys
sys.path.insert(0, sys.argv[1])
import importlib, torch
from rlhf_practice.checks import run_case
inputs = torch.load(sys.argv[2], weights_only=True)
results = {}
for case in inputs:
    try:
        module = importlib.import_module("rlhf_practice.rl." + case["module"])
        fn = getattr(module, case["function"])
    except BaseException as err:
        results[case["id"]] = {"error": f"{type(err).__name__}: {err}", "output": None, "requires_grad": False, "grads": {}, "modified": [], "modes": {}}
        continue
    results[case["id"]] = run_case(fn, case)
torch.save(results, sys.argv[3])
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # the results are written: skip the interpreter's teardown (a third of a second with torch loaded)
"""


@dataclass
class Limits:
    seconds: float
    memory_mb: int
    output_mb: int = 64


@dataclass
class Grade:
    """One submission's results: passed / total cases per function, and notes for the instructor."""

    submission: str
    passed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FUNCTIONS, 0))
    total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FUNCTIONS, 0))
    notes: list[str] = field(default_factory=list)
    gates: dict[str, GateResult] = field(default_factory=dict)  # the outcome gates that ran (instructor.gate)

    def points(self, function: str) -> float:
        return (
            round(POINTS[function] * self.passed[function] / self.total[function], 1) if self.total[function] else 0.0
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


def _file_notes(files: dict[str, bytes]) -> list[str]:
    """A note for each submission file that is missing or does not parse."""
    notes = []
    for name in SUBMISSION_FILES:
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


def _make_tree(tree: Path, files: dict[str, bytes]) -> None:
    """A package copy whose rl/ holds the submission's files: the only code the child can import."""
    ignore = shutil.ignore_patterns("__pycache__", "assets")
    shutil.copytree(PACKAGE_DIR, tree / "rlhf_practice", ignore=ignore)
    for name in SUBMISSION_FILES:
        target = tree / "rlhf_practice" / "rl" / name
        target.unlink(missing_ok=True)
        if name in files:
            target.write_bytes(files[name])


def isolation_available() -> bool:
    """True when children can run in their own mount namespace (``unshare -rm``)."""
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


def _command(tree: Path, inputs: Path, results: Path, isolate: bool, code: str = CHILD_CODE) -> list[str]:
    python = [sys.executable, "-I", "-c", code, str(tree), str(inputs), str(results)]
    if not isolate:
        return python
    hide = [ROOT / path for path in HIDDEN_FROM_CHILD if (ROOT / path).exists()]
    mounts = [f"mount --bind '{ROOT}' '{ROOT}'", f"mount -o remount,bind,ro '{ROOT}'"]  # the repository: read-only
    mounts += [f"mount -t tmpfs -o ro none '{p}'" if p.is_dir() else f"mount --bind /dev/null '{p}'" for p in hide]
    script = " && ".join([*mounts, 'exec "$@"'])
    return ["unshare", "-rm", "sh", "-c", script, "sh", *python]


def _run_child(tree: Path, cases: object, limits: Limits, isolate: bool, code: str = CHILD_CODE) -> dict | None:
    """Run the child on ``cases``; its results by case id, or None when it produced none we can read.

    ``code`` is what the child runs: the cases (CHILD_CODE, the default), or a gate's training or judge
    (:mod:`instructor.gate`), whose ``cases`` is then the job it reads, saved as it is."""
    work = tree.parent
    inputs, results = work / "inputs.pt", work / f"results-{random.randrange(10**9)}.pt"
    torch.save(_child_inputs(cases) if code == CHILD_CODE else cases, inputs)

    def limit() -> None:  # in the child, before it starts
        memory = limits.memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        cpu = int(limits.seconds) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        output = limits.output_mb * 2**20
        resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with open(work / "child_output.txt", "wb") as out:
        proc = subprocess.Popen(
            _command(tree, inputs, results, isolate, code),
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            preexec_fn=limit,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=limits.seconds)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None
    try:
        loaded = torch.load(results, weights_only=True)
    except Exception:  # noqa: BLE001 - missing, truncated or forged: no usable results
        return None
    finally:
        results.unlink(missing_ok=True)
    return loaded if isinstance(loaded, dict) else None


RESULT_KEYS = {"error", "output", "requires_grad", "grads", "modified", "modes"}  # what run_case returns


def _valid(result: object) -> bool:
    """A result as run_case writes it, made of plain tensors only (nothing a child could rig)."""
    if not isinstance(result, dict) or set(result) != RESULT_KEYS:
        return False
    if not isinstance(result["grads"], dict) or not isinstance(result["modes"], dict):
        return False
    if not all(type(mode) is bool for mode in result["modes"].values()):
        return False
    output = result["output"]  # a tuple result comes back as a list of tensors
    tensors = [*(output if type(output) is list else [output]), *result["grads"].values()]
    plain = all(t is None or type(t) in (str, float, torch.Tensor) for t in tensors)
    return plain and isinstance(result["modified"], list) and isinstance(result["requires_grad"], bool)


def _nonzero(expected: object) -> bool:
    """Whether a case's right answer (a tensor, a float, a list of tensors, or None: an error) is not all zeros."""
    if expected is None:
        return False
    if isinstance(expected, float):
        return expected != 0
    return any(bool(e.abs().sum() > 0) for e in (expected if type(expected) is list else [expected]))


def grade(
    submission: Path,
    cases: list[dict],
    limits: Limits,
    isolate: bool,
    gates: tuple = (),
    gate_limits: Limits | None = None,
) -> Grade:
    """Run one submission on ``cases`` in a child process and score it; then its outcome ``gates``."""
    result = Grade(submission=str(submission))
    result.gates = {g.name: GateResult() for g in gates}
    for case in cases:
        result.total[case["function"]] += 1
    files, refused = _read_submission(submission)
    if refused:
        result.notes.append(f"scored 0: {'; '.join(refused)}; a submission holds regular files only")
        return result
    result.notes = _file_notes(files)
    with tempfile.TemporaryDirectory(prefix="rlhf-grading-") as work:
        tree = Path(work) / "tree"
        _make_tree(tree, files)
        outcomes = _run_child(tree, cases, limits, isolate) or {}
        missing = [f for f in FUNCTIONS if any(_key(c) not in outcomes for c in cases if c["function"] == f)]
        for function in missing:  # the child failed as a whole: rerun each function alone
            part = [c for c in cases if c["function"] == function]
            rerun = _run_child(tree, part, limits, isolate)
            if rerun is None:
                result.notes.append(f"{function}: crashed, hung or exceeded a limit")
            else:
                outcomes.update(rerun)
    # A case whose right answer is all zeros (or an error) counts only for a function that also gets a
    # non-zero answer right: returning zeros, or raising, is not an implementation.
    passed = [c for c in cases if _valid(outcomes.get(_key(c))) and check_case(c, outcomes[_key(c)]) is None]
    nonzero = {c["function"] for c in passed if _nonzero(c["expected"])}
    for case in passed:
        result.passed[case["function"]] += case["function"] in nonzero
    _grade_gates(result, files, gates, gate_limits or limits, isolate)
    return result


def _grade_gates(result: Grade, files: dict[str, bytes], gates: tuple, limits: Limits, isolate: bool) -> None:
    """Train each gate with the submission's own functions (instructor.gate) and record pass/fail."""
    if not gates:
        return
    start = time.perf_counter()
    result.gates = run_gates(files, gates, limits, isolate)
    result.notes += [g.note for g in result.gates.values() if g.note]
    shown = ", ".join(f"{name} {g.shown} ({g.seconds:.0f} s)" for name, g in result.gates.items())
    print(f"  gates: {shown}; {time.perf_counter() - start:.0f} s with the judge", file=sys.stderr, flush=True)


def _gate_cell(gate: GateResult) -> str:
    return f"{gate.shown} ({gate.reward:g})" if gate.reward is not None else gate.shown


def markdown_table(grades: list[Grade]) -> str:
    sections = {g.function: g.section for g in GRADED}
    ran = _gates_ran(grades)
    header = ["submission", *(f"{f} ({sections[f]})" for f in FUNCTIONS), *(f"gate/{n}" for n in ran), "total", "notes"]
    columns = len(FUNCTIONS) + len(ran) + 1
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---", *["---:"] * columns, "---"]) + "|"]
    for g in grades:
        cells = [f"{g.points(f):g} ({g.passed[f]}/{g.total[f]})" for f in FUNCTIONS]
        cells += [_gate_cell(g.gates[n]) for n in ran]
        lines.append(f"| {g.submission} | " + " | ".join(cells) + f" | {g.total_points():g} | {'; '.join(g.notes)} |")
    points = ", ".join(f"{g.function} {g.points:g}" for g in GRADED)
    total = sum(g.points for g in GRADED) + sum(g.points for g in GATES if g.name in ran)
    note = f"Points: {points}"
    if ran:
        note += ", " + ", ".join(f"gate/{g.name} {g.points:g}" for g in GATES if g.name in ran)
    note += f" (total {total:g}); (passed/total) counts graded cases."
    if ran:
        note += " A gate passes when the judged reward (in brackets) of its run's final policy reaches its bar."
    return "\n".join(lines) + "\n\n" + note + "\n"


def _gates_ran(grades: list[Grade]) -> list[str]:
    """The gates of this grading run, in the order of instructor.gate.GATES."""
    return [n for n in GATE_NAMES if any(n in g.gates for g in grades)]


def write_csv(path: Path, grades: list[Grade]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        ran = _gates_ran(grades)
        gate_columns = [c for n in ran for c in (f"gate/{n}", f"gate/{n}/reward", f"gate/{n}/steps")]
        passed = [f"{f}_cases_passed" for f in FUNCTIONS]
        writer.writerow(["submission", *FUNCTIONS, "total", *passed, *gate_columns, "notes"])
        for g in grades:
            points = [g.points(f) for f in FUNCTIONS]
            gates = [c for n in ran for c in _gate_csv(g.gates[n])]
            writer.writerow(
                [g.submission, *points, g.total_points(), *(g.passed[f] for f in FUNCTIONS), *gates, "; ".join(g.notes)]
            )


def _gate_csv(gate: GateResult) -> list:
    """A gate's three CSV cells: pass/fail, the judged reward (empty if none) and the steps the run made."""
    return [gate.shown, "" if gate.reward is None else gate.reward, gate.steps]


def _chosen_gates(names: list[str]) -> tuple:
    """--gate all / none / NAME...: the gates to train, in the order of instructor.gate.GATES."""
    if "none" in names:
        return ()
    return tuple(g for g in GATES if "all" in names or g.name in names)


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
        help="folders that each hold a copy of rlhf_practice/rl/ (ppo.py, grpo.py, token_level.py, lecture.py, dpo.py)",
    )
    parser.add_argument("--csv", type=Path, default=Path("grading_results.csv"), help="where to write the table")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds one submission's child may run")
    parser.add_argument("--memory_mb", type=int, default=3072, help="address-space limit of a child, in MiB")
    parser.add_argument("--seed", type=int, default=None, help="seed of the hidden inputs (default: a fresh one)")
    parser.add_argument(
        "--gate",
        nargs="+",
        default=["all"],
        choices=["all", "none", *GATE_NAMES],
        help="outcome gates to train (instructor.gate): all (default), none (the cases only), or some of them",
    )
    parser.add_argument("--gate_timeout", type=float, default=180.0, help="seconds one gate's training child may run")
    args = parser.parse_args(argv)
    not_folders = [str(p) for p in args.submissions if not p.is_dir()]
    if not_folders:
        parser.error(f"not a folder: {', '.join(not_folders)} (each submission is a copy of rlhf_practice/rl/)")

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    from instructor.cases import build_cases  # the live key: loaded only once the arguments are right

    hidden = build_cases(seed=seed)  # fresh random inputs
    cases = load_cases() + hidden
    isolate = isolation_available()
    limits = Limits(seconds=args.timeout, memory_mb=args.memory_mb)
    print(
        f"{len(cases)} cases ({len(hidden)} hidden, seed {seed}); "
        f"key hidden from submissions: {'yes' if isolate else 'no (unshare is not available here)'}",
        file=sys.stderr,
    )
    gates = _chosen_gates(args.gate)
    gate_limits = Limits(seconds=args.gate_timeout, memory_mb=args.memory_mb)
    grades = []
    for i, folder in enumerate(args.submissions, 1):
        print(f"[{i}/{len(args.submissions)}] grading {folder} ...", file=sys.stderr, flush=True)
        grades.append(grade(folder, cases, limits, isolate, gates, gate_limits))
    print(markdown_table(grades))
    write_csv(args.csv, grades)
    print(f"table written to {args.csv}", file=sys.stderr)


if __name__ == "__main__":
    main()
