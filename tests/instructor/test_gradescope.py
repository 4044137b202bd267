"""The Gradescope autograder (instructor.gradescope), run for real in a simulated Gradescope root.

One zip (``python -m instructor gradescope``, one gate: ppo) is unzipped into a temporary root laid out as
``/autograder`` (``source/``, ``submission/``, ``results/``); ``setup.sh`` runs against this interpreter's
environment (``RLHF_VENV``; pip finds every pin installed, offline), then ``run_autograder`` grades six
submissions, each in its own root: the key, the stubs, a half-done one uploaded as a repository, a file
that does not parse, one that hangs, and one with only ppo.py. Each results.json must be valid against
Gradescope's documented schema, hold no hidden expected value, and give the key the grader's own total for
the same seed. A second zip, tasks 1-4 with results after the due date, grades the key and the audit's
attack (issue 58), and the next audit's three attacks (issue 69) and a submission that runs out of time. Both ``slow`` (about five minutes on 2 cores, one submission after the other: each run ends
every process of the children's user); the quick checks of the zip's contents run in the suite.
"""

from __future__ import annotations

import ast
import json
import os
import pwd
import re
import subprocess
import sys
import tempfile
import zipfile
from functools import cache
from pathlib import Path

import jsonschema
import pytest
import torch
from _cheats import trust_files

from instructor.children import CASES, GATE, JUDGE, SUBMISSION_FILES, Limits, make_tree, processes_of, run_child
from instructor.gradescope import GRADER_MODULES, HIDDEN, build
from instructor.grading import FUNCTIONS, POINTS, assignment, find_student_files
from instructor.grading import main as grading
from instructor.release import student_files
from rlhf_practice.checks import _fmt
from rlhf_practice.course import MODULES, ROOT

SEED = 5
STUBS = {Path(path).name: source for path, source in student_files().items()}
KEY = {f"{m}.py": (ROOT / "answer" / f"{m}_answer.py").read_text() for m in MODULES}
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
# Gradescope's results.json ("Autograder Specifications": top-level score or per-test scores, the optional
# fields and their values), as JSON Schema.
SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number"},
        "output": {"type": "string"},
        "output_format": FORMAT,
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "score": {"type": "number"},
                    "max_score": {"type": "number"},
                    "status": {"enum": ["passed", "failed"]},
                    "name": {"type": "string"},
                    "number": {"type": "string"},
                    "output": {"type": "string"},
                    "output_format": FORMAT,
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "visibility": VISIBILITY,
                    "extra_data": {"type": "object"},
                },
                "additionalProperties": False,
            },
        },
    },
    "anyOf": [{"required": ["score"]}, {"required": ["tests"]}],
    "additionalProperties": False,
}
HANG = KEY["ppo.py"].replace(
    "def compute_advantages(",
    "def compute_advantages(*args, **kwargs):\n    while True:\n        pass\n\n\ndef _was(",
    1,
)
SUBMISSIONS = {
    "key": KEY,
    "stubs": STUBS,
    "half_done": {**STUBS, "ppo.py": KEY["ppo.py"], "grpo.py": KEY["grpo.py"]},  # uploaded as a repository
    "syntax_error": {**KEY, "grpo.py": KEY["grpo.py"] + "\ndef broken(:\n"},
    "hangs": {**KEY, "ppo.py": HANG},
    "only_ppo": {"ppo.py": KEY["ppo.py"]},
}


@cache
def zip_path(folder: Path, tasks: str | None = None) -> Path:
    """The zip of every task with its results visible at once, or of ``tasks`` shown after the due date."""
    out = folder / f"autograder{tasks or ''}.zip"
    visibility = "visible" if tasks is None else "after_due_date"
    functions = assignment(tasks, None)
    build(out, SEED, ["ppo"], timeout=8, gate_timeout=60, memory_mb=3072, sandbox=False, functions=functions,
          visibility=visibility)  # fmt: skip
    return out


