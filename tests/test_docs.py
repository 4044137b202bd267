"""README.md, TASKS.md, docs/GUIDE.md and INSTRUCTOR.md (not graded): every command, file, flag, function and tag they name exists.

Commands come from the fenced code blocks. Scripts and modules are asked for ``--help`` (in-process,
cheap) and every ``--flag`` a command uses must appear there; pytest ``-k`` expressions must select
graded tests. Inline code spans that look like repository paths, functions or logging tags are
checked against the repository.
"""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import re
import runpy
import shlex
import sys
from functools import cache

import pytest
import torch
from _checks import recorded_cases
from _selection import holds
from properties import laws

from rlhf_practice import PACKAGE_DIR
from rlhf_practice.checks import check_case
from rlhf_practice.config import flag_table
from rlhf_practice.course import GRADED, load_impl, module_of

ROOT = PACKAGE_DIR.parent
# The manual (INSTRUCTOR.md) stays with the instructor: the student release runs these tests without it.
DOCS = ["README.md", "TASKS.md", "docs/GUIDE.md", *(["INSTRUCTOR.md"] if (ROOT / "INSTRUCTOR.md").is_file() else [])]
# Paths a reader creates: run folders, submissions, built preference pairs, outputs, their own data files.
PLACEHOLDER = re.compile(
    r"^(runs|submissions|pairs|feedback)/|\.(png|csv|zip)$|^my_reviews|^grades|^\.\./|^/autograder/"
)


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
            module = ROOT / target.replace(".", "/")  # a module file, or a package with __main__.py
            path = (
                ROOT / target
                if target.endswith(".py")
                else module.with_suffix(".py")
                if module.with_suffix(".py").is_file()
                else module
            )
            runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = old_argv
    return out.getvalue() + err.getvalue()


@cache
def _graded_test_names() -> list[str]:
    """The graded tests' names with their ids (what ``-k`` can select), as tests/test_graded.py makes them."""
    return [f"test_graded[{module_of(c['function'])}-{c['function']}-{c['id']}]" for c in recorded_cases()]


def test_docs_have_commands() -> None:
    readme = [c for d, c in ALL_COMMANDS if d == "README.md"]
    assert "pip install -r requirements.txt" in readme
    assert "python train_ppo.py" in readme and any(c.split()[0] == "pytest" and "-m" not in c for c in readme)
    assert any(c.startswith("pytest -m graded -k") for d, c in ALL_COMMANDS if d == "TASKS.md")


# The flags of torchrun and accelerate launch the docs use (docs/GUIDE.md's multi-process section).
LAUNCHER_FLAGS = {
    "--standalone",
    "--nproc_per_node",
    "--nnodes",
    "--node_rank",
    "--master_addr",
    "--master_port",
    "--multi_gpu",
    "--cpu",
    "--num_processes",
    "--num_machines",
    "--machine_rank",
    "--main_process_ip",
    "--main_process_port",
}


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
    if words[:2] == ["accelerate", "config"]:  # accelerate's questionnaire
        return
    if words[0] in ("torchrun", "accelerate"):  # a launcher's flags, then a script's command as with python
        script = next(i for i, word in enumerate(words) if word.endswith(".py"))
        assert {w.split("=")[0] for w in words[:script] if w.startswith("--")} <= LAUNCHER_FLAGS, command
        words = ["python", *words[script:]]
    if words[0] == "pytest":
        flags = [w.split("=")[0] for w in words if w.startswith("-")]
        assert set(flags) <= {"-m", "-k", "--impl", "-q", "-x"}, flags
        if "-m" in words:
            assert words[words.index("-m") + 1] in ("graded", "processes")
        for word in words:
            if word.startswith("--impl"):
                value = word.split("=", 1)[1] if "=" in word else words[words.index(word) + 1]
                if not PLACEHOLDER.search(value):
                    load_impl(value)  # an implementation this copy has: a ConfigError says why not
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
        if target == "instructor" and args and args[0] in ("gradescope", "gate-bars"):  # a command with its own flags
            target, args = f"instructor.{args[0].replace('-bars', '')}", args[1:]
        module = ROOT / target.replace(".", "/")
        assert module.with_suffix(".py").is_file() or (module / "__main__.py").is_file(), f"no module {target}"
    else:
        target, args = words[1], words[2:]
        assert (ROOT / target).is_file(), f"no file {target}"
    help_text = _help(target)
    assert "usage" in help_text.lower(), f"{target} --help printed no usage:\n{help_text[:500]}"
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            flag = arg.split("=")[0]
            assert re.search(rf"{re.escape(flag)}\b", help_text), f"{target} has no flag {flag}"
        elif not any(a.startswith("--") for a in args[:i]):
            # a positional argument, before any flag: a path the reader has or makes, or a subcommand (after a flag,
            # a word is one of its values: --threads 1 2, --rows "RM on 64 pairs" "RM on 1024 pairs, --beta 0")
            subcommand = re.search(rf"\{{.*\b{re.escape(arg)}\b.*\}}", help_text)
            assert (ROOT / arg).exists() or PLACEHOLDER.search(arg) or arg == "runs" or subcommand, (
                f"{arg} does not exist"
            )


