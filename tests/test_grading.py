"""The instructor's grading command (not graded): full marks for the answer key, zero for the stubs."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from rlhf_practice import PACKAGE_DIR
from rlhf_practice.grading import TASKS, main, task_of

ROOT = PACKAGE_DIR.parent


def test_grading_answer_key_and_stubs(tmp_path: Path, capsys) -> None:
    key, stubs = tmp_path / "key", tmp_path / "stubs"
    key.mkdir()
    shutil.copy(ROOT / "answer/ppo_answer.py", key / "ppo.py")
    shutil.copy(ROOT / "answer/grpo_answer.py", key / "grpo.py")
    shutil.copytree(ROOT / "rlhf_practice/rl", stubs, ignore=shutil.ignore_patterns("__pycache__"))
    table = tmp_path / "grades.csv"
    main([str(key), str(stubs), "--csv", str(table)])
    out = capsys.readouterr().out
    assert out.startswith("| submission | compute_advantages (§1.2) | ppo_clip_loss (§2.2) |")
    with open(table, newline="") as f:
        rows = {Path(r["submission"]).name: r for r in csv.DictReader(f)}
    assert float(rows["key"]["total"]) == 100 and float(rows["stubs"]["total"]) == 0
    assert all(float(rows["key"][task]) == 25 for task in TASKS)
    assert all(int(rows["key"][f"{task}_tests_passed"]) > 0 for task in TASKS)


def test_every_graded_test_belongs_to_one_task() -> None:
    names = [
        line.split("def ")[1].split("(")[0]
        for path in sorted((ROOT / "tests").glob("test_graded_*.py"))
        for line in path.read_text().splitlines()
        if line.startswith("def test_")
    ]
    assert names and {task_of(name) for name in names} == set(TASKS)


def test_not_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "missing")])
    assert exit_.value.code == 2