def test_the_zip_holds_the_grader_and_no_key(tmp_path: Path) -> None:
    with zipfile.ZipFile(zip_path(tmp_path)) as zf:
        names = set(zf.namelist())
        modes = {info.filename: info.external_attr >> 16 for info in zf.infolist()}
        requirements = zf.read("requirements.txt").decode()
        settings = json.loads(zf.read("settings.json"))
    assert {"setup.sh", "run_autograder", HIDDEN, "settings.json"} <= names
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert {n.removeprefix("instructor/") for n in names if n.startswith("instructor/")} == set(GRADER_MODULES)
    assert not any(n.startswith(("answer/", "instructor/book", "tests/instructor")) for n in names)
    assert all(f"tests/fixtures/graded/{m}.pt" in names for m in MODULES)
    pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.strip() != "-e ."]
    assert requirements.splitlines() == pins  # setup.sh installs what requirements.txt pins
    assert settings == {
        "seed": SEED,
        "gates": ["ppo"],
        "timeout": 8,
        "gate_timeout": 60,
        "memory_mb": 3072,
        "sandbox": False,
        "functions": FUNCTIONS,
        "visibility": "visible",
        "budget": 1500,
    }
    with zipfile.ZipFile(zip_path(tmp_path)) as zf:  # the student files are the stubs, whatever rl/ holds here
        assert zf.read("rlhf_practice/rl/ppo.py").decode() == STUBS["ppo.py"]
        # every instructor module a shipped one imports when it is imported is shipped too: the catalog
        # (instructor.mistakes, which loads the key) must not be needed to grade
        shipped = {n.removeprefix("instructor/").removesuffix(".py") for n in names if n.startswith("instructor/")}
        for name in (n for n in names if n.startswith("instructor/") and n.endswith(".py")):
            for node in ast.parse(zf.read(name)).body:
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                modules += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for module in (m for m in modules if m.startswith("instructor.")):
                    assert module.split(".")[1] in shipped, f"{name} imports {module}, which the zip does not hold"


def test_the_submission_is_found_where_students_put_it(tmp_path: Path) -> None:
    (tmp_path / "a" / "rlhf_practice" / "rl").mkdir(parents=True)
    for name in ("ppo.py", "grpo.py"):
        (tmp_path / "a" / "rlhf_practice" / "rl" / name).write_text("")
    (tmp_path / "a" / "ppo.py").write_text("")  # a stray copy at the top: fewer student files
    assert find_student_files(tmp_path / "a") == tmp_path / "a" / "rlhf_practice" / "rl"
    # a whole repository: the course's property laws in tests/properties/ have the student files' names, all of them
    (tmp_path / "a" / "tests" / "properties").mkdir(parents=True)
    for name in SUBMISSION_FILES:
        (tmp_path / "a" / "tests" / "properties" / name).write_text("")
    assert find_student_files(tmp_path / "a") == tmp_path / "a" / "rlhf_practice" / "rl"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("")
    assert find_student_files(tmp_path / "b") is None


def _root(base: Path, name: str, files: dict[str, str] | None = None, tasks: str | None = None) -> Path:
    """A simulated /autograder: source/ (the zip), submission/ (the student's files), results/."""
    root = base / name
    with zipfile.ZipFile(zip_path(base, tasks)) as zf:
        zf.extractall(root / "source")
    for here, _, entries in os.walk(root / "source"):  # the strictest an unzip could leave them: root's alone
        os.chmod(here, 0o700)
        for entry in entries:
            os.chmod(os.path.join(here, entry), 0o600)
    for script in ("setup.sh", "run_autograder"):
        (root / "source" / script).chmod(0o755)  # zipfile does not restore modes; Gradescope's unzip does
    folder = root / "submission" / ("rlhf_practice/rl" if name == "half_done" else "")
    folder.mkdir(parents=True)
    for file, source in (files or SUBMISSIONS[name]).items():
        (folder / file).write_text(source)
    (root / "results").mkdir()
    return root


