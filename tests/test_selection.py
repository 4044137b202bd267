"""What tests/_selection.py skips before collection is only what pytest itself would deselect, and it skips
what a single-function check does not need."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _checks import recorded_cases
from _selection import FUNCTIONS, PROJECT_MARKERS, TESTS, holds, module_may_match, reachable
from properties import laws

from rlhf_practice.course import ROOT
from rlhf_practice.pytest_plugin import MAX_WORKERS, pytest_xdist_auto_num_workers

SELECTIONS = [  # (-m, -k): what students and instructors type, and a few that mix names, words and "not"
    ("graded", ""),
    ("graded", "compute_advantages"),
    ("graded", "dpo_loss"),
    ("graded", "book_example"),
    ("graded", "token_level and not gae"),
    ("graded", "ppo and not clip"),
    ("graded", "gradcheck"),
    ("graded", "not grpo_loss and grpo"),
    ("", "advantages"),
    ("not graded", ""),
    ("not slow and not processes", ""),
    ("not slow and not processes", "compute_gae or masked_mean"),
    ("slow or processes", ""),
    ("graded and not slow", "reply_logps or test_graded"),
]


def test_no_case_or_law_name_holds_a_graded_functions_name() -> None:
    """The rule that lets -k skip another function's cases: a test name holds a function's name only where
    its file and function stand."""
    names = [(c["function"], c["id"]) for c in recorded_cases()] + [(p.function, p.name) for p in laws()]
    bad = [(function, name) for function, name in names for f in FUNCTIONS if f in name.lower()]
    assert not bad, f"rename these cases or laws: {bad}"


def test_project_markers_are_pyprojects() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert {m for m in PROJECT_MARKERS if f'"{m}:' in text} == set(PROJECT_MARKERS)


def test_one_function_loads_its_own_cases_and_only_graded_modules() -> None:
    assert reachable("test_graded", "graded", "compute_advantages") == ["compute_advantages"]
    assert reachable("test_property", "graded", "dpo_loss") == ["dpo_loss"]
    assert reachable("test_graded", "not graded", "") == []
    kept = {p.name for p in TESTS.rglob("test_*.py") if module_may_match(p, "graded")}
    assert kept == {p.name for p in TESTS.rglob("test_*.py") if "mark.graded" in p.read_text(encoding="utf-8")}
    assert {"test_graded.py", "test_properties.py"} <= kept and "test_docs.py" not in kept


@pytest.mark.parametrize(
    ("markexpr", "keyword", "args", "workers"),
    [
        ("not slow and not processes", "", False, True),  # plain pytest
        ("graded", "", False, True),  # pytest -m graded
        ("graded", "compute_advantages", False, False),  # checking one function
        ("not slow and not processes", "", True, False),  # pytest tests/test_docs.py
        ("slow", "", False, False),
        ("processes", "", False, False),
    ],
)
def test_whole_runs_use_the_cpus_and_narrow_ones_this_process(
    monkeypatch: pytest.MonkeyPatch, markexpr: str, keyword: str, args: bool, workers: bool
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    source = pytest.Config.ArgsSource.ARGS if args else pytest.Config.ArgsSource.TESTPATHS
    option = SimpleNamespace(keyword=keyword, markexpr=markexpr, collectonly=False)
    count = pytest_xdist_auto_num_workers(SimpleNamespace(option=option, args_source=source))
    assert (count > 0) is workers and count <= MAX_WORKERS


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_what_is_skipped_is_what_pytest_deselects(impl, tmp_path: Path) -> None:
    """A full collection (every module, every case), then each selection of SELECTIONS as pytest applies it:
    every test it selects lies in a module that is imported and, if graded, in a function that is loaded."""
    out = tmp_path / "collected.jsonl"
    env = {**os.environ, "RLHF_COLLECTED": str(out), "PYTHONPATH": str(TESTS)}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "_collected", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, "-m", "", f"--impl={impl.name}"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    items = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(items) > 1000
    for markexpr, keyword in SELECTIONS:
        for item in items:
            words = [w.lower() for w in item["keywords"]]
            if not (
                holds(markexpr, lambda m, item=item: m in item["markers"])
                and holds(keyword, lambda k, words=words: any(k.lower() in w for w in words))
            ):
                continue
            where = f"-m {markexpr!r} -k {keyword!r} selects {item['name']}"
            assert module_may_match(Path(item["path"]), markexpr), f"{where}, but its module is skipped"
            test, _, rest = item["name"].partition("[")
            if test in ("test_graded", "test_property"):
                function = rest.split("-")[1]
                assert function in reachable(test, markexpr, keyword), f"{where}, but {function} is not loaded"