# What a run folder holds (written by rlhf_practice/tracking.py and training.py).
RUN_FOLDER_FILES = {
    "metrics.csv",
    "timing.csv",
    "samples.jsonl",
    "config.json",
    "summary.json",
    "policy/",
    "reward_model/",
}


def _inline_spans(doc: str) -> list[str]:
    text = (ROOT / doc).read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"`([^`\n]+)`", text)


@cache
def _logged_tags() -> set[str]:
    sources = [
        ROOT / "train_ppo.py",
        ROOT / "train_grpo.py",
        ROOT / "train_dpo.py",
        ROOT / "train_reward_model.py",
        PACKAGE_DIR / "rl/ppo.py",
        PACKAGE_DIR / "rl/grpo.py",
        ROOT / "rlhf_practice/tracking.py",
        ROOT / "rlhf_practice/training.py",  # reward/gold (--reward_model)
        ROOT / "rlhf_practice/online_labels.py",  # labels/ and online/ (--online.refresh_every, task 16)
    ]
    return {m for path in sources for m in re.findall(r'"([a-z_]+/[a-z_0-9]+)"', path.read_text())}


@cache
def _source_text() -> str:
    files = [
        *ROOT.glob("*.py"),
        *PACKAGE_DIR.rglob("*.py"),
        *(ROOT / "tests").glob("*.py"),
        *(ROOT / "instructor").glob("*.py"),  # the instructor's manual names the grader's (not in the release)
    ]
    return "\n".join(path.read_text(encoding="utf-8") for path in files)


@cache
def _instructor_flags() -> set[str]:
    """The flags the instructor wing's commands declare (INSTRUCTOR.md names them)."""
    sources = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "instructor").glob("*.py"))
    return set(re.findall(r'add_argument\(\s*"(--[a-z_]+)"', sources))


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
                and span not in _help("train_dpo.py")
                and span not in _help("train_reward_model.py")
                and span not in _help("rlhf_practice.lecture")
                and span not in _help("scripts/experiments.py")
                and span not in _instructor_flags()
                and span
                not in (
                    "--impl",
                    "--timeout",
                    "--memory_mb",
                    "--no_sandbox",
                    "--gate_timeout",
                    "--gate",
                    "--jobs",
                    "--threshold",
                    "--run_name",
                    "--similarity",  # instructor.grading and instructor.similarity (INSTRUCTOR.md §4.8)
                    "--similarity_report",
                    "--similarity_threshold",
                    "--measure",
                    *LAUNCHER_FLAGS,
                )
            ):
                problems.append(f"flag {span}")
        elif re.fullmatch(r"[a-z]+_[a-z_]+", span):
            if not re.search(rf"\b{span}\b", _source_text()):
                problems.append(f"name {span}")
    assert not problems, f"{doc} names things that do not exist: {problems}"


def test_readme_flag_table_is_the_generated_one() -> None:
    """README.md's flag table (between <!-- flags: ... --> markers; the release drops them) is flag_table()'s."""
    table = flag_table()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.find(table.splitlines()[0] + "\n")
    assert start >= 0, "README.md has no flag table: python -m rlhf_practice.config --markdown makes it"
    rows = "".join(itertools.takewhile(lambda line: line.startswith("|"), text[start:].splitlines(keepends=True)))
    assert rows == table, (
        "README.md's flag table differs from the config fields: paste the output of "
        "python -m rlhf_practice.config --markdown between its markers"
    )