def _setup(root: Path) -> None:
    if why := interpreter_refused(pwd.getpwnam("nobody")):
        pytest.skip(f"the children's user (nobody) cannot run this interpreter ({why}); {NOBODY_FIX}")
    setup = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")],
        env={**_env(root), "PIP_NO_INDEX": "1"},
        capture_output=True,
        text=True,
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert "children run as nobody" in setup.stdout


def _run(root: Path) -> dict:
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=_env(root), capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    (root / "stdout.txt").write_bytes(done.stdout)  # what Gradescope shows the instructor only
    return json.loads((root / "results" / "results.json").read_text())


def _by_name(result: dict) -> dict[str, dict]:
    """{function: its hidden cases' test, "function/self-check": its published cases' test, "gate/x": ...}."""
    return {t["name"].split(" ")[0] + ("/self-check" if "self-check" in t["name"] else ""): t for t in result["tests"]}


def _leaks(result: dict, secrets: set[str]) -> list[str]:
    texts = [result["output"], *(t["output"] for t in result["tests"])]
    numbers = {n for text in texts for n in re.findall(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text)}
    return [v for v in secrets if v in numbers or (v.startswith("[") and any(v in t for t in texts))]


def _env(root: Path) -> dict:
    return {**os.environ, "AUTOGRADER_ROOT": str(root), "RLHF_VENV": sys.prefix, "RLHF_GRADER_USER": "nobody"}


def _hidden_values(root: Path) -> set[str]:
    """The hidden expected values as the checks would print them, less those the published cases print too."""

    def shown(cases: list[dict]) -> set[str]:
        out = set()
        for case in cases:
            parts = [case["expected"], *(g["expected"] for g in case["grads"].values())]
            for part in (p for value in parts for p in (value if isinstance(value, list) else [value])):
                if part is not None:
                    out.update(f"{v:.4g}" for v in torch.as_tensor(part).double().flatten()[:8].tolist())
                    out.add(_fmt(torch.as_tensor(part)))
        return out

    hidden = torch.load(root / "source" / HIDDEN, weights_only=True)
    published = [c for m in MODULES for c in torch.load(ROOT / f"tests/fixtures/graded/{m}.pt", weights_only=True)]
    return {v for v in shown(hidden) - shown(published) if len(re.sub(r"[^0-9]", "", v)) >= 3}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_six_submissions_in_a_simulated_gradescope(tmp_path: Path) -> None:
    roots = {name: _root(tmp_path, name) for name in SUBMISSIONS}
    _setup(roots["key"])
    # one after the other: each run ends every process of the children's user (as Gradescope's one container per
    # submission allows), so two at once on one machine would end each other's children
    results = {name: _run(root) for name, root in roots.items()}
    secrets = _hidden_values(roots["key"])
    for name, result in results.items():
        jsonschema.validate(result, SCHEMA)
        assert not _leaks(result, secrets), (
            f"{name}: hidden expected values in the output: {_leaks(result, secrets)[:5]}"
        )
        assert result["score"] == pytest.approx(sum(t["score"] for t in result["tests"]), abs=0.05)
        assert [t["name"].split(" ")[0] for t in result["tests"]] == [*(f for f in FUNCTIONS for _ in "12"), "gate/ppo"]
        assert "Sandbox: no (the zip was built with --no_sandbox)" in result["output"]
        assert f"seed {SEED}" not in result["output"] and f"seed {SEED}" in (roots[name] / "stdout.txt").read_text()
        assert not processes_of(pwd.getpwnam("nobody").pw_uid), f"{name}: a process of the children's user is left"
    tests = {name: _by_name(r) for name, r in results.items()}

    # the key: every point, and the grader's own total for the same seed
    assert results["key"]["score"] == sum(POINTS.values()) + 10
    grading([str(tmp_path / "key" / "submission"), "--seed", str(SEED), "--gate", "ppo", "--timeout", "8",
             "--csv", str(tmp_path / "key.csv"), "--no_sandbox"])  # fmt: skip
    total = (tmp_path / "key.csv").read_text().splitlines()[1].split(",")[len(FUNCTIONS) + 1]
    assert float(total) == results["key"]["score"]
    # the stubs: nothing, and each function told where to start
    assert results["stubs"]["score"] == 0
    assert "is not implemented yet" in tests["stubs"]["compute_advantages"]["output"]
    assert "gate/ppo: fail" in tests["stubs"]["gate/ppo"]["output"]
    # half done, uploaded as a repository: tasks 1-4 and the gate
    assert results["half_done"]["score"] == 100 + 10
    assert "Graded: rlhf_practice/rl of your submission." in results["half_done"]["output"]
    # a file that does not parse costs its own functions only
    assert results["syntax_error"]["score"] == sum(POINTS.values()) - 50 + 10
    assert "grpo.py does not parse" in results["syntax_error"]["output"]
    assert "raised SyntaxError" in tests["syntax_error"]["grpo_loss"]["output"]
    # a hang: compute_advantages and the gate that calls it (not trained: it would hang there too), nothing else;
    # three children run out of CPU time (the whole file, ppo.py, the function), each at most the wall backstop
    assert tests["hangs"]["compute_advantages"]["score"] == 0 and tests["hangs"]["gate/ppo"]["score"] == 0
    assert "not trained: compute_advantages gave no result" in tests["hangs"]["gate/ppo"]["output"]
    assert results["hangs"]["score"] == sum(POINTS.values()) - 25
    assert "compute_advantages: crashed, hung or exceeded a limit" in results["hangs"]["output"]
    assert results["hangs"]["execution_time"] <= 3 * (3 * 8 + 30) + 60
    assert (
        "compute_advantages gave no result: its process crashed, hung" in tests["hangs"]["compute_advantages"]["output"]
    )
    # only ppo.py
    assert results["only_ppo"]["score"] == 50 + 10
    assert "grpo.py missing" in results["only_ppo"]["output"]


