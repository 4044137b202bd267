"""How long checking one graded function takes, against ``python -c "import torch"`` on the same machine.

    python scripts/check_speed.py                    # compute_advantages and dpo_loss, 5 rounds
    python scripts/check_speed.py --rounds 3 --suite # also the instructor's whole `pytest --impl answer`

Each round runs every command once, one after the other, so that a busy moment slows all of them alike:
``python -c "import torch"``, then ``pytest -q -m graded -k <function>`` in this copy (``--impl answer``)
and in a student release built from it (``python -m instructor release``, with the answer key's files
copied in, as a student who has finished). It prints each command's median and fastest wall time and
its ratio to import torch (median over median). Nothing here is a test: it prints.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.course import MODULES, answer_path  # noqa: E402


def _seconds(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"error: {' '.join(command)} (in {cwd}) exited {done.returncode}:\n{done.stdout[-1500:]}")
    return took


def _release(folder: Path) -> Path:
    """A student release in ``folder``, every student file replaced by the answer key's."""
    out = folder / "student"
    subprocess.run([sys.executable, "-m", "instructor", "release", str(out)], cwd=ROOT, check=True, capture_output=True)
    for module in MODULES:
        shutil.copy(answer_path(module), out / "rlhf_practice" / "rl" / f"{module}.py")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="times each command runs (>= 1)")
    parser.add_argument("--functions", nargs="+", default=["compute_advantages", "dpo_loss"], help="graded functions")
    parser.add_argument("--suite", action="store_true", help="also time the whole `pytest --impl answer` (minutes)")
    args = parser.parse_args()
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory() as tmp:
        release = _release(Path(tmp))
        commands = {"python -c 'import torch'": ([sys.executable, "-c", "import torch"], ROOT)}
        for function in args.functions:
            selected = ["-m", "graded", "-k", function]
            commands[f"pytest -m graded -k {function} --impl answer"] = ([*pytest, *selected, "--impl=answer"], ROOT)
            commands[f"release: pytest -m graded -k {function}"] = ([*pytest, *selected], release)
        if args.suite:
            commands["pytest --impl answer"] = ([*pytest, "--impl=answer"], ROOT)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(max(1, args.rounds)):
            for name, (command, cwd) in commands.items():
                times[name].append(_seconds(command, cwd))
    torch_median = statistics.median(times["python -c 'import torch'"])
    print(f"{'command':58s} {'median s':>9s} {'fastest s':>10s} {'x import torch':>15s}")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{name:58s} {median:9.2f} {min(seconds):10.2f} {median / torch_median:15.2f}")


if __name__ == "__main__":
    main()
