"""The instructor's similarity check (not graded): copies of a file are flagged, however disguised;
classmates who wrote the same functions each their own way are not."""

from __future__ import annotations

import csv
from pathlib import Path

from instructor.grading import main
from instructor.mistakes import CATALOG
from instructor.release import student_files
from instructor.similarity import MIN_SHARED, THRESHOLD, _with_variants, compare, disguised, similar_pairs
from rlhf_practice.course import MODULES, answer_path

STUBS = {Path(path).name: source.encode() for path, source in student_files().items()}
KEY = {f"{m}.py": answer_path(m).read_bytes() for m in MODULES}
HALF = {**STUBS, "ppo.py": KEY["ppo.py"], "grpo.py": KEY["grpo.py"]}  # the key's ppo.py and grpo.py, stubs else


def _disguise(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files that differ from the stubs with their locals renamed and their functions reordered."""
    return {
        name: source if source == STUBS[name] else disguised(source.decode()).encode() for name, source in files.items()
    }


def _write(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir()
    for name, source in files.items():
        (folder / name).write_bytes(source)
    return folder


def test_disguised_copies_of_the_key_are_flagged(tmp_path: Path) -> None:
    renamed = _disguise(KEY)
    assert (
        "def ppo_clip_loss(v0: torch.Tensor, v1: torch.Tensor" in renamed["ppo.py"].decode()
    )  # the parameters renamed
    padded = {n: disguised(s.decode(), padded=True).encode() for n, s in KEY.items()}  # useless lines added
    assert "_ = None" in padded["grpo.py"].decode()
    submissions = {"key": KEY, "renamed": renamed, "half": _disguise(HALF), "padded": padded}
    pairs = similar_pairs(submissions, report=tmp_path / "r.html")
    scores = {(p.a, p.b): p for p in pairs}
    assert set(scores) == {(a, b) for i, a in enumerate(submissions) for b in list(submissions)[i + 1 :]}
    assert scores["key", "renamed"].score > 0.95 and scores["key", "renamed"].files["ppo.py"][0] > 0.95
    assert scores["key", "padded"].score > 0.9
    assert all(p.score >= THRESHOLD and p.shared >= MIN_SHARED for p in pairs)
    html = (tmp_path / "r.html").read_text()
    assert "renamed/ppo.py" in html and "rlhf-similarity-" not in html  # labels, not the temporary folders


def test_right_variants_written_differently_are_not_flagged() -> None:
    right = [v for v in CATALOG if v.verdict == "right"]
    clip = [v for v in right if v.function == "ppo_clip_loss"]
    assert len(clip) == 5
    alone = {v.name: _with_variants([v]) for v in clip}  # the same function, five ways, each alone
    assert similar_pairs(alone) == []
    by_function: dict[str, list] = {}
    for v in right:
        by_function.setdefault(v.function, []).append(v)
    classmates = {f"#{i}": _with_variants([vs[i] for vs in by_function.values() if len(vs) > i]) for i in range(3)}
    pairs = compare(classmates)
    assert pairs and max(p.score for p in pairs) < THRESHOLD and similar_pairs(classmates) == []


def test_stubs_share_nothing() -> None:
    assert compare({"a": STUBS, "b": dict(STUBS), "c": {}}) == []


def test_missing_files_syntax_errors_and_bytes_that_are_not_utf8() -> None:
    broken = {"ppo.py": KEY["ppo.py"] + b"\ndef oops(:\n", "grpo.py": b"\xff\xfe not utf-8 \x80"}
    (pair,) = compare({"key": KEY, "broken": broken, "empty": {}})
    assert (pair.a, pair.b) == ("key", "broken") and set(pair.files) == {"ppo.py"}
    assert pair.files["ppo.py"][1] > 0.8  # broken's ppo.py is found in the key's


def test_folders_are_read_without_following_links(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", HALF)
    b = _write(tmp_path / "b", {})
    (b / "ppo.py").symlink_to(answer_path("ppo"))
    (b / "grpo.py").symlink_to(a / "grpo.py")
    assert compare([a, b]) == []


def test_the_grader_notes_similar_pairs(tmp_path: Path, capsys, monkeypatch) -> None:
    """The wiring only: no case and no child (grading itself is test_grading.py's)."""
    import instructor.cases
    import instructor.grading

    monkeypatch.setattr(instructor.cases, "build_cases", lambda seed: [])
    monkeypatch.setattr(instructor.grading, "load_cases", lambda: [])
    monkeypatch.setattr(instructor.grading, "grade", lambda folder, *args: instructor.grading.Grade(str(folder)))
    subs = [
        _write(tmp_path / "alice", HALF),
        _write(tmp_path / "bob", _disguise(HALF)),
        _write(tmp_path / "carol", STUBS),
    ]
    table = tmp_path / "out" / "grades.csv"
    table.parent.mkdir()
    main([*map(str, subs), "--csv", str(table), "--seed", "3", "--gate", "none", "--no_sandbox", "--similarity"])
    notes = {row["submission"]: row["notes"] for row in csv.DictReader(table.open(encoding="utf-8"))}
    report = table.parent / "similarity.html"
    assert f"similar to {subs[1]}: " in notes[str(subs[0])] and f"similar to {subs[0]}: " in notes[str(subs[1])]
    assert "ppo.py" in notes[str(subs[0])] and f"see {report}" in notes[str(subs[0])]
    assert "similar to" not in notes[str(subs[2])]
    assert report.is_file() and "bob/ppo.py" in report.read_text()
    err = capsys.readouterr().err
    assert f"similarity: 1 pairs flagged (score >= {THRESHOLD:g}); report {report}" in err