# The audit's attack (issue 58): the catalogued sign error in ppo_clip_loss (gate/ppo fails on its own), plus an
# import-time payload that leaves a detached process behind. The process overwrites the judge's program with
# one that reports 0.99 for every gate wherever it finds one it may write, tries to read the hidden cases and to
# write results.json; the submission's own code prints what it read into its exceptions.
PAYLOAD = '''

import glob as _glob
import os as _os
import time as _time

_FORGED = """import sys, torch
jobs = torch.load(sys.argv[2], weights_only=True)
torch.save({job["name"]: 0.99 for job in jobs}, sys.argv[3])
"""
_ROOT = ROOT_HERE
try:
    _SECRET = open(_ROOT + "/source/hidden_cases.pt", "rb").read(4000).hex()
except OSError:
    _SECRET = None


def _linger():
    if _os.fork():
        return
    _os.setsid()
    if _os.fork():
        _os._exit(0)
    end = _time.time() + 900
    while _time.time() < end:
        for path in _glob.glob("/tmp/rlhf-*/**/judge_child.py", recursive=True):
            try:
                with open(path, "w") as f:
                    f.write(_FORGED)
            except OSError:
                pass
        try:
            with open(_ROOT + "/results/results.json", "w") as f:
                f.write('{"score": 1000}')
        except OSError:
            pass
        _time.sleep(0.05)
    _os._exit(0)


_linger()
_right_ppo_clip_loss = ppo_clip_loss


def ppo_clip_loss(*args, **kwargs):
    if _SECRET:
        raise ValueError("in place " + _SECRET)
    return -_right_ppo_clip_loss(*args, **kwargs)
'''


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_assignment_after_its_due_date_that_no_submission_can_subvert(tmp_path: Path) -> None:
    """A tasks 1-4 zip, results after the due date: the key gets the assignment's full marks and a tasks-1-4
    student no test of a later task; the attack's gate stays failed, nothing of it outlives the run, and no
    hidden value reaches any output."""
    key14 = {"ppo.py": KEY["ppo.py"], "grpo.py": KEY["grpo.py"]}
    roots = {"key14": _root(tmp_path, "key14", key14, "1-4")}
    attack = KEY["ppo.py"] + PAYLOAD.replace("ROOT_HERE", repr(str(tmp_path / "attack")))
    roots["attack"] = _root(tmp_path, "attack", {**key14, "ppo.py": attack}, "1-4")
    _setup(roots["key14"])
    results = {name: _run(root) for name, root in roots.items()}
    secrets = _hidden_values(roots["key14"])
    functions = assignment("1-4", None)
    assert set(functions) == {f for f in FUNCTIONS if f"{f}" in KEY["ppo.py"] + KEY["grpo.py"]}
    for name, result in results.items():
        jsonschema.validate(result, SCHEMA)
        assert not _leaks(result, secrets), (
            f"{name}: hidden expected values in the output: {_leaks(result, secrets)[:5]}"
        )
        assert [t["name"].split(" ")[0] for t in result["tests"]] == [*(f for f in functions for _ in "12"), "gate/ppo"]
        assert {t["visibility"] for t in result["tests"] if t["max_score"] > 0} == {"after_due_date"}
        assert {t["visibility"] for t in result["tests"] if t["max_score"] == 0} == {"visible"}
        assert "score" not in result and "hidden passed" not in result["output"]
        assert "shown after the due date" in result["output"] and "missing" not in result["output"]
    # the key: the assignment's full marks, every test green
    assert sum(t["score"] for t in results["key14"]["tests"]) == sum(POINTS[f] for f in functions) + 10
    assert all(t["status"] == "passed" for t in results["key14"]["tests"])
    # the attack: its sign error fails the gate, its process died with its stage, it read nothing hidden
    gate = _by_name(results["attack"])["gate/ppo"]
    assert gate["status"] == "failed" and gate["score"] == 0, gate["output"]
    assert "measured 0.99" not in gate["output"]
    assert not processes_of(pwd.getpwnam("nobody").pw_uid)
    assert "max instead of min" in _by_name(results["attack"])["ppo_clip_loss"]["output"]  # its mistake, named
    assert "in place" not in json.dumps(results["attack"])


