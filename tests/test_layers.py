"""The package's imports form layers: no module imports itself in a circle, nothing in the package
imports the instructor wing, the answer key or the scripts, and the student files import only torch.
Checking one graded function imports none of the slow libraries (transformers and the like)."""

from __future__ import annotations

import subprocess
import sys

from _imports import circle, graph, imports

from rlhf_practice import PACKAGE_DIR

ROOT = PACKAGE_DIR.parent


def test_no_module_imports_in_a_circle() -> None:
    found = circle(graph(PACKAGE_DIR))
    assert found is None, "import circle: " + " -> ".join(found or [])


def test_the_package_never_imports_the_instructor_wing_or_the_key() -> None:
    for path in PACKAGE_DIR.rglob("*.py"):
        bad = {
            m
            for m in imports(path)
            if m.split(".")[0] in ("instructor", "answer", "scripts", "train_ppo", "train_grpo")
        }
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: the package must work without them"


def test_student_files_import_only_torch() -> None:
    for path in (PACKAGE_DIR / "rl").glob("*.py"):
        if path.name != "__init__.py":
            outside = {m for m in imports(path) if m.split(".")[0] not in ("torch", "__future__", "math")}
            assert not outside, f"{path.relative_to(ROOT)} imports {sorted(outside)}"


# Each takes from a tenth of a second (pyarrow) to seconds (transformers) to import.
SLOW_TO_IMPORT = ("transformers", "datasets", "tensorboard", "matplotlib", "pyarrow", "tyro")


def test_checking_one_graded_function_imports_no_slow_library() -> None:
    """`pytest -m graded -k compute_advantages` is the inner loop of the course, so it stays at about
    a second plus torch's import. Collecting imports every test module, selected or not: test modules
    and the package modules they import bring in the libraries above inside the functions that use
    them, never at the top."""
    code = (
        "import sys, pytest\n"
        "pytest.main(['-m', 'graded', '-k', 'compute_advantages', '-q', '-p', 'no:cacheprovider'])\n"
        f"print(sorted(m for m in {SLOW_TO_IMPORT!r} if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    imported = proc.stdout.splitlines()[-1] if proc.stdout else proc.stderr
    assert imported == "[]", f"pytest -m graded -k compute_advantages imports {imported}: import it where it is used"
