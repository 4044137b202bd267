"""A new graded function takes five edits, as INSTRUCTOR.md's maintainer recipe says: the answer file, its
row of the course table, its book module (cases and mistakes), its laws module, and its section of TASKS.md.

In a throw-away copy of this repository the test adds ``scale_rewards`` (rewards times a number) to
rlhf_practice/rl/ppo.py with exactly those five edits, regenerates the stubs and the fixtures, and checks
that everything that reads the course picks it up: the stub, its recorded cases (and no other student
file's), the graded tests and laws on the key and on the stub, the scaffold, docs, book and catalog
checks, the grader's table and the student release.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from instructor.release import _tracked_files
from rlhf_practice.course import MODULES, ROOT

FUNCTION = "scale_rewards"

ANSWER = '''

def scale_rewards(rewards: torch.Tensor, scale: float) -> torch.Tensor:
    """Each reward times ``scale``.

    Args:
        rewards: (N,) rewards.
        scale: a number.

    Returns:
        (N,) ``rewards * scale``, a new tensor of the rewards' dtype.
    """
    return rewards * scale
'''

ROW = '    GradedFunction("scale_rewards", "ppo", "§2.5", 5.0, (TWO, 2.0)),\n'
AFTER_ROW = 'GradedFunction("ppo_clip_loss", "ppo", "§2.2", 25.0, (TWO, TWO, TWO, 0.2)),\n'

BOOK = """

# ================ scale_rewards (TASKS.md §2.5) ================================================================


@cases_of("scale_rewards")
def scale_cases(key, g: torch.Generator, fresh: bool) -> list[dict]:
    cases: list[dict] = []
    add = _adder(key, cases, "scale_rewards", fresh)
    rewards = _uniform(g, -1, 1, 6) if fresh else torch.tensor([1.0, -0.5, 0.25, 0.0, 0.75, -1.0])
    for scale in (2.0, -0.5):
        add(f"six_rewards_times_{scale}", f"scale_rewards on {_show(rewards)}, scale={scale}", [("rewards", rewards), ("scale", scale)])
    return cases


@wrong("scale_rewards", "added the scale instead of multiplying by it")
def scale_added(rewards, scale):
    return rewards + scale
"""

LAWS = """

_scaled = st.fixed_dictionaries({"rewards": tensor((4,)), "scale": floats(-2, 2)})


@law("scale_rewards", "one_keeps_the_rewards", "a scale of 1 gives the rewards back", _scaled)
def _(fn, ex):
    out = fn(ex["rewards"], 1.0)
    return None if close(out, ex["rewards"]) else got(out)


@law("scale_rewards", "linear", "scaling twice is scaling by the product", _scaled)
def _(fn, ex):
    out, expected = fn(fn(ex["rewards"], ex["scale"]), 3.0), fn(ex["rewards"], 3.0 * ex["scale"])
    return None if close(out, expected) else f"{got(out)}, expected {fmt(expected)}"


@law("scale_rewards", "gradcheck", "autograd's gradient w.r.t. rewards equals float64 central differences", _scaled)
def _(fn, ex):
    return gradcheck(lambda r: fn(r, ex["scale"]), [ex["rewards"]], "rewards")
"""

SECTION = """### 2.5 练习：`scale_rewards`

把每个奖励乘上同一个数 `scale`，返回新张量，不改输入。

"""
BEFORE_SECTION = "## 3. 任务三"

EDITS = {  # file: (the text to add, where: None appends, else the text it goes after or before)
    "answer/ppo_answer.py": (ANSWER, None),
    "rlhf_practice/course/__init__.py": (ROW, ("after", AFTER_ROW)),
    "instructor/book/ppo.py": (BOOK, None),
    "tests/properties/ppo.py": (LAWS, None),
    "TASKS.md": (SECTION, ("before", BEFORE_SECTION)),
}


def _edit(path: Path, text: str, where: tuple[str, str] | None) -> None:
    source = path.read_text(encoding="utf-8")
    if where is None:
        source += text
    else:
        side, anchor = where
        assert source.count(anchor) == 1, f"{path.name}: {anchor!r} is not there once"
        source = source.replace(anchor, anchor + text if side == "after" else text + anchor)
    path.write_text(source, encoding="utf-8")


def _run(copy: Path, *args: str, expect: int = 0) -> str:
    done = subprocess.run([sys.executable, *args], cwd=copy, capture_output=True, text=True, timeout=400)
    out = done.stdout + done.stderr
    assert done.returncode == expect, f"{' '.join(args)} exited {done.returncode}:\n{out[-3000:]}"
    return out


def _git(copy: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.autocrlf=false", *args]
    return subprocess.run(command, cwd=copy, capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_new_graded_function_takes_five_edits(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    for name in _tracked_files():
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    _run(copy, "-m", "instructor", "stubs")  # the student files as a fresh clone has them, whatever rl/ holds here
    _git(copy, "init", "-q")
    _git(copy, "add", "-A")
    _git(copy, "commit", "-qm", "before")

    for name, (text, where) in EDITS.items():
        _edit(copy / name, text, where)
    _run(copy, "-m", "instructor", "stubs")
    fixtures = _run(copy, "-m", "instructor", "fixtures")
    changed = {line[3:] for line in _git(copy, "status", "--porcelain").splitlines()}
    assert changed == {*EDITS, "rlhf_practice/rl/ppo.py", "tests/fixtures/graded/ppo.pt"}, fixtures

    key = _run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "graded", "-k", FUNCTION, "--impl=answer")
    assert "6 passed" in key, key[-2000:]  # its 2 recorded cases, 3 laws, and the instructor copy's fresh cases
    stub = _run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "graded", "-k", FUNCTION, expect=1)
    assert f"{FUNCTION} is not implemented yet (it raises NotImplementedError). See TASKS.md §2.5." in stub
    checks = ["tests/instructor/test_scaffold.py", "tests/test_docs.py", "tests/instructor/test_book.py"]
    checks += ["tests/instructor/test_properties_catalog.py"]
    _run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--impl=answer", *checks, "-k", "not ulps")
    # the catalog: the new function's variants and the checks of every name (the others' verdicts are the suite's)
    mutations = ["tests/instructor/test_mutations.py", "-k", f"{FUNCTION} or not test_variant_gets_its_verdict"]
    _run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--impl=answer", *mutations)

    submission = tmp_path / "key"
    submission.mkdir()
    for module in MODULES:
        shutil.copy(copy / "answer" / f"{module}_answer.py", submission / f"{module}.py")
    grades = tmp_path / "grades.csv"
    _run(copy, "-m", "instructor.grading", str(submission), "--gate", "none", "--csv", str(grades))
    with grades.open(encoding="utf-8") as f:
        (row,) = list(csv.DictReader(f))
    assert float(row[FUNCTION]) == 5.0, row

    release = tmp_path / "release"
    _run(copy, "-m", "instructor", "release", str(release))
    assert f"def {FUNCTION}(" in (release / "rlhf_practice/rl/ppo.py").read_text(encoding="utf-8")
    recorded = torch.load(release / "tests/fixtures/graded/ppo.pt", weights_only=True)
    assert sum(case["function"] == FUNCTION for case in recorded) == 2
