"""README.md and TASKS.md (not graded): every command, file, flag, function and tag they name exists.

Commands come from the fenced code blocks. Scripts and modules are asked for ``--help`` (in-process,
cheap) and every ``--flag`` a command uses must appear there; pytest ``-k`` expressions must select
graded tests. Inline code spans that look like repository paths, functions or logging tags are
checked against the repository.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import runpy
import shlex
import sys
from functools import cache

import pytest

from rlhf_practice import PACKAGE_DIR

ROOT = PACKAGE_DIR.parent
DOCS = ["README.md", "TASKS.md"]
# Paths a reader creates: run folders, submissions, outputs, their own data files.
PLACEHOLDER = re.compile(r"^(runs|submissions)/|\.(png|csv)$|^my_reviews|^grades")


def _blocks(doc: str) -> list[tuple[str, str]]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    return re.findall(r"^\s*```(\w*)\n(.*?)^\s*```", text, flags=re.S | re.M)


def _commands(doc: str) -> list[str]:
    commands = []
    for lang, body in _blocks(doc):
        if lang != "bash":
            continue
        for line in body.splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


ALL_COMMANDS = [(doc, command) for doc in DOCS for command in _commands(doc)]


@cache
def _help(target: str) -> str:
    """``--help`` output of a script (``train_ppo.py``) or module (``-m rlhf_practice.compare``)."""
    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = [target, "--help"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
            if target.endswith(".py"):
                runpy.run_path(str(ROOT / target), run_name="__main__")
            else:
                runpy.run_path(str(ROOT / (target.replace(".", "/") + ".py")), run_name="__main__")
    finally:
        sys.argv = old_argv
    return out.getvalue() + err.getvalue()


@cache
def _graded_test_names() -> list[str]:
    return [
        node.name
        for path in sorted((ROOT / "tests").glob("test_graded_*.py"))
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


def test_docs_have_commands() -> None:
    readme = [c for d, c in ALL_COMMANDS if d == "README.md"]
    assert "pip install -r requirements.txt" in readme
    assert "python train_ppo.py" in readme and "pytest --impl answer" in readme
    assert any(c.startswith("pytest -m graded -k") for d, c in ALL_COMMANDS if d == "TASKS.md")


@pytest.mark.parametrize(("doc", "command"), ALL_COMMANDS, ids=[f"{d}:{c[:60]}" for d, c in ALL_COMMANDS])
def test_command_names_existing_files_and_flags(doc: str, command: str) -> None:
    words = shlex.split(command)
    if words[:2] == ["pip", "install"]:
        for i, word in enumerate(words):
            if word == "-r":
                assert (ROOT / words[i + 1]).is_file()
        return
    if words[0] == "tensorboard":
        assert words[1:] == ["--logdir", "runs"], "runs/ is where the scripts write"
        return
    if words[0] == "source":  # activating a virtual environment
        return
    if words[0] == "pytest":
        flags = [w.split("=")[0] for w in words if w.startswith("-")]
        assert set(flags) <= {"-m", "-k", "--impl", "-q", "-x"}, flags
        if "-m" in words:
            assert words[words.index("-m") + 1] == "graded"
        if "--impl" in words:
            value = words[words.index("--impl") + 1]
            assert value in ("answer", "student") or PLACEHOLDER.search(value), value
        if "-k" in words:
            names = [n for n in re.split(r"[\s()]+", words[words.index("-k") + 1]) if n not in ("", "or", "and", "not")]
            for name in names:
                assert any(name in test for test in _graded_test_names()), f"-k {name} selects no graded test"
        return
    assert words[0] == "python", f"{doc}: unexpected command {command!r}"
    if words[1] == "-m" and words[2] == "venv":
        return
    if words[1] == "-c":
        tree = ast.parse(words[2])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = __import__(node.module, fromlist=["_"])
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
        return
    if words[1] == "-m":
        target, args = words[2], words[3:]
        assert (ROOT / (target.replace(".", "/") + ".py")).is_file(), f"no module {target}"
    else:
        target, args = words[1], words[2:]
        assert (ROOT / target).is_file(), f"no file {target}"
    help_text = _help(target)
    assert "usage" in help_text.lower(), f"{target} --help printed no usage:\n{help_text[:500]}"
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            flag = arg.split("=")[0]
            assert re.search(rf"{re.escape(flag)}\b", help_text), f"{target} has no flag {flag}"
        elif not (i > 0 and args[i - 1].startswith("--")):
            # a positional argument: a path the reader has or makes
            assert (ROOT / arg).exists() or PLACEHOLDER.search(arg) or arg == "runs", f"{arg} does not exist"


# What a run folder holds (written by rlhf_practice/tracking.py and training.py).
RUN_FOLDER_FILES = {"metrics.csv", "timing.csv", "samples.jsonl", "config.json", "summary.json", "policy/"}


def _inline_spans(doc: str) -> list[str]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"`([^`\n]+)`", text)


@cache
def _logged_tags() -> set[str]:
    sources = [
        ROOT / "train_ppo.py",
        ROOT / "train_grpo.py",
        ROOT / "answer/ppo_answer.py",
        ROOT / "answer/grpo_answer.py",
        ROOT / "rlhf_practice/tracking.py",
    ]
    return {m for path in sources for m in re.findall(r'"([a-z_]+/[a-z_0-9]+)"', path.read_text())}


@cache
def _source_text() -> str:
    files = [
        *ROOT.glob("*.py"),
        *PACKAGE_DIR.rglob("*.py"),
        *(ROOT / "answer").glob("*.py"),
        *(ROOT / "tests").glob("*.py"),
    ]
    return "\n".join(path.read_text(encoding="utf-8") for path in files)


@pytest.mark.parametrize("doc", DOCS)
def test_inline_names_exist(doc: str) -> None:
    problems = []
    for span in _inline_spans(doc):
        span = span.strip()
        if re.fullmatch(r"[\w./-]+\.(py|md|txt|toml|json|jsonl|csv|parquet)", span) or span.endswith("/"):
            if "/" in span or span.endswith((".py", ".md")):
                path = span.split("::")[0]
                places = (ROOT, PACKAGE_DIR, PACKAGE_DIR / "rl")
                if not PLACEHOLDER.search(path) and not any((place / path).exists() for place in places):
                    if span not in RUN_FOLDER_FILES:
                        problems.append(f"file {span}")
        elif re.fullmatch(r"[a-z]+/[a-z_0-9]+", span):
            if span not in _logged_tags() and not (ROOT / span).exists() and not (PACKAGE_DIR / span).exists():
                problems.append(f"tag {span}")
        elif re.fullmatch(r"--[a-z_.]+", span):
            if (
                span not in _help("train_ppo.py")
                and span not in _help("train_grpo.py")
                and span
                not in (
                    "--impl",
                    "--timeout",
                    "--run_name",
                )
            ):
                problems.append(f"flag {span}")
        elif re.fullmatch(r"[a-z]+_[a-z_]+", span):
            if not re.search(rf"\b{span}\b", _source_text()):
                problems.append(f"name {span}")
    assert not problems, f"{doc} names things that do not exist: {problems}"