SORT_REWARD_COLUMN = {"sort_distance_reward": 0, "sort_inclusion_ordering_reward": 1}  # in §10.1's table


def _section(number: str) -> str:
    text = (ROOT / "TASKS.md").read_text(encoding="utf-8")
    start = text.index(f"### {number}")
    return text[start : text.index("\n##", start + 4)]


def _shows(text: str, value: float, spec: str, template: str = "{}") -> bool:
    """Whether ``text`` prints ``value`` as ``format(value, spec)`` does on some CPU (in ``template``). The
    recorded value may be an ulp from the one the book was written from, so a neighbour within 1e-9
    (relative) may round the other way, and a value within 1e-12 of 0 (rounding left by a cancellation)
    prints as 0."""
    near = {value * (1 - 1e-9), value, value * (1 + 1e-9)} | ({0.0} if abs(value) < 1e-12 else set())
    return any(template.format(format(v + 0.0, spec)) in text for v in near)


def _number_lists(text: str) -> list[list[float]]:
    return [[float(x) for x in body.split(",")] for body in re.findall(r"\[(-?[\d.]+(?:,\s*-?[\d.]+)+)\]", text)]


@pytest.mark.parametrize("case", [c for c in recorded_cases() if c["book"]], ids=lambda c: f"{c['function']}/{c['id']}")
def test_book_examples_are_the_tests_examples(case: dict) -> None:
    """The hand-worked examples of TASKS.md (§1.2, §2.1, §3.1 and tasks 7-10) are the numbers the graded tests use."""
    args = dict(case["args"])
    section = _section(case["book"][1:])
    if case["function"] == "ppo_clip_loss":
        ratios = torch.exp(args["new_logprobs"] - args["old_logprobs"])
        rows = re.findall(r"^\|\s*([\d.]+)\s*\|\s*([+−-]?\d+)\s*\|", _section("2.1"), flags=re.M)
        table = [(float(r), float(a.replace("−", "-"))) for r, a in rows]
        assert [a for _, a in table] == args["advantages"].tolist() and len(table) == len(ratios)
        assert all(abs(shown - r) <= 5e-5 + 1e-12 for (shown, _), r in zip(table, ratios.tolist())), (table, ratios)
        assert _shows(_section("2.1"), case["expected"].item(), "g", "损失为 ${}$"), "TASKS.md §2.1 shows another loss"
    elif case["function"] in ("compute_advantages", "compute_group_advantages"):
        rewards = [round(r, 6) for r in args["rewards"].tolist()]
        assert any(numbers == rewards for numbers in _number_lists(section)), (
            f"TASKS.md {case['book']} does not show rewards = {rewards}"
        )
    elif case["function"] in SORT_REWARD_COLUMN:
        # §10.1: "prompt = [...]", then a table row per reply: | [reply] | distance | inclusion + ordering = total |
        prompt, reply = ([int(x) for x in args[name]] for name in ("prompt", "response"))
        assert f"prompt = {prompt}" in section, f"TASKS.md {case['book']} does not show prompt = {prompt}"
        row = r"^\|\s*(\[[\d, ]+\])\s*\|\s*(\d+)\s*\|\s*\d+ \+ \d+ = (\d+)\s*\|"
        rows = {r[0]: r[1:] for r in re.findall(row, section, flags=re.M)}
        assert str(reply) in rows, f"TASKS.md {case['book']} has no row for the reply {reply}"
        shown = float(rows[str(reply)][SORT_REWARD_COLUMN[case["function"]]])
        assert shown == case["expected"], (
            f"TASKS.md {case['book']} gives {reply} {shown:g}, the key {case['expected']:g}"
        )
    else:
        # Tasks 7-10, and any function added later: every number of the expected result is written in the section
        # (4 significant digits).
        expected = case["expected"] if case["outputs"] else [case["expected"]]
        for value in torch.cat([e.flatten() for e in expected]).tolist():
            assert _shows(section, value, ".4g"), f"TASKS.md {case['book']} does not show {value:.4g}"


