"""Run one of TASKS.md's experiments over several seeds and print its table (median [min, max]).

    python scripts/experiments.py levels             # checkpoint 7: sequence- vs token-level PPO
    python scripts/experiments.py loss_type          # checkpoint 8: GRPO-clip's three normalizations
    python scripts/experiments.py kl_ref             # checkpoint 9: beta = 0 vs 0.2, KL to the reference
    python scripts/experiments.py levels --seeds 0 1 2 --impl answer --extra --num_steps 20

Each run is the training script started as a user starts it (tiny preset unless --extra says
otherwise), in a temporary folder. The figures are read from the runs' metrics: "final" is the mean
of the last 10 % of steps, "gain" is final minus the mean of the first 10 %. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.tracking import final_mean, load_run  # noqa: E402

# name: [(row label, algorithm, flags)]
EXPERIMENTS = {
    "levels": [
        ("PPO --level sequence", "ppo", []),
        ("PPO --level token", "ppo", ["--level", "token"]),
    ],
    "loss_type": [
        (f"GRPO-clip --loss_type {loss_type}", "grpo", ["--level", "token", "--loss_type", loss_type])
        for loss_type in ("grpo", "dapo", "dr_grpo")
    ],
    "kl_ref": [
        ("PPO token --beta 0", "ppo", ["--level", "token", "--beta", "0"]),
        ("PPO token --beta 0.2", "ppo", ["--level", "token", "--beta", "0.2"]),
    ],
}
# column: (tag, how) -- how is "final", "gain" or "reach" (first step with reward/mean >= 0.8)
COLUMNS = {
    "reward gain": ("reward/mean", "gain"),
    "final reward": ("reward/mean", "final"),
    "steps to 0.8": ("reward/mean", "reach"),
    "final kl/ref": ("kl/ref", "final"),
    "final policy/entropy": ("policy/entropy", "final"),
    "final response/length": ("response/length", "final"),
    "wall s": ("", "wall"),
}


def run_once(algorithm: str, flags: list[str], seed: int, impl: str, extra: list[str]) -> dict[str, float | None]:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, f"train_{algorithm}.py", "--preset", "tiny", "--impl", impl, "--seed", str(seed)]
        command += ["--run_dir", tmp, "--run_name", "run", *flags, *extra]
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(command[1:])} failed: {proc.stderr.strip().splitlines()[-1:]}")
        run = load_run(Path(tmp) / "run")
    figures: dict[str, float | None] = {}
    for column, (tag, how) in COLUMNS.items():
        values = run.metrics.get(tag, [])
        if how == "wall":
            figures[column] = run.wall_seconds()
        elif how == "reach":
            reached = run.first_reaching(0.8)
            figures[column] = None if reached is None else reached[0]
        elif not values:
            figures[column] = None
        else:
            figures[column] = final_mean(values) - (final_mean(values[::-1]) if how == "gain" else 0.0)
    return figures


def _cell(values: list[float | None]) -> str:
    known = sorted(v for v in values if v is not None)
    if not known:
        return "–"
    fmt = (lambda v: f"{v:.0f}") if all(float(v).is_integer() for v in known) else (lambda v: f"{v:.3g}")
    cell = f"{fmt(known[len(known) // 2])} [{fmt(known[0])}, {fmt(known[-1])}]"
    return cell + (f" ({len(values) - len(known)} never)" if len(known) < len(values) else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--impl", default=os.environ.get("RLHF_IMPL", "student"), help="the scripts' --impl")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="flags passed on to every run")
    args = parser.parse_args()

    rows = []
    for label, algorithm, flags in EXPERIMENTS[args.experiment]:
        runs = []
        for seed in args.seeds:
            print(f"{label}, seed {seed} ...", file=sys.stderr, flush=True)
            runs.append(run_once(algorithm, flags, seed, args.impl, args.extra))
        rows.append([label, *(_cell([r[c] for r in runs]) for c in COLUMNS)])
    seeds = ", ".join(map(str, args.seeds))
    print(f"{args.experiment}: median [min, max] over seeds {seeds}\n")
    print("| run | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
