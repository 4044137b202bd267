"""What one Gradescope run of the key costs: wall time, CPU time and peak memory summed over its processes.

    sudo .venv/bin/python scripts/autograder_cost.py                      # --tasks 1-4 with its default gates
    sudo .venv/bin/python scripts/autograder_cost.py --tasks 1-16         # every function and all ten gates

Builds the zip as ``python -m instructor gradescope`` does (``--no_sandbox``: Gradescope's containers have no user
namespaces), unzips it into a temporary root laid out as ``/autograder``, runs its ``setup.sh`` against this
interpreter's environment (offline: every pin is installed here) with the children's user ``nobody``, submits the
key (``answer/*_answer.py`` named as a student's files) and runs ``run_autograder``. While it runs, every 0.1 s, it
sums the resident memory of the run's processes (the grader and every process it started, the training child and
its function server at once included); it prints the score, the wall time, the CPU time of all of them (user +
system, from the run's rusage once it is reaped) and the peak of that sum. Needs root (the children run as another
user), as INSTRUCTOR.md §4.10 measures it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from instructor.gate import GATES  # noqa: E402
from instructor.gradescope import build  # noqa: E402
from instructor.grading import assignment  # noqa: E402
from rlhf_practice.course import GRADED, MODULES, module_of  # noqa: E402


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it (by parent id, whatever session it is in)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path("/proc", entry, "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = dict(line.split(":", 1) for line in Path("/proc", str(pid), "status").read_text().splitlines())
            total += int(fields.get("VmRSS", "0 kB").split()[0])
        except (OSError, ValueError):
            continue
    return total / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="1-4")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("run it as root: the children run as the user nobody")
    functions = assignment(args.tasks, None)
    modules = {module_of(f) for f in functions}
    gates = [g.name for g in GATES if set(g.modules) <= modules and set(g.functions) <= set(functions)]
    with tempfile.TemporaryDirectory(prefix="rlhf-cost-") as base:
        base = Path(base)
        os.chmod(base, 0o755)
        build(base / "a.zip", args.seed, gates, timeout=30, gate_timeout=180, memory_mb=3072, sandbox=False,
              functions=functions, visibility="visible")  # fmt: skip
        root = base / "root"
        with zipfile.ZipFile(base / "a.zip") as zf:
            zf.extractall(root / "source")
        for script in ("setup.sh", "run_autograder"):
            (root / "source" / script).chmod(0o755)
        (root / "submission").mkdir(parents=True)
        (root / "results").mkdir()
        for m in MODULES:
            if any(g.module == m for g in GRADED if g.function in functions):
                (root / "submission" / f"{m}.py").write_bytes((ROOT / "answer" / f"{m}_answer.py").read_bytes())
        env = {**os.environ, "AUTOGRADER_ROOT": str(root), "RLHF_VENV": sys.prefix, "RLHF_GRADER_USER": "nobody"}
        subprocess.run(["bash", str(root / "source" / "setup.sh")], env={**env, "PIP_NO_INDEX": "1"}, check=True,
                       capture_output=True)  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.Popen(["bash", str(root / "source" / "run_autograder")], env=env, stdout=subprocess.DEVNULL)
        peak = 0.0
        while not (done := os.wait4(proc.pid, os.WNOHANG))[0]:  # reaped here: its rusage holds all it waited for
            peak = max(peak, rss_mb(descendants(proc.pid)))
            time.sleep(0.1)
        wall, usage = time.perf_counter() - start, done[2]
        cpu = usage.ru_utime + usage.ru_stime
        results = json.loads((root / "results" / "results.json").read_text())
        score = sum(t["score"] for t in results["tests"])
        maximum = sum(t["max_score"] for t in results["tests"])
    print(
        f"--tasks {args.tasks}, gates {', '.join(gates) or 'none'}: score {score:g} of {maximum:g}; wall {wall:.0f} s, "
        f"CPU {cpu:.0f} s (all processes), peak memory {peak:.0f} MiB (summed over the processes alive at once)"
    )


if __name__ == "__main__":
    main()
