"""Benchmark both training scripts end to end and print the figures as JSON.

    python scripts/benchmark.py                           # tiny preset, your rl/ functions, both algorithms
    python scripts/benchmark.py --preset gpt2 --algorithms ppo
    python scripts/benchmark.py --extra --num_steps 20    # extra flags go to both scripts

Each script runs as its own process, exactly as a user starts it, so the wall time includes
start-up (imports, loading the model and data). Per algorithm it reports: wall time, steps per
second, generated tokens per second, the reward gain (mean of the first 10 % of steps vs the last
10 %), seconds and steps until the batch mean reward first reaches --target, and peak memory (GPU
memory allocated by torch on CUDA, resident memory on a CPU). Nothing here is a test: it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.tracking import final_mean, load_run  # noqa: E402


def _median(values: list[float]) -> float | None:
    """Median of the finite values (explained variance is NaN on steps whose rewards were all equal)."""
    finite = sorted(v for v in values if v == v)
    return round(finite[len(finite) // 2], 3) if finite else None


def benchmark(algorithm: str, preset: str, impl: str, target: float, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, f"train_{algorithm}.py", "--preset", preset, "--impl", impl]
        command += ["--run_dir", tmp, "--run_name", "bench", *extra]
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
        run = load_run(Path(tmp) / "bench")

    m = run.metrics
    rows_per_step = run.config["train_batch_size"] * run.config.get("grpo_group_size", 1)
    train_seconds = sum(m["time/step_s"])
    tokens = sum(length * rows_per_step for length in m["response/length"])
    rewards = m["reward/mean"]
    first, last = final_mean(rewards[::-1]), final_mean(rewards)  # first and last 10 % of steps
    reached = run.first_reaching(target)
    return {
        "device": "cuda" if "device=cuda" in proc.stderr else "cpu",
        "steps": len(run.steps),
        "rows_per_step": rows_per_step,
        "wall_s": round(wall, 1),
        "train_s": round(train_seconds, 1),
        "startup_s": round(wall - train_seconds, 1),
        "steps_per_s": round(len(run.steps) / train_seconds, 2),
        "generated_tokens_per_s": round(tokens / train_seconds, 1),
        "reward_first_10pct": round(first, 3),
        "reward_last_10pct": round(last, 3),
        "reward_gain": round(last - first, 3),
        f"steps_to_reward_{target}": None if reached is None else reached[0],
        f"seconds_to_reward_{target}": None if reached is None else round(reached[1], 1),
        "peak_memory_mb": run.summary["peak_memory_mb"],
        "final_kl_approx": m["kl/approx"][-1] if "kl/approx" in m else None,
        "value_explained_variance_median": _median(m.get("value/explained_variance", [])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", nargs="+", default=["ppo", "grpo"], choices=["ppo", "grpo"])
    parser.add_argument("--preset", default="tiny", choices=["auto", "tiny", "gpt2"])
    parser.add_argument(
        "--impl",
        default=os.environ.get("RLHF_IMPL", "student"),
        help='whose rl/ functions the scripts run, as their --impl: "student" (default, as the scripts), "answer", a folder',
    )
    parser.add_argument("--target", type=float, default=0.8, help="reward level for steps/seconds_to_reward")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="flags passed on to both scripts")
    args = parser.parse_args()
    results = {}
    for algorithm in args.algorithms:
        print(f"running train_{algorithm}.py --preset {args.preset} ...", file=sys.stderr, flush=True)
        results[algorithm] = benchmark(algorithm, args.preset, args.impl, args.target, args.extra)
    print(json.dumps({"preset": args.preset, "impl": args.impl, **results}, indent=2))


if __name__ == "__main__":
    main()