SLEEPS = (
    KEY["ppo.py"]
    + """

import time as _time


def compute_advantages(*args, **kwargs):
    _time.sleep(3600)
"""
)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_what_a_submission_hands_back_earns_it_nothing_and_time_is_told_as_time(tmp_path: Path) -> None:
    """Issue 69 on Gradescope's path (a tasks 1-4 zip without the sandbox, children as nobody): the three attacks of
    _cheats.trust_files earn nothing: the forged gate fails (the training child imports no student code: the patched
    save_pretrained never runs there), the hidden in-place write loses its case (the grader compares the inputs as they
    came back), the stack walk's forged results are dropped (a child's results count for the cases it was sent only),
    so no hidden input reaches the self-check. A compute_advantages that sleeps, under a budget of 40 s: every function
    and the gate are told that the submission's time ran out, none that it crashed or hung."""
    roots = {"attack": _root(tmp_path, "attack", trust_files(KEY), "1-4")}
    roots["sleeps"] = _root(tmp_path, "sleeps", {"ppo.py": SLEEPS, "grpo.py": KEY["grpo.py"]}, "1-4")
    settings = roots["sleeps"] / "source" / "settings.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "budget": 40}))
    _setup(roots["attack"])
    results = {name: _run(root) for name, root in roots.items()}
    for result in results.values():
        jsonschema.validate(result, SCHEMA)
    tests = _by_name(results["attack"])
    assert "FORGED" not in json.dumps(results["attack"])
    assert tests["grpo_loss/self-check"]["status"] == "passed" and tests["grpo_loss"]["score"] == POINTS["grpo_loss"]
    gate = tests["gate/ppo"]
    assert gate["score"] == 0 and float(re.search(r"measured (-?[\d.]+)", gate["output"]).group(1)) < 0.3, gate
    advantages = tests["compute_advantages"]
    assert 0 < advantages["score"] < POINTS["compute_advantages"] and "in place" in advantages["output"], advantages
    assert "changed its input `values` in place" in tests["compute_advantages/self-check"]["output"]
    told = "not run: the submission's time ran out (it had 40 s)"
    for name, test in _by_name(results["sleeps"]).items():
        assert test["score"] == 0 and (name.endswith("/self-check") or told in test["output"]), test
    assert "crashed" not in json.dumps(results["sleeps"]) and "hung" not in json.dumps(results["sleeps"])
    assert not processes_of(pwd.getpwnam("nobody").pw_uid)


