"""Instructor only: which submissions of a class share code beyond the stubs (copying a classmate's file).

    python -m instructor.grading submissions/*/ --similarity               # grade, then flag similar pairs
    python -m instructor.similarity submissions/*/ --report similarity.html  # the pairs alone
    python -m instructor.similarity --measure                              # the scores the threshold rests on

Every pair of submissions is compared file by file with the same name (ppo.py with ppo.py, ...) by the
winnowing package copydetect (:class:`copydetect.CopyDetector`, as its own command line does it): each file
is tokenized and filtered (every name becomes ``V``, every function name ``F``, every string ``S``, spaces
and comments go), its k-grams (k = copydetect's noise threshold, 25 filtered characters) are hashed, and the
hashes of the release's stubs (:func:`instructor.release.student_files`) are *boilerplate*: the docstrings,
signatures, stub bodies and untouched helpers every student starts with count for nothing. Each file (and
each stub) is first put in one layout (:func:`normalized`: its functions sorted by name, as ast.unparse
writes them, so no comments), which is what the report shows. So renaming the variables, reordering the
functions or reformatting a copied file changes nothing, and code that only does the same thing, written
independently, shares few k-grams.

For each file, copydetect reports both directions: the share of each file's (non-boilerplate) tokens found
in the other. A pair's **score** is, over all its files, the larger of the two directions of

    (tokens of A's files found in B's same-named files) / (tokens of all A's files)

tokens being copydetect's: the filtered characters its fingerprints cover, boilerplate excluded. Weighted
by tokens, so that a few identical lines in one file do not make two submissions similar; the larger
direction, so that a student who copied only some files of a classmate who did them all is flagged too.
A pair is flagged when its score is at least the threshold (:data:`THRESHOLD`) and the shared code is at
least :data:`MIN_SHARED` tokens (a few lines): two submissions that each hold one short function, written
alike, are not evidence of copying. ``--measure`` prints the scores that the threshold was chosen from.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from markupsafe import escape

THRESHOLD = 0.6  # measured (--measure, INSTRUCTOR.md §4.8): copies 0.77 and up, honest classmates 0.40 at most
MIN_SHARED = 250  # tokens; measured: copies share 334 and up, two right variants each alone 182 at most


@dataclass(frozen=True)
class Pair:
    """Two submissions compared: ``files`` is {file: (share of a's file found in b's, share of b's in a's)}
    for each file both hold with code of their own; ``score`` the pair's score (see the module); ``shared``
    the tokens of shared code on the side the score comes from."""

    a: str
    b: str
    files: dict[str, tuple[float, float]]
    score: float
    shared: int
    # {file: (tokens of a's file found in b's, of b's in a's)}: what a single copied file is flagged by
    file_tokens: dict[str, tuple[int, int]] = field(default_factory=dict)

    def note(self, me: str, report: str | Path | None = None) -> str:
        """The note for submission ``me`` (a or b): "similar to OTHER: SCORE (FILE SHARE, ...)", where each
        file's share is the share of ``me``'s file found in the other's."""
        other, side = (self.b, 0) if me == self.a else (self.a, 1)
        shown = sorted(self.files.items(), key=lambda item: -item[1][side])
        files = ", ".join(f"{name} {shares[side]:.2f}" for name, shares in shown if shares[side] > 0)
        see = f"; see {report}" if report else ""
        return f"similar to {other}: {self.score:.2f} ({files}){see}"


def _stub_files() -> dict[str, str]:
    from instructor.release import student_files

    return {Path(path).name: source for path, source in student_files().items()}


def normalized(source: str) -> str:
    """``source`` in one layout: its other statements first, then its functions and classes sorted by name,
    as ast.unparse writes them (no comments, one formatting); as it is where it does not parse. So that
    reordering the definitions or reformatting a file changes nothing."""
    try:
        tree = ast.parse(source)
        defs = sorted(
            (n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)),
            key=lambda n: n.name,
        )
        tree.body = [n for n in tree.body if n not in defs] + defs
        return ast.unparse(tree) + "\n"
    except (SyntaxError, ValueError, RecursionError):
        return source


