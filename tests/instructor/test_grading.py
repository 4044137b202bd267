"""The instructor's grading command (not graded): honest submissions get their due, cheats get nothing.

The quick test runs in the suite; the attacks that cost a child its life or its time limit (exits,
hangs, memory and output bombs) are marked ``slow`` and run in CI with ``pytest -m slow``.
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import textwrap
from pathlib import Path

import pytest
from _cheats import lookup_files

from instructor.grading import FUNCTIONS, POINTS, _what_it_is, assignment, main
from instructor.release import student_files
from rlhf_practice.course import GRADED, MODULES, REQUIRED_MODULES, ROOT, answer_path

STUBS = {Path(path).name: source for path, source in student_files().items()}  # the stubs, whatever rl/ holds
KEY = {f"{m}.py": (ROOT / "answer" / f"{m}_answer.py").read_text() for m in MODULES}

# Each cheat replaces ppo.py (grpo.py stays a stub), so an honest score would be 0 as well.
QUICK_CHEATS = {
    "import_the_key": """
        from rlhf_practice.course import load_impl
        _key = load_impl("answer").ppo
        compute_advantages, ppo_clip_loss = _key.compute_advantages, _key.ppo_clip_loss
    """,
    "read_the_key_by_path": f"""
        import importlib.util
        _spec = importlib.util.spec_from_file_location("k", "{ROOT}/answer/ppo_answer.py")
        _key = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_key)
        compute_advantages, ppo_clip_loss = _key.compute_advantages, _key.ppo_clip_loss
    """,
    "read_the_fixtures": f"""
        import torch
        _cases = [c for m in ("ppo", "grpo") for c in torch.load(f"{ROOT}/tests/fixtures/graded/{{m}}.pt", weights_only=True)]
        def _lookup(name, *args, **kwargs):
            for case in _cases:
                if case["function"] == name and all(torch.equal(a, b) for (_, a), b in zip(case["args"], args) if isinstance(b, torch.Tensor)):
                    return case["expected"]
        def compute_advantages(*args, **kwargs):
            return _lookup("compute_advantages", *args)
        def ppo_clip_loss(*args, **kwargs):
            return _lookup("ppo_clip_loss", *args)
    """,
    "monkeypatch_torch_comparisons": """
        import torch
        torch.allclose = lambda *a, **k: True
        torch.equal = lambda *a, **k: True
        torch.Tensor.__eq__ = lambda *a, **k: True
        def compute_advantages(rewards, values, normalize=True, eps=1e-8):
            return torch.zeros_like(rewards)
        def ppo_clip_loss(new_logprobs, old_logprobs, advantages, clip_range):
            return new_logprobs.sum() * 0
    """,
    "rigged_tensor_subclass": """
        import torch
        class Anything(torch.Tensor):
            def __eq__(self, other): return True
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return True
        def compute_advantages(rewards, values, normalize=True, eps=1e-8):
            return torch.zeros_like(rewards).as_subclass(Anything)
        def ppo_clip_loss(new_logprobs, old_logprobs, advantages, clip_range):
            return torch.zeros(()).as_subclass(Anything)
    """,
    "stack_inspection": """
        import inspect, torch
        def _peek():
            for frame in inspect.stack():
                for name in ("expected", "case"):
                    value = frame.frame.f_locals.get(name)
                    if isinstance(value, dict) and value.get("expected") is not None:
                        return value["expected"]
                    if isinstance(value, torch.Tensor):
                        return value
            return torch.zeros(())
        def compute_advantages(*args, **kwargs):
            return _peek()
        def ppo_clip_loss(*args, **kwargs):
            return _peek()
    """,
    "write_into_the_repository": f"""
        import pathlib
        for _target in ("{ROOT}/tests/fixtures/graded/ppo.pt", "{ROOT}/rlhf_practice/checks.py"):
            try:
                pathlib.Path(_target).write_text("")
            except OSError:
                pass
        from rlhf_practice.rl.grpo import compute_group_advantages as compute_advantages, grpo_loss as ppo_clip_loss
    """,
}


# Answers fitted to the published cases: 0 points, and the notes say so.
FITTED_CHEATS = {"lookup_table": lookup_files()["ppo"]}  # a table of the published cases in ppo.py
SLOW_CHEATS = {
    "sys_exit_at_import": "import sys\nsys.exit(0)",
    "os_exit_in_call": """
        import os
        def compute_advantages(*args, **kwargs):
            os._exit(0)
        ppo_clip_loss = compute_advantages
    """,
    "atexit_forged_results": """
        import atexit, sys, torch
        atexit.register(lambda: torch.save({}, sys.argv[3]))
        def compute_advantages(*args, **kwargs):
            raise SystemExit(0)
        ppo_clip_loss = compute_advantages
    """,
    "hang": """
        def compute_advantages(*args, **kwargs):
            while True:
                pass
        ppo_clip_loss = compute_advantages
    """,
    "memory_bomb": """
        def compute_advantages(*args, **kwargs):
            blocks = []
            while True:
                blocks.append(bytearray(2**28))
        ppo_clip_loss = compute_advantages
    """,
    "output_flood": """
        import sys
        def compute_advantages(*args, **kwargs):
            while True:
                sys.stdout.write("x" * 2**20)
        ppo_clip_loss = compute_advantages
    """,
}


def _submission(folder: Path, ppo: str, grpo: str, **more: str) -> Path:
    """A submission folder with ppo.py and grpo.py, and ``more`` ({module: source}: ``token_level=...``,
    ``lecture=...``); without them it is tasks 1-4 only."""
    folder.mkdir(parents=True)
    for module, source in {"ppo": ppo, "grpo": grpo, **more}.items():
        (folder / f"{module}.py").write_text(source)
    return folder


# Submissions with an entry that is not a regular file (made by _not_regular_files): what their note says.
NOT_REGULAR = {
    "linked_to_the_key": f"ppo.py is a symbolic link (to {str(answer_path('ppo'))!r})",
    "named_pipe": "token_level.py is a named pipe",
    "folder": "grpo.py is a folder",
}


def _not_regular_files(tmp_path: Path) -> list[Path]:
    """The submissions of NOT_REGULAR: the key's files linked, a named pipe, a folder where grpo.py goes."""
    linked = tmp_path / "linked_to_the_key"
    linked.mkdir()
    for module in MODULES:
        (linked / f"{module}.py").symlink_to(answer_path(module))
    os.mkfifo(_submission(tmp_path / "named_pipe", KEY["ppo.py"], KEY["grpo.py"]) / "token_level.py")
    folder = _submission(tmp_path / "folder", KEY["ppo.py"], KEY["grpo.py"])
    (folder / "grpo.py").unlink()
    (folder / "grpo.py").mkdir()
    return [linked, tmp_path / "named_pipe", folder]