def test_appendix_message_is_one_a_test_prints() -> None:
    appendix = (ROOT / "TASKS.md").read_text(encoding="utf-8").split("## 附：测试报错怎么读")[1]
    quoted = re.search(r"```text\n(.*?)\n```", appendix, flags=re.S).group(1)
    pattern = re.escape(quoted).replace(re.escape("[...]"), r"\[.*?\]")
    printed = []
    for case in recorded_cases():
        for wrong in case["mistakes"].values():
            result = {"error": None, "output": wrong, "requires_grad": False, "grads": {}, "after": {}}
            printed.append(check_case(case, result))
    assert any(message and re.fullmatch(pattern, message) for message in printed), quoted


def test_every_experiment_the_docs_name_exists() -> None:
    """``python scripts/experiments.py NAME`` in the docs (inline or in a block) names a real experiment."""
    spec = runpy.run_path(str(ROOT / "scripts/experiments.py"), run_name="experiments")
    named = {n for doc in DOCS for n in re.findall(r"scripts/experiments\.py (\w+)", (ROOT / doc).read_text("utf-8"))}
    assert named, "the docs name no experiment"
    known = {*spec["EXPERIMENTS"], *spec["LECTURE"], *spec["REWARD_MODEL"]}
    assert named <= known, sorted(named - known)


def test_every_experiment_column_is_known() -> None:
    """Each training-script experiment asks only for columns that COLUMNS defines (else it stops with a KeyError
    after its runs)."""
    spec = runpy.run_path(str(ROOT / "scripts/experiments.py"), run_name="experiments")
    for name, (_, columns) in spec["EXPERIMENTS"].items():
        assert set(columns) <= set(spec["COLUMNS"]), (name, sorted(set(columns) - set(spec["COLUMNS"])))


@pytest.mark.parametrize("doc", DOCS)
def test_no_control_characters(doc: str) -> None:
    """A TAB or other control character is a typo (``"\\text"`` in a non-raw string is a TAB and "ext")."""
    for number, line in enumerate((ROOT / doc).read_text(encoding="utf-8").split("\n"), 1):
        found = re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", line)
        assert not found, f"{doc}:{number}: control character {found.group()!r} in {line[:60]!r}"


def _k_selects(expression: str) -> set[str]:
    """The graded functions whose tests ``pytest -m graded -k expression`` selects (a name matches where
    it is a part of a test's name, as pytest's -k does)."""
    tests = [(test, case["function"]) for test, case in zip(_graded_test_names(), recorded_cases())]
    tests += [(f"test_property[{p.test_id}]", p.function) for p in laws()]
    return {
        function for test, function in tests if holds(expression, lambda name, test=test: name.lower() in test.lower())
    }


def _k_uses() -> list[tuple[str, str, str]]:
    """(doc, the -k expression, the text of the ``## `` chapter it is in) for every ``-k`` the docs show."""
    uses = []
    for doc in DOCS:
        for chapter in re.split(r"^## ", (ROOT / doc).read_text(encoding="utf-8"), flags=re.M):
            for quoted, bare in re.findall(r"-k (?:\"([^\"]+)\"|([^\s`\"]+))", chapter):
                uses.append((doc, quoted or bare, chapter))
    return uses


@pytest.mark.parametrize(("doc", "expression", "chapter"), _k_uses(), ids=[f"{d}:{e}" for d, e, _ in _k_uses()])
def test_k_selects_what_the_text_says(doc: str, expression: str, chapter: str) -> None:
    """A ``-k`` of function or file names selects their tests and no other function's; a ``-k`` of a
    case's name selects one function's tests, a function the chapter around it names."""
    selected = _k_selects(expression)
    assert selected, f"{doc}: -k {expression!r} selects no graded test"
    names = {g.function for g in GRADED} | {g.module for g in GRADED}
    words = set(re.findall(r"\w+", expression)) - {"and", "or", "not"}
    if words <= names:
        by_name = {g.function for g in GRADED if holds(expression, lambda name, g=g: name in (g.function, g.module))}
        assert selected == by_name, f"{doc}: -k {expression!r} also selects {sorted(selected - by_name)}"
    else:
        assert len(selected) == 1, (
            f"{doc}: -k {expression!r} selects the tests of {sorted(selected)}; name the function too"
        )
        assert f"`{next(iter(selected))}`" in chapter, (
            f"{doc}: -k {expression!r} selects {selected} outside its chapter"
        )