def _read(submissions: dict[str, dict[str, bytes]] | list[Path]) -> dict[str, dict[str, bytes]]:
    """{label: {file: contents}}; folders labelled by their path and read as the grader reads them
    (instructor.grading._read_submission, which passes its own reading: this module does not import the
    grader): regular files only, no link followed, no pipe waited on."""
    if isinstance(submissions, dict):
        return submissions
    from instructor.children import SUBMISSION_FILES

    read = {}
    for folder in map(Path, submissions):
        files = read[str(folder)] = {}
        for name in SUBMISSION_FILES:
            try:
                if not stat.S_ISREG(os.lstat(folder / name).st_mode):
                    continue
                with open(os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
                    if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                        files[name] = f.read()
            except OSError:
                continue
    return read


def compare(
    submissions: dict[str, dict[str, bytes]] | list[Path], report: str | Path | None = None, display: float = THRESHOLD
) -> list[Pair]:
    """Every pair of submissions that shares any code beyond the stubs, best score first (not only the
    flagged ones). Writes copydetect's HTML report to ``report`` if given: the file pairs above ``display``
    (either direction), their shared code highlighted."""
    from copydetect import CopyDetector

    from instructor.children import SUBMISSION_FILES

    files = _read(submissions)
    labels = list(files)
    with tempfile.TemporaryDirectory(prefix="rlhf-similarity-") as work:
        root = Path(work)
        (root / "stubs").mkdir()
        for name, source in _stub_files().items():
            (root / "stubs" / name).write_text(normalized(source), encoding="utf-8")
        dirs = []
        for i, label in enumerate(labels):
            folder = root / str(i)
            folder.mkdir()
            for name in SUBMISSION_FILES:
                if name in files[label]:
                    text = files[label][name].decode("utf-8", errors="replace")
                    (folder / name).write_text(normalized(text), encoding="utf-8")
            if any(folder.iterdir()):
                dirs.append(str(folder))
        detector = CopyDetector(
            test_dirs=dirs,
            boilerplate_dirs=[str(root / "stubs")],
            extensions=["py"],
            same_name_only=True,
            ignore_leaf=True,  # never a submission's file with itself
            autoopen=False,
            silent=True,
            display_t=display,
        )
        if len(dirs) >= 2:
            detector.run()
        pairs = _pairs(detector, root, labels)
        if report is not None:
            _write_report(detector, root, labels, Path(report), len(dirs) >= 2)
    return sorted(pairs, key=lambda p: (-p.score, p.a, p.b))


def _pairs(detector, root: Path, labels: list[str]) -> list[Pair]:
    """The pairs from a detector that has run: per file both shares, then the pair's score."""

    def owner(path: str) -> tuple[int, str]:
        p = Path(path)
        return int(p.parent.name), p.name

    coverage: dict[int, int] = {}  # a submission's tokens, all files together
    for path, fingerprint in detector.file_data.items():
        i, _ = owner(path)
        coverage[i] = coverage.get(i, 0) + int(fingerprint.token_coverage)
    per_pair: dict[tuple[int, int], dict[str, tuple[float, float]]] = {}
    per_file: dict[tuple[int, int], dict[str, tuple[int, int]]] = {}
    found: dict[tuple[int, int], list[float]] = {}  # tokens of i's files found in j's, and of j's in i's
    for x, test_f in enumerate(detector.test_files):
        for y, ref_f in enumerate(detector.ref_files):
            (i, name), (j, _) = owner(test_f), owner(ref_f)
            if i >= j or detector.similarity_matrix.size == 0:
                continue
            share_i, share_j = (float(s) for s in detector.similarity_matrix[x, y])
            if share_i < 0 or (share_i == 0 and share_j == 0):  # -1: not compared (another name)
                continue
            per_pair.setdefault((i, j), {})[name] = (share_i, share_j)
            tokens_i = share_i * detector.file_data[test_f].token_coverage
            tokens_j = share_j * detector.file_data[ref_f].token_coverage
            per_file.setdefault((i, j), {})[name] = (int(round(tokens_i)), int(round(tokens_j)))
            tokens = found.setdefault((i, j), [0.0, 0.0])
            tokens[0] += tokens_i
            tokens[1] += tokens_j
    pairs = []
    for (i, j), shares in per_pair.items():
        sides = [
            found[i, j][0] / coverage[i] if coverage[i] else 0.0,
            found[i, j][1] / coverage[j] if coverage[j] else 0.0,
        ]
        side = 0 if sides[0] >= sides[1] else 1
        shared = int(round(found[i, j][side]))
        files = dict(sorted(shares.items()))
        pairs.append(
            Pair(labels[i], labels[j], files, float(sides[side]), shared, dict(sorted(per_file[i, j].items())))
        )
    return pairs


def flagged(pair: Pair, threshold: float = THRESHOLD) -> bool:
    """Whether ``pair`` is flagged: its score reaches ``threshold`` with MIN_SHARED tokens or more shared, or
    one file of it does (either direction): a file copied whole is flagged however much else the folder holds."""
    if pair.score >= threshold and pair.shared >= MIN_SHARED:
        return True
    return any(
        share >= threshold and tokens >= MIN_SHARED
        for name, shares in pair.files.items()
        for share, tokens in zip(shares, pair.file_tokens.get(name, (0, 0)))
    )


def similar_pairs(
    submissions: dict[str, dict[str, bytes]] | list[Path],
    threshold: float = THRESHOLD,
    report: str | Path | None = None,
) -> list[Pair]:
    """The flagged pairs of ``submissions`` ({label: {file: contents}}, or folders read as the grader
    reads them, labelled by their path), best score first; copydetect's HTML report written to ``report``."""
    return [p for p in compare(submissions, report, display=threshold) if flagged(p, threshold)]


def _write_report(detector, root: Path, labels: list[str], report: Path, compared: bool) -> None:
    """copydetect's own report, with the temporary folders replaced by the submissions' labels."""
    if not compared:
        html = "<html><body><p>Fewer than two submissions with files: nothing compared.</p></body></html>\n"
    else:
        html = detector.generate_html_report(output_mode="return")
        html = re.sub(re.escape(str(root)) + r"/(\d+)\b", lambda m: str(escape(labels[int(m[1])])), html)
        html = html.replace(str(root) + "/stubs", "release stubs (boilerplate)")
    report.write_text(html, encoding="utf-8")


# --- --measure: the scores the threshold was chosen from ---------------------------------------------------


class _Rename(ast.NodeTransformer):
    """Every parameter and local name of every function renamed consistently (``v0``, ``v1``, ...)."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]
        local = [a.arg for a in params]
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id not in local:
                local.append(sub.id)
        names = {name: f"v{i}" for i, name in enumerate(local)}
        for sub in ast.walk(node):
            if isinstance(sub, ast.arg) and sub.arg in names:
                sub.arg = names[sub.arg]
            elif isinstance(sub, ast.Name) and sub.id in names:
                sub.id = names[sub.id]
        return node


def disguised(source: str, padded: bool = False) -> str:
    """``source`` as a copier hides it: locals and parameters renamed, the function definitions in reverse
    order (imports and other statements first), comments gone (ast.unparse); ``padded``: a useless
    statement (``_ = None``) after every second statement of every block inside a function, too."""
    tree = _Rename().visit(ast.parse(source))
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    tree.body = [n for n in tree.body if n not in defs] + defs[::-1]
    for node in ast.walk(ast.Module(body=defs, type_ignores=[])) if padded else ():
        for block_name in ("body", "orelse", "finalbody"):
            block = getattr(node, block_name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                padding = [[stmt, *ast.parse("_ = None").body[: i % 2]] for i, stmt in enumerate(block)]
                setattr(node, block_name, [stmt for pair in padding for stmt in pair])
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _variant_source(variant) -> str:
    """A catalog variant's source with the private helpers of its book module that it calls
    (as instructor.gate.variant_files takes them)."""
    book = inspect.unwrap(variant.fn).__globals__
    source, added = inspect.getsource(variant.fn), set()
    while new := {n for n in re.findall(r"\b(_[a-z]\w*)\(", source) if inspect.isfunction(book.get(n))} - added:
        added |= new
        source += "".join("\n\n" + inspect.getsource(book[n]) for n in sorted(new))
    return source


def _with_variants(variants) -> dict[str, bytes]:
    """The stubs with each variant in place of its function."""
    from instructor.gate import _swap
    from rlhf_practice.course import module_of

    files = _stub_files()
    for v in variants:
        name = f"{module_of(v.function)}.py"
        files[name] = _swap(files[name], v.function, _variant_source(v))
    return {name: source.encode() for name, source in files.items()}


def _all_pairs(submissions: dict[str, dict[str, bytes]]) -> list[Pair]:
    """Every pair of ``submissions``, those that share nothing with score 0."""
    found = {(p.a, p.b): p for p in compare(submissions)}
    labels = list(submissions)
    return [found.get((a, b)) or Pair(a, b, {}, 0.0, 0) for i, a in enumerate(labels) for b in labels[i + 1 :]]


def measure() -> int:
    """Print the scores of the copies (must be flagged) and of independent right variants (must not be),
    and time a class of 30."""
    from instructor.gate import _submission_files
    from instructor.mistakes import CATALOG

    key = _submission_files()
    stubs = {n: s.encode() for n, s in _stub_files().items()}
    two = ("ppo.py", "grpo.py")
    copies = {
        "key": key,
        "key verbatim": dict(key),
        "key renamed+reordered": {n: disguised(s.decode()).encode() for n, s in key.items()},
        "key renamed+reordered+padded": {n: disguised(s.decode(), padded=True).encode() for n, s in key.items()},
        "ppo.py+grpo.py of the key, renamed+reordered": {
            **stubs,
            **{n: disguised(key[n].decode()).encode() for n in two},
        },
        "ppo.py+grpo.py of the key, renamed+reordered+padded": {
            **stubs,
            **{n: disguised(key[n].decode(), padded=True).encode() for n in two},
        },
    }
    # One large file copied, every other function padded (the stubs too): the pair's score is diluted, the file's is not.
    copies["after_grpo.py of the key, renamed+reordered, every other file padded stubs"] = {
        n: disguised((key if n == "after_grpo.py" else stubs)[n].decode(), padded=n != "after_grpo.py").encode()
        for n in stubs
    }
    # A known limit: useless lines in every function of the folder, the untouched stubs' too, dilute the score.
    limit = "ppo.py+grpo.py of the key renamed+reordered+padded, every stub padded too (a known limit)"
    copies[limit] = {n: disguised((key if n in two else stubs)[n].decode(), padded=True).encode() for n in stubs}
    rows = []  # (label, pair, should it be flagged: True, False, or None for the known limit)
    print("| case | score | shared tokens | flagged | should be |\n|---|---:|---:|---|---|")
    for label in list(copies)[1:]:
        (pair,) = compare({"key": key, label: copies[label]}) or [Pair("key", label, {}, 0.0, 0)]
        rows.append((f"{label} vs key", pair, None if label == limit else True))
    right = [v for v in CATALOG if v.verdict == "right"]
    by_function: dict[str, list] = {}
    for v in right:
        by_function.setdefault(v.function, []).append(v)
    # Honest classmates: the i-th right variant of every function that has more than i (none shares a variant).
    width = max(len(vs) for vs in by_function.values())
    honest = {
        f"variants #{i}": _with_variants([vs[i] for vs in by_function.values() if len(vs) > i]) for i in range(width)
    }
    for pair in _all_pairs(honest):
        rows.append((f"{pair.a} vs {pair.b}", pair, False))
    # Harsher: each right variant alone in the stubs, every pair (tiny submissions: one function each).
    singles = _all_pairs({f"{v.function}:{v.name}": _with_variants([v]) for v in right})
    shown = {
        id(p): p for p in [*sorted(singles, key=lambda p: -p.score)[:5], *sorted(singles, key=lambda p: -p.shared)[:5]]
    }
    for pair in shown.values():
        rows.append((f"alone: {pair.a} vs {pair.b}", pair, False))
    for label, pair, should in rows:
        wanted = {True: "flagged", False: "not", None: "flagged, but a known limit"}[should]
        print(f"| {label} | {pair.score:.3f} | {pair.shared} | {flagged(pair)} | {wanted} |")
    copied = [p for _, p, should in rows if should]
    full = [p for label, p, should in rows if should is False and not label.startswith("alone")]
    failures = sum(flagged(p) != should for _, p, should in rows if should is not None) + sum(map(flagged, singles))
    print(
        f"\ncopies: score {min(p.score for p in copied):.3f} to {max(p.score for p in copied):.3f}, shared "
        f"{min(p.shared for p in copied)} tokens or more; honest classmates ({len(honest)} submissions of "
        f"{sum(map(len, by_function.values()))} right variants): max score {max(p.score for p in full):.3f}, max shared "
        f"{max(p.shared for p in full)}; each right variant alone ({len(right)}, {len(singles)} pairs): max score "
        f"{max(p.score for p in singles):.3f}, max shared {max(p.shared for p in singles)} tokens, "
        f"{sum(map(flagged, singles))} flagged; threshold {THRESHOLD}, at least {MIN_SHARED} shared tokens"
    )
    klass = {f"key{i}": key for i in range(10)}
    klass |= {f"stubs{i}": stubs for i in range(10)}
    klass |= {f"half{i}": {**stubs, **{n: key[n] for n in two}} for i in range(10)}
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        found = similar_pairs(klass, report=Path(work) / "similarity.html")
        seconds = time.perf_counter() - start
    print(
        f"a class of 30 (10 keys, 10 stubs, 10 with the key's ppo.py and grpo.py): {len(found)} pairs flagged "
        f"in {seconds:.1f} s, the report included"
    )
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m instructor.similarity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("submissions", nargs="*", type=Path, help="folders that each hold a copy of rlhf_practice/rl/")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, help="score from which a pair is flagged")
    parser.add_argument("--report", type=Path, default=Path("similarity.html"), help="where to write the HTML report")
    parser.add_argument("--measure", action="store_true", help="print the scores the threshold was chosen from")
    args = parser.parse_args(argv)
    if args.measure:
        raise SystemExit(measure())
    if len(args.submissions) < 2:
        parser.error("give two or more submission folders (or --measure)")
    for pair in similar_pairs(args.submissions, args.threshold, args.report):
        print(f"{pair.a} / {pair.b}: {pair.score:.2f} ({pair.shared} tokens shared); {pair.note(pair.a)}")
    print(f"report written to {args.report}", file=sys.stderr)


if __name__ == "__main__":
    main()