def _grade(tmp_path: Path, cheats: dict[str, str], *extra: str, capsys) -> dict[str, dict[str, str]]:
    subs = [
        _submission(tmp_path / "key", **{m: KEY[f"{m}.py"] for m in MODULES}),
        _submission(tmp_path / "stubs", **{m: STUBS[f"{m}.py"] for m in MODULES}),
        _submission(tmp_path / "half_done", KEY["ppo.py"], STUBS["grpo.py"]),
    ]
    subs += _not_regular_files(tmp_path)  # refused before any child runs
    subs += [_submission(tmp_path / name, textwrap.dedent(code), STUBS["grpo.py"]) for name, code in cheats.items()]
    planted = tmp_path / "stubs"  # a planted pytest configuration must change nothing
    (planted / "conftest.py").write_text("def pytest_collection_modifyitems(items):\n    items.clear()\n")
    (planted / "pytest.ini").write_text("[pytest]\naddopts = -p no:python\n")
    table = tmp_path / "grades.csv"
    main([*map(str, subs), "--csv", str(table), "--seed", "3", "--gate", "none", *extra])  # gates: test_gate.py
    assert capsys.readouterr().out.startswith("| submission | compute_advantages (§1.2) | ppo_clip_loss (§2.2) |")
    with open(table, newline="") as f:
        return {Path(r["submission"]).name: r for r in csv.DictReader(f)}


