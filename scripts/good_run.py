"""Redraw README's picture of a good run, docs/good_run.png: the two default trainings and their comparison.

    python scripts/good_run.py                    # your functions (--impl student), writes docs/good_run.png
    python scripts/good_run.py --out my_run.png   # somewhere else

It runs ``python train_ppo.py`` and ``python train_grpo.py`` as README shows them (tiny preset, seed 0,
nothing else changed) in a temporary folder, then ``python -m rlhf_practice.compare`` on the two runs.
The runs are byte-identical on one machine; another CPU rounds the last bits of some sums differently,
so its curves drift apart from the picture after a few dozen steps while keeping its shape.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", default=os.environ.get("RLHF_IMPL", "student"), help="the scripts' --impl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs/good_run.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for algorithm in ("ppo", "grpo"):
            command = [sys.executable, f"train_{algorithm}.py", "--impl", args.impl, "--seed", str(args.seed)]
            command += ["--preset", "tiny", "--run_dir", tmp, "--run_name", f"{algorithm}-demo"]
            print(" ".join(command[1:]), "...", file=sys.stderr, flush=True)
            if subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL).returncode != 0:
                sys.exit(f"{' '.join(command[1:])} failed (its message is above)")
        runs = [str(Path(tmp) / f"{a}-demo") for a in ("ppo", "grpo")]
        compare = [sys.executable, "-m", "rlhf_practice.compare", *runs, "--out", str(args.out)]
        sys.exit(subprocess.run(compare, cwd=ROOT).returncode)


if __name__ == "__main__":
    main()
