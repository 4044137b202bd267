"""The student release (not graded): what it holds and what it leaves out. CI also installs it and runs
its whole suite, with the stubs and with the key's bodies pasted in (see .ci/run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from instructor.release import INSTRUCTOR_ONLY, build_release, release_doc, student_files
from rlhf_practice.course import ROOT


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (ROOT / ".git").exists():
        pytest.skip("the release is built from a git checkout of the instructor's repository")
    out = tmp_path_factory.mktemp("release")
    build_release(out)
    return out


def test_release_leaves_out_the_key_and_the_instructor_tools(release: Path) -> None:
    for path in INSTRUCTOR_ONLY:
        assert not (release / path).exists(), f"{path} must not be in the student release"
    leaks = [p for p in release.rglob("*.py") if "_answer" in p.name or "mutation" in p.name]
    assert not leaks


def test_release_holds_stubs_fixtures_and_everything_a_student_runs(release: Path) -> None:
    for path, source in student_files().items():
        assert (release / path).read_text(encoding="utf-8") == source
        assert "NotImplementedError" in source
    for path in (
        "tests/fixtures/graded/ppo.pt",
        "requirements.txt",
        "pyproject.toml",
        "train_ppo.py",
        "tests/test_docs.py",
    ):
        assert (release / path).is_file(), path
    assert (release / "rlhf_practice/assets/tiny_gpt2/model.safetensors").is_file()


def test_release_documents_name_only_what_the_release_has(release: Path) -> None:
    assert not (release / "INSTRUCTOR.md").exists(), "the instructor's manual must not be in the student release"
    for doc in ("README.md", "TASKS.md", "docs/GUIDE.md"):
        text = (release / doc).read_text(encoding="utf-8")
        assert "<!--" not in text, f"{doc}: an instructor or release marker was left in"
        for gone in (
            "--impl answer",
            "answer/",
            "python -m instructor",
            "instructor/",
            "INSTRUCTOR.md",
        ):
            assert gone not in text, f"{doc} of the release mentions {gone!r}"
        assert "```bash\npytest\n```" in text or doc != "README.md"
        source = (ROOT / doc).read_text(encoding="utf-8")
        assert re.findall(r"(?m)^##+ .*", text) == re.findall(r"(?m)^##+ .*", source), (
            f"{doc}: the release lost a section"
        )
    assert "```bash\npytest --impl answer\n```" in (ROOT / "README.md").read_text(encoding="utf-8"), (
        "the instructor's README gives the key's test command"
    )


# Text that sends a reader to the answer key or the instructor's tools, neither of which the release has.
KEY_POINTERS = re.compile(
    r"""impl[ =]+['"]?answer|RLHF_IMPL=answer|answer/|_answer\.py|['"]answer['"]|instructor/|python -m instructor"""
)
# The only shipped lines allowed to match: each says the key is not shipped, or is the one place the
# package (or a test) names it. (file, text the line contains)
NAMES_THE_KEY = (
    ("rlhf_practice/course/__init__.py", 'ANSWER_DIR = ROOT / "answer"  # the instructor\'s answer key: not part of a'),
    (
        "rlhf_practice/course/__init__.py",
        'return ANSWER_DIR / f"{module}_answer.py"  # a student release has no such file',
    ),
    ("rlhf_practice/course/__init__.py", 'if name == "answer":'),  # the branch that says the key is not shipped:
    ("rlhf_practice/course/__init__.py", "\"impl='answer': the answer key is not part of this student release;"),
    ("tests/test_layers.py", 'in ("instructor", "answer", "scripts", "train_ppo", "train_grpo")'),  # never imported
    ("tests/test_after_grpo.py", 'exact = impl.name == "answer"'),  # the key's bit-for-bit check: never true there
)


def test_release_never_points_at_the_answer_key(release: Path) -> None:
    """Every file the release holds (binary ones read as bytes: the recorded cases carry hints) is free of
    commands and paths that need the key, but for the lines of NAMES_THE_KEY."""
    hits, allowed_seen = [], set()
    for path in sorted(p for p in release.rglob("*") if p.is_file()):
        name = path.relative_to(release).as_posix()
        for number, line in enumerate(path.read_bytes().decode("utf-8", errors="replace").splitlines(), 1):
            if not KEY_POINTERS.search(line):
                continue
            allowed = [entry for entry in NAMES_THE_KEY if entry[0] == name and entry[1] in line]
            allowed_seen.update(allowed)
            if not allowed:
                hits.append(f"{name}:{number}: {line.strip()[:160]}")
    assert not hits, "the student release points at the answer key, which it does not have:\n" + "\n".join(hits)
    assert allowed_seen == set(NAMES_THE_KEY), (
        f"allowed lines no longer in the release: {set(NAMES_THE_KEY) - allowed_seen}"
    )


def test_release_doc_markers() -> None:
    text = (
        "a\n<!-- instructor -->\nsecret\n<!-- /instructor -->\n<!-- release\nshown\n-->\n"
        "<!-- instructor -->x<!-- /instructor -->b\nkept\n<!-- instructor -->\ny\n<!-- /instructor -->\nend\n"
    )
    assert release_doc(text) == "a\nshown\nb\nkept\nend\n"
    for doc in ("README.md", "TASKS.md"):
        source = (ROOT / doc).read_text(encoding="utf-8")
        assert source.count("<!-- instructor -->") == source.count("<!-- /instructor -->")
        assert not re.search(r"<!-- release(?!\n)", source)


def test_release_refuses_a_folder_in_use(tmp_path: Path) -> None:
    (tmp_path / "something").write_text("")
    with pytest.raises(SystemExit, match="not empty"):
        build_release(tmp_path)