def _digest() -> str:
    files = sorted(
        p
        for d in ("answer", "tests", "rlhf_practice")
        for p in (ROOT / d).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    return hashlib.sha1(b"".join(p.read_bytes() for p in files)).hexdigest()


def _assert_scores(rows: dict[str, dict[str, str]], cheats: dict[str, str]) -> None:
    points = {g.function: g.points for g in GRADED}
    assert float(rows["key"]["total"]) == sum(points.values())  # the course table's total, whatever it is
    assert all(float(rows["key"][f]) == points[f] for f in FUNCTIONS)
    for f in FUNCTIONS:  # every hidden case and every published one passes; the seed is the one asked for
        for kind in ("hidden", "published"):
            passed, total = rows["key"][f"{f}/{kind}"].split("/")
            assert passed == total != "0", (f, kind, rows["key"][f"{f}/{kind}"])
    assert {row["seed"] for row in rows.values()} == {"3"}
    assert float(rows["stubs"]["total"]) == 0
    assert all(rows["stubs"][f"{f}/{kind}"].startswith("0/") for f in FUNCTIONS for kind in ("hidden", "published"))
    assert "published cases but only" not in rows["key"]["notes"] + rows["half_done"]["notes"]
    ppo_points = sum(g.points for g in GRADED if g.module == "ppo")  # ppo.py done, grpo.py a stub, no other file
    assert float(rows["half_done"]["total"]) == ppo_points
    modules = [m for m in MODULES if m not in REQUIRED_MODULES]  # token_level, lecture, ..., after_grpo, best_of_n
    assert all(f"{m}.py missing" in rows["half_done"]["notes"] for m in modules)
    scores = {name: float(rows[name]["total"]) for name in cheats}
    assert scores == dict.fromkeys(cheats, 0.0), f"cheats must score 0: {scores}"
    for name, what in NOT_REGULAR.items():  # whatever they hold, and the link leads to the key itself
        note = rows[name]["notes"]
        assert float(rows[name]["total"]) == 0 and note.startswith("scored 0: ") and what in note, (name, note)
        assert note.endswith("; a submission holds regular files only") and "\n" not in note


@pytest.mark.slow  # ~20 s of grader children: .ci/run runs it with the slow grading line, apart from the 2-minute suite
@pytest.mark.timeout(300)
def test_grading_key_stubs_half_done_and_quick_cheats(tmp_path: Path, capsys) -> None:
    before = _digest()
    rows = _grade(tmp_path, QUICK_CHEATS | FITTED_CHEATS, capsys=capsys)
    _assert_scores(rows, QUICK_CHEATS | FITTED_CHEATS)
    for f in ("compute_advantages", "ppo_clip_loss"):
        passed, total = rows["lookup_table"][f"{f}/published"].split("/")
        assert int(passed) >= 0.75 * int(total) and rows["lookup_table"][f"{f}/hidden"].startswith("0/")
        flag = f"{f} passes {passed}/{total} published cases but only 0/"
        assert (
            flag in rows["lookup_table"]["notes"] and "a lookup table?); read ppo.py" in rows["lookup_table"]["notes"]
        )
    if shutil.which("unshare"):
        assert _digest() == before, "a submission changed the repository"


@pytest.mark.slow
@pytest.mark.timeout(600)  # nine graded submissions, each its own process (one hangs for --timeout): ~2 min on 2 cores
def test_grading_survives_exits_hangs_and_bombs(tmp_path: Path, capsys) -> None:
    rows = _grade(tmp_path, SLOW_CHEATS, "--timeout", "8", capsys=capsys)
    _assert_scores(rows, SLOW_CHEATS)
    assert "crashed, hung or exceeded a limit" in rows["hang"]["notes"]


def test_not_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "missing")])
    assert exit_.value.code == 2


def test_no_jobs_is_a_usage_error(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path), "--jobs", "0"])
    assert exit_.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("error: --jobs 0: give 1 or more (submissions graded at once)")
    )


def test_what_a_refused_entry_is_in_words(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to("../answer/ppo_answer.py")
    entries = {"/dev/null": "a device", tmp_path: "a folder", tmp_path / "pipe": "a named pipe"}
    entries[tmp_path / "link"] = "a symbolic link (to '../answer/ppo_answer.py')"
    for path, words in entries.items():
        assert _what_it_is(Path(path), os.lstat(path).st_mode) == words


def test_one_assignment_of_repository_shaped_submissions(tmp_path: Path, capsys) -> None:
    """--tasks 1-2: only those functions are run, scored and written; a repository uploaded whole is graded from
    its rlhf_practice/rl/, and the grader says so; its feedback page is named after the submission."""
    repo = tmp_path / "alice" / "rlhf_practice" / "rl"
    repo.mkdir(parents=True)
    (repo / "ppo.py").write_text(KEY["ppo.py"])
    (repo / "grpo.py").write_text(STUBS["grpo.py"])
    (tmp_path / "alice" / "ppo.py").write_text(STUBS["ppo.py"])  # a stray copy at the top: fewer student files
    (tmp_path / "bob").mkdir()
    table = tmp_path / "grades.csv"
    args = [str(tmp_path / "alice"), str(tmp_path / "bob"), "--csv", str(table), "--seed", "3", "--gate", "none"]
    main([*args, "--tasks", "1-2", "--feedback", str(tmp_path / "feedback")])
    captured = capsys.readouterr()
    assert f"grading {tmp_path / 'alice'} (its student files: {repo})" in captured.err
    with open(table, newline="") as f:
        rows = {Path(r["submission"]).name: r for r in csv.DictReader(f)}
    functions = assignment("1-2", None)
    assert functions == ["compute_advantages", "ppo_clip_loss"]
    assert [c for c in rows["alice"] if c in FUNCTIONS] == functions
    assert float(rows["alice"]["total"]) == sum(POINTS[f] for f in functions)
    assert rows["bob"]["total"] == "0.0" and "no student file anywhere" in rows["bob"]["notes"]
    assert "grpo.py" not in rows["alice"]["notes"]  # not part of this assignment: not missing either
    assert sorted(p.name for p in (tmp_path / "feedback").glob("*.md")) == ["alice.md", "bob.md"]
    with pytest.raises(ValueError, match="--tasks 17: the graded tasks are 1, 2, 3, 7"):
        assignment("17", None)
    with pytest.raises(ValueError, match="--files ppo sort: the student files are ppo, grpo"):
        assignment(None, ["ppo", "sort"])