# A child that tries what a submission could on Gradescope's path (issue 58's review): write where the grader
# writes, leave its results as a link to a file only root may read, leave a detached process and a process whose
# first thread exited while another runs (it shows as a zombie).
EVIL_CHILD = """
import ctypes, os, sys, threading, time
tree, inputs, results = sys.argv[1:]
work = os.path.dirname(tree)
print("STARTED as", os.getuid(), flush=True)
for name in ("child_output.txt", "inputs.pt", "planted.txt"):
    try:
        open(os.path.join(work, name), "a").write("x")
        print("WROTE", name, flush=True)
    except OSError:
        pass
os.symlink("/etc/shadow", results)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
if os.fork() == 0:
    threading.Thread(target=time.sleep, args=(600,)).start()
    ctypes.CDLL(None).pthread_exit(None)
time.sleep(0.5)  # until that first thread has exited: the process is a zombie with a live thread
"""


NOBODY_FIX = "make the virtual environment from a Python that user can reach (e.g. /usr/bin/python3 -m venv .venv)"


def interpreter_refused(user: pwd.struct_passwd) -> str | None:
    """Why ``user`` cannot run this interpreter (a venv whose python lies under a folder only root may enter, as
    pyenv's or conda's under /root in many Docker images), or None when it can."""
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "pass"],
            user=user.pw_uid,
            group=user.pw_gid,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError as err:
        return f"{err.strerror}: {sys.executable}"
    return (
        None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["exit " + str(probe.returncode)])[-1]
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the children run as another user")
def test_a_child_as_another_user_cannot_write_where_the_grader_does_or_outlive_its_stage(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    if why := interpreter_refused(nobody):
        pytest.skip(f"the children's user (nobody) cannot run this interpreter ({why}); {NOBODY_FIX}")
    with tempfile.TemporaryDirectory(prefix="rlhf-test-") as work:  # in /tmp, as the grader's: the user can enter
        os.chmod(work, 0o755)
        tree = Path(work) / "tree"
        make_tree(tree, {}, (CASES,))
        assert not (tree / JUDGE).exists() and not (tree / GATE).exists()  # the judge's key stays out of it
        (tree / CASES).write_text(EVIL_CHILD)
        limits = Limits(seconds=20, memory_mb=3072, user=(nobody.pw_uid, nobody.pw_gid))
        assert run_child(tree, CASES, [], limits, isolate=False) is None  # its results: a link, not read
        output = tree.parent / "child_output.txt"
        said = output.read_text()
        assert f"STARTED as {nobody.pw_uid}" in said, said
        assert "WROTE" not in said and not output.is_symlink() and output.stat().st_uid == 0
        assert not (tree.parent / "planted.txt").exists()
    threads = subprocess.run(["ps", "-eLo", "uid=,stat="], capture_output=True, text=True).stdout.split("\n")
    live = [t for t in threads if t.split() and int(t.split()[0]) == nobody.pw_uid and not t.split()[1].startswith("Z")]
    assert not live, f"threads of the children's user still run: {live}"  # ps, not the grader's own /proc reading
